"""Shared helpers for the controlplane tests: topology files and specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from targets.process import free_port

ROOT = Path(__file__).resolve().parents[2]
P4INFO = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
#: p4c's BMv2 JSON: the soft switch, like BMv2, runs only the program it is given.
DEVICE_CONFIG = (ROOT / "p4src" / "build" / "echelon.json").read_bytes()


def write_topo(path: Path, grpc_addrs: list[str], thrift_ports: list[int] | None = None) -> Path:
    """A star per switch address is overkill: one switch per address in a chain,
    hosts h1..h4 on the first switch and h5 on the last (so routes differ). Without
    ``thrift_ports`` each switch gets a port nothing listens on (not the default 9090,
    where another test's switch may be serving)."""
    ports = thrift_ports or [free_port() for _ in grpc_addrs]
    switches = {
        f"s{i + 1}": {"device_id": 0, "grpc": a, "thrift_port": t}
        for i, (a, t) in enumerate(zip(grpc_addrs, ports, strict=True))
    }
    hosts = {f"h{i}": {"ip": f"10.0.0.{i}", "mac": f"00:00:0a:00:00:{i:02x}"} for i in range(1, 6)}
    links: list[dict[str, Any]] = [
        {"a": f"h{i}", "b": "s1", "b_port": i, "bw_mbit": 100} for i in range(1, 5)
    ]
    for i in range(1, len(grpc_addrs)):
        links.append({"a": f"s{i}", "a_port": 10, "b": f"s{i + 1}", "b_port": 11})
    links.append({"a": "h5", "b": f"s{len(grpc_addrs)}", "b_port": 5})
    path.write_text(
        yaml.safe_dump({"name": "t", "switches": switches, "hosts": hosts, "links": links})
    )
    return path


def spec(
    job: str, groups: int = 1, sources: tuple[str, ...] = ("h1", "h2"), dst: str = "h4"
) -> dict[str, Any]:
    """An explicit EchelonFlow registration: each group staggers its flows 1 ms apart.
    On ``write_topo``'s chain, ``dst="h5"`` makes every flow cross every switch."""
    return {
        "job": job,
        "echelonflows": [
            {
                "group": f"g{g}",
                "flows": [
                    {"src": s, "dst": dst, "size": 10000, "offset": 0.001 * k}
                    for k, s in enumerate(sources)
                ],
            }
            for g in range(groups)
        ],
    }
