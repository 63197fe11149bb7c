"""Run hypothesis-generated frames through both targets and compare everything observable.

Compared per frame: the egress ports and the exact egress bytes, in order per port (the
programs write the priority into the frame, DSCP / the IPv4 TOS precedence, so
a different priority is a different byte); at the end: every cell of every
counter, packets and bytes. The first difference makes hypothesis shrink the
frame and raise :class:`Difference` with both targets' outputs. Digest samples
(P4Runtime DigestList) are compared at the end, in order.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from echelon.waiting import WaitTimeout, wait_until
from tests.p4.differential.catalog import PROGRAMS
from tests.p4.differential.rig import Outputs, rigs


class Difference(AssertionError):
    """BMv2 and the soft switch disagreed."""


@dataclass
class Result:
    program: str
    frames: int = 0
    outputs: int = 0
    dropped: int = 0
    counter_cells: int = 0
    digests: int = 0
    #: counter name -> {index: packets} of the cells that counted something (coverage).
    counted: dict[str, dict[int, int]] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)


def _show(out: Outputs) -> str:
    return "; ".join(f"port {p}: {d.hex()}" for p, d in out) or "nothing"


def compare(program: str, examples: int, log_dir: Path, seed: int | None = None) -> Result:
    """``examples`` frames of ``program`` through both targets; the result and any difference."""
    prog, frames = PROGRAMS[program]
    res = Result(program)
    with rigs(prog, log_dir) as (bmv2, soft):

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=seed is None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate, Phase.shrink],
        )
        @given(st.sampled_from(prog.ports), frames)
        def one(port: int, frame: bytes) -> None:
            res.frames += 1
            # per port, in order (the order between ports is BMv2's threads' race)
            want = sorted(bmv2.run(port, frame), key=lambda out: out[0])
            got = sorted(soft.run(port, frame), key=lambda out: out[0])
            res.outputs += len(want)
            res.dropped += not want
            if want != got:
                raise Difference(
                    f"{program}: frame {frame.hex()} into port {port}\n"
                    f"  bmv2: {_show(want)}\n  soft: {_show(got)}"
                )

        if seed is not None:
            one = settings(derandomize=False)(one)  # type: ignore[assignment]
        try:
            one()
        except Difference as exc:
            res.differences.append(str(exc))
            return res
        # Digests travel on the stream, apart from the frames: wait for the last ones.
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: len(soft.digests) == len(bmv2.digests), 10, "digests")
        res.digests = len(bmv2.digests)
        if bmv2.digests != soft.digests:
            at = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(bmv2.digests, soft.digests, strict=False))
                    if a != b
                ),
                min(len(bmv2.digests), len(soft.digests)),
            )
            res.differences.append(
                f"{program}: digests differ at #{at} of {len(bmv2.digests)} (bmv2) / "
                f"{len(soft.digests)} (soft): bmv2 {bmv2.digests[at : at + 3]} "
                f"soft {soft.digests[at : at + 3]}"
            )
        want_c, got_c = bmv2.counters(), soft.counters()
        res.counter_cells = sum(len(cells) for cells in want_c.values())
        res.counted = {
            n: {i: c[0] for i, c in cells.items() if c[0]} for n, cells in want_c.items()
        }
        for name in sorted(want_c):
            for idx, cell in sorted(want_c[name].items()):
                if got_c.get(name, {}).get(idx) != cell:
                    res.differences.append(
                        f"{program}: counter {name}[{idx}] bmv2 {cell} soft {got_c[name].get(idx)}"
                    )
    return res
