"""The per-construct v1model programs of the differential test (tests/p4/programs/*.p4).

Each routes IPv4 by ``10.0.P.0/24 -> port P`` (table ``Ing.routes``) so the
rig's sentinels (``10.0.P.200``) find their port, and exercises one family of
v1model constructs on frames drawn to reach every path of it.
"""

from __future__ import annotations

import struct
from pathlib import Path

from finsy.proto import p4r as p4runtime_pb2
from hypothesis import strategies as st

from p4client.codec import entry_to_proto
from p4client.p4info import TableEntry
from p4client.p4rt import SwitchConnection
from tests.p4.differential.programs import _finish, _ip_bytes, _ipv4_fields, udp_sentinel
from tests.p4.differential.rig import Program

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "tests" / "p4" / "programs" / "build"
PORTS = (1, 2, 3, 4)
_u16 = st.integers(0, 0xFFFF)


def routes(sw: SwitchConnection, table: str = "Ing.routes", action: str = "Ing.route",
           param: str = "port") -> list[TableEntry]:  # fmt: skip
    """``10.0.P.0/24 -> port P`` for every port, and 10.0.9.0/24 (sources) to port 1."""
    out = [
        sw.table_entry(table, {"hdr.ipv4.dst": (f"10.0.{p}.0", 24)}, action, {param: p})
        for p in PORTS
    ]
    out.append(sw.table_entry(table, {"hdr.ipv4.dst": ("10.0.9.0", 24)}, action, {param: 1}))
    return out


def sentinel(port: int, tag: bytes) -> bytes:
    return udp_sentinel(bytes.fromhex("020000000001"), "10.0.9.9", f"10.0.{port}.200", tag)


_SRCS = ["10.0.1.5", "10.0.2.7", "10.0.9.9", "192.168.1.1", "10.0.3.3", "255.255.255.255"]
_DSTS = ["10.0.1.9", "10.0.2.9", "10.0.3.9", "10.0.4.200", "10.0.9.1", "10.9.9.9", "0.0.0.0"]


@st.composite
def ipv4_frames(draw: st.DrawFn) -> bytes:
    """Ethernet/IPv4 with UDP (mostly), TCP or another protocol; some non-IPv4 frames."""
    if draw(st.sampled_from([False] * 15 + [True])):
        return draw(st.binary(min_size=14, max_size=90))
    eth = bytes.fromhex("020000000001") + draw(st.binary(min_size=6, max_size=6))
    etype = draw(st.sampled_from([0x0800] * 20 + [0x0806, 0x86DD]))
    f = draw(_ipv4_fields(_SRCS, _DSTS))
    proto = draw(st.sampled_from([17] * 10 + [6, 1]) | st.integers(0, 255))
    body = draw(st.binary(max_size=24))
    l4 = struct.pack("!HHHH", draw(_u16), draw(_u16), 8 + len(body), draw(_u16)) + body
    frame = eth + struct.pack("!H", etype) + _ip_bytes(f, proto, l4, draw(st.integers(1, 0xFFFF)))
    return draw(_finish(frame + l4))


def _hash_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = routes(sw)
    out.append(
        sw.table_entry("Ing.balance", {"hdr.ipv4.protocol": 17}, "Ing.ecmp", {"base": 3, "n": 5})
    )
    out.append(
        sw.table_entry(
            "Ing.balance", {"hdr.ipv4.protocol": 6}, "Ing.ecmp", {"base": 200, "n": 0x80}
        )
    )
    return out


HASH = Program(
    "hash", BUILD / "hash.p4info.txtpb", BUILD / "hash.json", PORTS, _hash_entries, sentinel
)


def _stacks_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = routes(sw)
    out.append(
        sw.table_entry("Ing.routes", {"hdr.ipv4.dst": ("10.9.0.0", 16)}, "Ing.push_two", {"p": 3})
    )
    return out


@st.composite
def label_frames(draw: st.DrawFn) -> bytes:
    """0-6 labels (port, ttl, bottom-of-stack bit) over IPv4 or not, or plain IPv4 frames;
    at least 64 bytes, as on a wire, so every lookahead reads bytes of the frame."""
    frame = draw(ipv4_frames())
    if draw(st.booleans()):
        labels = b""
        for _ in range(draw(st.sampled_from([0, 1, 1, 2, 2, 3, 4, 5, 6]))):
            port = draw(st.sampled_from([1, 2, 3, 4, 4, 0, 0x7F]))
            ttl = draw(st.sampled_from([0, 1, 64, 255]))
            bos = draw(st.sampled_from([0, 0, 1]))
            labels += ((port << 17) | (ttl << 1) | bos).to_bytes(3, "big")
        if labels:
            last = labels[-3:]
            if draw(st.sampled_from([True] * 4 + [False])):  # usually a proper bottom
                labels = labels[:-3] + bytes([last[0], last[1], last[2] | 1])
        frame = frame[:12] + b"\x88\xb5" + labels + frame[14:]
    return frame.ljust(64, b"\0")


STACKS = Program(
    "stacks",
    BUILD / "stacks.p4info.txtpb",
    BUILD / "stacks.json",
    PORTS,
    _stacks_entries,
    sentinel,
)

#: clone.p4's mirroring sessions: 5 -> port 2, 6 -> port 3, 7 -> port 4 (9: none).
SESSIONS = {5: 2, 6: 3, 7: 4}


def clone_sessions(sw: SwitchConnection) -> None:
    """The sessions as P4Runtime CloneSessionEntry writes (simple_switch_grpc and soft)."""
    updates = []
    for sid, port in SESSIONS.items():
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        cs = u.entity.packet_replication_engine_entry.clone_session_entry
        cs.session_id = sid
        cs.replicas.add(egress_port=port, instance=1)
        updates.append(u)
    sw.stub.Write(sw.write_request(updates), timeout=10)


@st.composite
def cmd_frames(draw: st.DrawFn) -> bytes:
    """IPv4 frames whose first two bytes after the IPv4 header are (op, arg) for clone.p4."""
    frame = draw(ipv4_frames())
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return frame
    ihl = (frame[14] & 0x0F) * 4
    op = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]))
    at = 14 + ihl
    return (frame[:at] + bytes([op, draw(st.integers(0, 255))]) + frame[at + 2 :]).ljust(64, b"\0")


CLONE = Program(
    "clone", BUILD / "clone.p4info.txtpb", BUILD / "clone.json", PORTS, routes, sentinel,
    clone_sessions, sentinel_rounds=2,
)  # fmt: skip


def meter_configs(sw: SwitchConnection) -> None:
    """Rate 0 (no refill: colors depend on the frames' order only) and small bursts; the
    bursts differ per cell; cell 7 stays unconfigured (GREEN); the direct meter's
    entries likewise, but for the last."""
    assert sw.p4info is not None
    ids = {m.preamble.name: m.preamble.id for m in sw.p4info.proto.meters}
    updates = []
    for name, scale in (("Ing.by_packets", 1), ("Ing.by_bytes", 100)):
        for cell in range(7):
            u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
            me = u.entity.meter_entry
            me.meter_id, me.index.index = ids[name], cell
            me.config.cir, me.config.pir = 0, 0
            me.config.cburst, me.config.pburst = (1 + cell) * scale, (3 + 2 * cell) * scale
            updates.append(u)
    for i, src in enumerate(_METERED_SOURCES[:-1]):  # the last entry stays unconfigured
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
        dme = u.entity.direct_meter_entry
        entry = sw.table_entry("Ing.sources", {"hdr.ipv4.src": src}, "Ing.police")
        dme.table_entry.CopyFrom(entry_to_proto(sw.p4info, entry))
        dme.table_entry.ClearField("action")
        dme.config.cburst, dme.config.pburst = 2 + i, 4 + 2 * i
        updates.append(u)
    sw.stub.Write(sw.write_request(updates), timeout=10)


_METERED_SOURCES = ["10.0.1.5", "10.0.2.7", "10.0.9.9"]


def _meter_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = routes(sw)
    for src in _METERED_SOURCES:
        out.append(sw.table_entry("Ing.sources", {"hdr.ipv4.src": src}, "Ing.police"))
    return out


@st.composite
def meter_frames(draw: st.DrawFn) -> bytes:
    """IPv4 frames to 10.0.P.x, x in 0..15: every meter cell (x & 7), long and short."""
    frame = draw(ipv4_frames())
    if len(frame) >= 34 and frame[12:14] == b"\x08\x00":
        dst = bytes([10, 0, draw(st.integers(1, 4)), draw(st.integers(0, 15))])
        frame = frame[:30] + dst + frame[34:] + draw(st.binary(max_size=200))
    return frame


METERS = Program(
    "meters", BUILD / "meters.p4info.txtpb", BUILD / "meters.json", PORTS, _meter_entries,
    sentinel, meter_configs,
)  # fmt: skip


def digest_configs(sw: SwitchConnection) -> None:
    """Every digest on, one sample per list, sent at once; acks never time out."""
    assert sw.p4info is not None
    updates = []
    for d in sw.p4info.proto.digests:
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        de = u.entity.digest_entry
        de.digest_id = d.preamble.id
        de.config.max_timeout_ns, de.config.max_list_size = 0, 1
        de.config.ack_timeout_ns = 3600 * 10**9
        updates.append(u)
    sw.stub.Write(sw.write_request(updates), timeout=10)


@st.composite
def learn_frames(draw: st.DrawFn) -> bytes:
    """IPv4 frames from a few source MACs (some learned: table ``sources``), TTL 0/1."""
    frame = draw(ipv4_frames())
    src = bytes([2, 0, 0, 0, 0, draw(st.integers(1, 6))])
    return frame[:6] + src + frame[12:]


def _digest_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = routes(sw)
    for mac in (0x020000000001, 0x020000000002):
        out.append(sw.table_entry("Ing.sources", {"hdr.ethernet.src": mac}, "NoAction"))
    return out


DIGEST = Program(
    "digest", BUILD / "digest.p4info.txtpb", BUILD / "digest.json", PORTS, _digest_entries,
    sentinel, digest_configs,
)  # fmt: skip

V1PROGRAMS = {
    "hash": (HASH, ipv4_frames()),
    "stacks": (STACKS, label_frames()),
    "clone": (CLONE, cmd_frames()),
    "meters": (METERS, meter_frames()),
    "digest": (DIGEST, learn_frames()),
}
