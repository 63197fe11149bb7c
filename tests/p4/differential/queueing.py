"""Queueing metadata and registers, BMv2 vs the soft switch, on ``tests/p4/programs/qmeta.p4``.

The hypothesis rig (:mod:`tests.p4.differential.rig`) sends a frame and waits
it out, so every queue it sees is empty. Queue depths need a *burst*, and the
same burst on both switches, so the arrival pattern is made identical this way:

1. Port 2's queues are rate limited to ``RATE_PPS`` (10 pps: one departure per
   100 ms per priority queue, ``set_queue_rate 10 2`` on both switches).
2. One *pacer* probe per priority of the burst is sent and awaited at port 2's
   host. Each pacer leaves its idle queue at once and sets that queue's next
   departure slot 100 ms later (simple_switch's ``max(now, last + 1/rate)``).
3. The burst is sent back to back (µs apart) right after the pacers are seen,
   so on both switches every burst probe is enqueued before its queue's next
   slot: the k-th probe of a priority finds k probes ahead of it (``enq_qdepth``)
   and leaves n-1-k behind (``deq_qdepth``), independent of either switch's speed.

Depths and the register values (counts per priority) must then be equal on
both switches and equal to those numbers. Times differ by whatever each switch
and the loaded machine add, so they are compared within tolerances:
``deq_timedelta`` within ``SOJOURN_TOLERANCE_US`` of the other switch's,
``enq_timestamp`` (µs since the switch started) between two
``get_time_elapsed_us`` readings taken around the burst, and on each switch
``egress_global_timestamp - enq_timestamp`` equals ``deq_timedelta`` within
``CLOCK_TOLERANCE_US`` (BMv2 reads its clock twice).
"""

from __future__ import annotations

import select
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from p4client.bmruntime import RuntimeClient
from tests.p4.differential.rig import Program, Rig, RigError

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "tests" / "p4" / "programs" / "qmeta.p4"
ETHERTYPE_PROBE = 0x88B5
RATE_PPS = 10
IN_PORT, OUT_PORT = 1, 2
REGISTER = "QIngress.probes_seen"
#: deq_timedelta of the same probe on the two switches may differ by this much (µs).
SOJOURN_TOLERANCE_US = 50_000
#: on one switch, egress_global_timestamp - enq_timestamp vs deq_timedelta (µs).
CLOCK_TOLERANCE_US = 2_000
#: the probe header after Ethernet: prio, then seven 32-bit fields the program writes.
_PROBE = struct.Struct("!B7I")
_MARK = b"QMETA"


def compile_program(out: Path) -> Program:
    """qmeta.p4 compiled by the installed p4c into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    p4info, json_path = out / "qmeta.p4info.txtpb", out / "qmeta.json"
    res = subprocess.run(
        ["p4c-bm2-ss", "--p4runtime-files", str(p4info), "-o", str(json_path), str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if res.returncode != 0:
        raise RigError(f"p4c-bm2-ss {SOURCE.name}: {res.stderr.strip()}")
    return Program("qmeta", p4info, json_path, (IN_PORT, OUT_PORT), lambda sw: [], _no_sentinel)


def _no_sentinel(port: int, tag: bytes) -> bytes:
    raise RigError("the queueing test sends bursts, not frame-and-sentinel runs")


def probe(prio: int, seq: int) -> bytes:
    """A probe frame into ``IN_PORT`` asking for queue ``prio``; ``seq`` identifies it."""
    eth = bytes.fromhex("00000000000200000000000188b5")
    return eth + _PROBE.pack(prio, *([0] * 7)) + _MARK + struct.pack("!H", seq) + b"\0" * 24


@dataclass(frozen=True)
class Record:
    """What one probe carried out of the switch."""

    seq: int
    prio: int
    seen: int
    enq_timestamp: int
    enq_qdepth: int
    deq_timedelta: int
    deq_qdepth: int
    ingress_ts: int
    egress_ts: int


def parse(frame: bytes) -> Record | None:
    if len(frame) < 14 + _PROBE.size + 7 or frame[12:14] != b"\x88\xb5":
        return None
    prio, *vals = _PROBE.unpack_from(frame, 14)
    tail = frame[14 + _PROBE.size :]
    if not tail.startswith(_MARK):
        return None
    (seq,) = struct.unpack_from("!H", tail, len(_MARK))
    return Record(seq, prio, *vals)


def _collect(rig: Rig, count: int, timeout: float) -> list[Record]:
    """The next ``count`` probes out of ``OUT_PORT`` (in arrival order)."""
    sock = rig.socks[OUT_PORT]
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RigError(f"{rig.kind}: {len(out)} of {count} probes came out")
        ready, _w, _x = select.select([sock], [], [], left)
        if not ready:
            continue
        while True:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                break
            rec = parse(data)
            if rec is not None:
                out.append(rec)
    return out


@dataclass(frozen=True)
class Burst:
    """One burst's probes (pacers excluded) and the switch clock around it."""

    records: list[Record]
    before_us: int
    after_us: int


def run_burst(rig: Rig, pattern: list[int], first_seq: int = 1000) -> Burst:
    """Pacers, then ``pattern`` (a priority per probe) back to back; see the module doc."""
    assert rig.target is not None
    with RuntimeClient(rig.target.thrift_port) as rt:
        rt.set_queue_rate(RATE_PPS, OUT_PORT)
        send = rig.socks[IN_PORT].send
        prios = sorted(set(pattern))
        for i, prio in enumerate(prios):
            send(probe(prio, i))
        _collect(rig, len(prios), timeout=10)
        before = rt.time_elapsed_us()
        for i, prio in enumerate(pattern):
            send(probe(prio, first_seq + i))
        records = _collect(rig, len(pattern), timeout=10 + len(pattern) / RATE_PPS)
        after = rt.time_elapsed_us()
        rt.set_queue_rate(0, OUT_PORT)
    return Burst(records, before, after)


def expected_depths(pattern: list[int]) -> dict[int, list[tuple[int, int]]]:
    """Per priority, (enq_qdepth, deq_qdepth) of its probes in order: k ahead, n-1-k behind."""
    out: dict[int, list[tuple[int, int]]] = {}
    for prio in sorted(set(pattern)):
        n = pattern.count(prio)
        out[prio] = [(k, n - 1 - k) for k in range(n)]
    return out


def by_priority(burst: Burst) -> dict[int, list[Record]]:
    """The burst's records per priority, in departure order (FIFO inside a queue)."""
    out: dict[int, list[Record]] = {}
    for r in burst.records:
        out.setdefault(r.prio, []).append(r)
    return out


def timing_problems(kind: str, burst: Burst) -> list[str]:
    """What on one switch contradicts the meaning of the timestamps (empty: nothing)."""
    problems = []
    for r in burst.records:
        lo, hi = burst.before_us & 0xFFFFFFFF, burst.after_us & 0xFFFFFFFF
        if not lo <= r.enq_timestamp <= hi:
            problems.append(
                f"{kind} probe {r.seq}: enq_timestamp {r.enq_timestamp} not in {lo}..{hi}"
            )
        if not 0 <= r.enq_timestamp - r.ingress_ts < 50_000:
            problems.append(
                f"{kind} probe {r.seq}: ingress {r.ingress_ts} -> enq {r.enq_timestamp}"
            )
        if abs(r.egress_ts - r.enq_timestamp - r.deq_timedelta) > CLOCK_TOLERANCE_US:
            problems.append(
                f"{kind} probe {r.seq}: egress_ts - enq_timestamp = "
                f"{r.egress_ts - r.enq_timestamp}, deq_timedelta {r.deq_timedelta}"
            )
    return problems
