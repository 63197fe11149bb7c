"""Switch targets: start, drive and stop BMv2 or the soft switch, and the process helpers.

:mod:`targets.switch` starts either target with simple_switch_grpc's command line
(the one launcher every test, benchmark and the demo use); :mod:`targets.process`
holds the one ``free_port`` / ``stop_process`` (the deadline wait they use is
:func:`echelon.waiting.wait_until`).
"""
