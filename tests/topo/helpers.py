"""Shared by the topo tests: a copy of a topology file on free ports, and PID checks."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from targets.process import free_port

ROOT = Path(__file__).resolve().parents[2]


def topo_on_free_ports(src: str, dst: Path) -> Path:
    """``src`` with every switch's gRPC and thrift port replaced by free ones, so a
    test never collides with a demo (or another test) using the same file."""
    data = yaml.safe_load((ROOT / src).read_text())
    for sw in data["switches"].values():
        sw["grpc"] = f"127.0.0.1:{free_port()}"
        sw["thrift_port"] = free_port()
    dst.write_text(yaml.safe_dump(data))
    return dst


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False


needs_root = os.geteuid() != 0
