"""Tests of the PTF suite (ptf_tests/): its frame model, and the suite run end to end."""
