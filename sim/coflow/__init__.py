"""Coflow-benchmark traces: the trace reader, their engine, and coflowsim-compatible semantics."""
