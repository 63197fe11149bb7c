"""Switch targets: start, drive and stop BMv2 or the soft switch, and the process helpers.

:mod:`targets.switch` starts either target with simple_switch_grpc's command line
(the one launcher every test, benchmark and the demo use); :mod:`targets.process`
holds the one ``wait_until`` / ``free_port`` / ``stop_process``.
"""
