"""Embedded software switch: simple_switch semantics behind a P4Runtime server.

It runs the program p4c compiled (the BMv2 JSON pushed with
SetForwardingPipelineConfig, like simple_switch_grpc), compiled once to Python
closures (:mod:`softswitch.bm`),
queues packets like simple_switch 1.15's ``QueueingLogicPriRL``
(:mod:`softswitch.queueing`) and is programmed over P4Runtime
(:mod:`softswitch.p4rt_server`). See docs/softswitch.md.
"""
