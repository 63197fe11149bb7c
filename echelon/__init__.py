"""EchelonFlow core: the abstraction, training-paradigm models and scheduling policies.

Pure Python with no network access. The data flows one way:
job description (``echelon.paradigms``) -> EchelonFlows (``echelon.model``) ->
schedule (``echelon.policies``) -> priority levels (``echelon.quantize``), which the
controller turns into table entries and the simulator into bandwidth shares.
"""
