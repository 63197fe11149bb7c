"""Topologies as data, switch targets, the Mininet launcher and the `make run` driver."""
