"""MLCommons Chakra execution traces as EchelonFlow jobs.

:mod:`echelon.chakra.protobuf` holds the schema's protobuf classes, :mod:`echelon.chakra.trace`
reads and checks a rank's file (or a directory of them), and
:mod:`echelon.chakra.convert` turns a trace into a ``dag`` job description
(:mod:`echelon.paradigms.dag`) that every consumer of job files accepts.
"""
