"""The switch client library: P4Runtime (gRPC) and BMv2's Thrift runtime API.

A layer of its own above the core (:mod:`echelon`) and below everything that
talks to a switch: the controller service (:mod:`controlplane`), the switch
launchers (:mod:`targets`), the PTF suite and the soft switch's servers (which
share the Thrift declarations, :mod:`p4client.thrift_decl`, the P4Info index and
the entry encoder with the client). It imports nothing of the project but
:mod:`echelon`.
"""
