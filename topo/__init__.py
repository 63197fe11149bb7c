"""The emulation: topologies as data, the Mininet launcher and the `make run` driver.

Switch targets (BMv2, the soft switch) are started by :mod:`targets`.
"""
