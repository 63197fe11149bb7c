"""Embedded software switch: simple_switch semantics behind a P4Runtime server.

BMv2 cannot be installed on the machines this project is developed on, so the
PTF suite, the Mininet demo and CI run against this process instead. It executes
``p4src/echelon.p4`` table for table in Python (:mod:`softswitch.program`),
queues packets like simple_switch 1.15's ``QueueingLogicPriRL``
(:mod:`softswitch.queueing`) and is programmed over P4Runtime
(:mod:`softswitch.p4rt_server`). See docs/softswitch.md.
"""
