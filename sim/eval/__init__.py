"""The evaluation: ``python -m sim.eval`` writes docs/evaluation.md and docs/figures/."""
