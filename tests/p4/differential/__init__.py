"""Differential testing: the same frames through BMv2 and the soft switch, byte for byte."""
