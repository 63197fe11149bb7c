"""tools/wireshark/echelon.lua: Debian's tshark decodes the echelon header by field name.

The capture is written with the project's own wire layer (echelon/wire.py) and
pcap writer, so the dissector is checked against the one implementation of the
format, field by field, with values that differ in every field. ``make deps``
installs tshark; without it the test skips and says how to get it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from echelon.constants import ECHELON_UDP_PORT
from echelon.pcap import PcapWriter
from echelon.wire import Echelon

ROOT = Path(__file__).resolve().parents[2]
LUA = ROOT / "tools" / "wireshark" / "echelon.lua"
FIELDS = (
    "echelon.version",
    "echelon.flags",
    "echelon.reserved0",
    "echelon.id",
    "echelon.deadline_us",
    "echelon.flow_index",
    "echelon.reserved1",
    "echelon.seq",
)
needs_tshark = pytest.mark.skipif(
    shutil.which("tshark") is None,
    reason="tshark is not installed (`make deps` installs Debian's tshark)",
)


def tshark_fields(pcap: Path, fields: tuple[str, ...], display: str = "") -> list[list[str]]:
    """One row per frame of ``pcap`` (filtered by ``display``) with ``fields`` as tshark
    decodes them with the echelon dissector loaded; fails the test on a tshark error
    (e.g. a Lua error in the dissector, which tshark reports on stderr)."""
    argv = ["tshark", "-n", "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "fields"]
    for f in fields:
        argv += ["-e", f]
    if display:
        argv += ["-Y", display]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    errors = [ln for ln in proc.stderr.splitlines() if "running as user" not in ln.lower()]
    assert proc.returncode == 0 and not errors, proc.stderr
    return [line.split("\t") for line in proc.stdout.splitlines()]


def frame(payload: bytes, dport: int = ECHELON_UDP_PORT) -> bytes:
    return bytes(
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IP(src="10.0.0.1", dst="10.0.0.2", tos=5 << 2)
        / UDP(sport=40000, dport=dport)
        / payload
    )


@pytest.mark.slow
@needs_tshark
def test_tshark_decodes_every_field(tmp_path: Path) -> None:
    pcap = tmp_path / "demo.pcap"
    w = PcapWriter(pcap)
    expected = []
    for i in range(4):
        hdr = Echelon(
            flags=(i + 3) & 0xF,
            reserved0=0x10 + i,
            echelon_id=513 + i,
            deadline_us=70_000 + 1_000_003 * i,
            flow_index=40 + i,
            reserved1=0xAB00 + i,
            seq=2**31 + i,
        )
        w.write(frame(bytes(hdr) + b"payload" * i))
        expected.append(
            [
                "1",
                f"0x{(i + 3) & 0xF:02x}",
                hex(0x10 + i),
                str(513 + i),
                str(70_000 + 1_000_003 * i),
                str(40 + i),
                hex(0xAB00 + i),
                str(2**31 + i),
            ]
        )
    w.write(frame(b"not echelon at all", dport=7000))  # another port: not decoded
    w.close()
    assert tshark_fields(pcap, FIELDS, "echelon") == expected
    assert len(tshark_fields(pcap, ("frame.number",))) == 5
    info = tshark_fields(pcap, ("_ws.col.Protocol", "_ws.col.Info"), "echelon")
    assert info[1] == ["ECHELON", "Echelon ID=514 flow=41 seq=2147483649 deadline=1070003us len=7"]


@needs_tshark
def test_tshark_flags_a_truncated_header_and_a_bad_version(tmp_path: Path) -> None:
    pcap = tmp_path / "bad.pcap"
    w = PcapWriter(pcap)
    w.write(frame(bytes(Echelon(echelon_id=9))[:10]))  # 10 of 16 bytes
    w.write(frame(bytes(Echelon(version=3, echelon_id=9))))
    w.close()
    rows = tshark_fields(pcap, ("echelon.id", "echelon.version", "_ws.expert.message"))
    assert rows[0] == ["", "", "10 bytes, the header needs 16"]
    assert rows[1] == ["9", "3", "Unknown echelon header version"]


def test_pcap_reader_sees_records_as_they_are_flushed(tmp_path: Path) -> None:
    """The per-port view reads captures a switch is still writing: only complete
    records count, each exactly once, a half-written one on the next read."""
    from echelon.pcap import PcapTail

    full, path = tmp_path / "full.pcap", tmp_path / "p.pcap"
    tail = PcapTail(path)
    assert tail.read_new() == [] and len(PcapTail(path).read_new()) == 0  # not created yet
    path.write_bytes(b"")  # BMv2's file of a port that captured nothing
    assert PcapTail(path).read_new() == []
    w = PcapWriter(full)
    frames = [frame(bytes(Echelon(seq=i))) for i in range(5)]
    for f in frames:
        w.write(f, ts=1000.25)
    w.close()
    data = full.read_bytes()
    rec = 16 + len(frames[0])
    path.write_bytes(data[: 24 + 2 * rec + 20])  # two records and part of the third
    got = tail.read_new()
    assert [r.data for r in got] == frames[:2] and got[0].ts == pytest.approx(1000.25)
    assert len(PcapTail(path).read_new()) == 2 and tail.read_new() == []
    path.write_bytes(data)
    assert [r.data for r in tail.read_new()] == frames[2:]
    assert [r.data for r in PcapTail(path).read_new()] == frames and len(
        PcapTail(path).read_new()
    ) == 5
    assert tail.read_new() == []
