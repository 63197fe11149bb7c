"""PTF packet tests of the EchelonFlow data plane; run them with ``python -m ptf_tests.run``.

``ptf --test-dir ptf_tests`` imports every module here by file name; only
classes with a ``runTest`` are tests, so the helpers (base, burst, packets,
run) contribute none.
"""
