"""Flow-level simulator of EchelonFlow scheduling and the evaluation report.

``sim.core.engine`` runs jobs (the core's ``IterationPlan``s) on a network with a
policy; ``sim.workloads`` builds realistic jobs and mixes; ``sim.cli`` is the
``echelon-sim`` command; ``python -m sim.eval`` writes ``docs/evaluation.md``;
``sim.predict`` predicts per-flow finish times for the emulated demo.
"""
