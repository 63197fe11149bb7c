"""P4Runtime insert rate of the soft switch and of BMv2, measured in one run.

Each target is started by :func:`targets.switch.start_target` (no ports, pinned to
the same CPU), given the pipeline, and sent the same pre-built INSERT updates
(``--batch`` per WriteRequest) from one :class:`p4client.p4rt.SwitchConnection`;
only the Write calls are timed. Rounds alternate between the targets and the
entries are deleted (untimed) after each, so background load hits both alike.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from bench.harness import timed
from controlplane.daemon import DEFAULT_JSON, DEFAULT_P4INFO
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import SwitchConnection
from targets.process import free_port
from targets.switch import BMV2_BINARY, start_target


def insert_rates(
    entries: Sequence[TableEntry],
    rounds: int = 3,
    batch: int = 1000,
    cpus: str | None = None,
) -> dict[str, list[float]]:
    """Entries/s per round for ``soft`` and (when installed and built) ``bmv2``."""
    kinds = ["soft"]
    if shutil.which(BMV2_BINARY) and DEFAULT_JSON.exists():
        kinds.append("bmv2")
    config = DEFAULT_JSON.read_bytes() if DEFAULT_JSON.exists() else b""
    info = P4Info.load(DEFAULT_P4INFO)
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="echelon-inserts-") as tmp:
        targets = {}
        conns = {}
        try:
            for k in kinds:
                addr = f"127.0.0.1:{free_port()}"
                log = Path(tmp) / f"{k}.log"
                targets[k] = start_target(k, {}, addr, free_port(), log_path=log, cpus=cpus)  # type: ignore[arg-type]
                conns[k] = SwitchConnection(addr, p4info=info)
                conns[k].connect()
                conns[k].set_pipeline(info, config)
            for _ in range(rounds):
                for k in kinds:
                    sw = conns[k]
                    updates = sw.updates("INSERT", entries)
                    _, wall, _ = timed(partial(sw.write, updates, chunk=batch))
                    rates[k].append(len(entries) / wall)
                    sw.write(sw.updates("DELETE", entries), chunk=batch)
        finally:
            for c in conns.values():
                c.close()
            for t in targets.values():
                t.stop()
    return rates


def report(rates: dict[str, list[float]], n: int, batch: int) -> str:
    lines = [
        f"P4Runtime inserts, {n} entries per round, {batch} per WriteRequest "
        f"(median of {len(next(iter(rates.values())))} alternating rounds):",
        "",
        "| target | entries/s (median) | rounds |",
        "|---|---:|---|",
    ]
    for k, xs in rates.items():
        lines.append(
            f"| {k} | {statistics.median(xs):,.0f} | {', '.join(f'{x:,.0f}' for x in xs)} |"
        )
    if "bmv2" in rates:
        ratio = statistics.median(rates["soft"]) / statistics.median(rates["bmv2"])
        lines.append(f"\nsoft / bmv2 = {ratio:.2f}")
    else:
        lines.append(
            "\nbmv2: not measured (simple_switch_grpc or p4src/build/echelon.json missing)"
        )
    return "\n".join(lines)
