"""Benchmarks, soak runs and lab tools: commands a developer runs (``make bench``), never
imported by the runtime packages. Each module is ``python -m bench.<name>``, except
:mod:`bench.harness`, what they share (run as a command, timing, percentiles)."""
