"""Flow-level simulator of EchelonFlow scheduling and the evaluation report.

Subpackages by role: ``sim.core`` is the fluid engine (``Simulator`` runs jobs, the
core's ``IterationPlan``s, on a network with a policy) and its allocator;
``sim.workloads``, ``sim.topology`` and ``sim.traces`` build its inputs;
``sim.points`` and ``sim.sweep`` run grids locally, ``sim.ray`` on a Ray cluster;
``sim.coflow`` reads coflow-benchmark traces and has the coflowsim-compatible
mode; ``sim.packet`` is the packet-level model and ``sim.predict`` the fluid
prediction that the emulation is checked against; ``sim.cli`` is the
``echelon-sim`` command; ``python -m sim.eval`` writes ``docs/evaluation.md``.
Benchmarks live in ``bench/``, not here.
"""
