"""The program on emulated hosts: plays a job's traffic and records finish times."""
