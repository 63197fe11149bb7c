"""Classic libpcap files: the per-port captures both switch targets write with ``--pcap DIR``.

BMv2 (``simple_switch --pcap DIR``) writes, for every interface ``IFACE`` given
with ``-i PORT@IFACE``, ``DIR/IFACE_in.pcap`` (frames received on that port)
and ``DIR/IFACE_out.pcap`` (frames sent on it); the soft switch writes the same
files, in the same format, so Wireshark, tshark, tcpdump -r and scapy read
either. Why a module of our own rather than scapy's writer: the soft switch's
packet thread appends a record per frame, and a 16-byte header plus the frame
is all that takes; and :class:`PcapTail` lets the demo show per-port packet
counts while the switch is still writing, which needs a reader that stops
cleanly at a record the writer has not finished (and, from a fresh tail, reads a
whole file -- none when it is missing or has no header yet: BMv2 writes the header
with the first frame, so a port that captured nothing leaves an empty file).

Format: a 24-byte global header (magic ``0xa1b2c3d4`` in the writer's byte
order, version 2.4, snaplen, link type 1 = Ethernet), then per frame a 16-byte
record header (seconds, microseconds, captured length, original length) and the
captured bytes.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535
_GLOBAL = struct.Struct("=IHHiIII")
_RECORD = struct.Struct("=IIII")


class PcapFormatError(ValueError):
    """The file is not a classic pcap file (wrong magic or a truncated global header)."""


def pcap_names(iface: str) -> tuple[str, str]:
    """BMv2's file names for an interface: ``(IFACE_in.pcap, IFACE_out.pcap)``."""
    return f"{iface}_in.pcap", f"{iface}_out.pcap"


class PcapWriter:
    """Appends Ethernet frames to one pcap file; :meth:`flush` makes them visible to readers.

    Not thread-safe: one writer per file, used by one thread (the soft switch's
    packet thread), which flushes once per batch rather than per frame.
    """

    def __init__(self, path: str | Path, snaplen: int = SNAPLEN) -> None:
        self.path = Path(path)
        self.snaplen = snaplen
        self._f: BinaryIO = self.path.open("wb")
        self._f.write(_GLOBAL.pack(MAGIC, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        self._f.flush()

    def write(self, frame: bytes | bytearray, ts: float | None = None) -> None:
        """One record; ``ts`` is wall-clock seconds (now if omitted), as libpcap stamps."""
        t = time.time() if ts is None else ts
        sec = int(t)
        usec = min(999_999, int((t - sec) * 1e6))
        caplen = min(len(frame), self.snaplen)
        self._f.write(_RECORD.pack(sec, usec, caplen, len(frame)))
        self._f.write(frame[:caplen])

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


@dataclass(frozen=True)
class PcapRecord:
    """One captured frame: wall-clock time in seconds, the bytes, the length on the wire."""

    ts: float
    data: bytes
    orig_len: int


def _byte_order(head: bytes, path: Path) -> str:
    if len(head) < _GLOBAL.size:
        raise PcapFormatError(f"{path}: {len(head)} bytes, shorter than a pcap header")
    for order in ("<", ">"):
        if struct.unpack_from(order + "I", head)[0] == MAGIC:
            return order
    raise PcapFormatError(f"{path}: not a classic pcap file (magic {head[:4].hex()})")


class PcapTail:
    """Reads the records appended to a pcap file since the last call, as ``tail -f`` would.

    Why: the demo's per-port view polls the captures of a running switch every
    few seconds; re-reading whole files would grow with the run. A record the
    writer has not finished is left for the next call. A missing file (the
    switch has not created it yet) reads as empty.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._rec: struct.Struct | None = None
        self._off = _GLOBAL.size

    def read_new(self) -> list[PcapRecord]:
        try:
            with self.path.open("rb") as f:
                if self._rec is None:
                    head = f.read(_GLOBAL.size)
                    if len(head) < _GLOBAL.size:
                        return []
                    self._rec = struct.Struct(_byte_order(head, self.path) + "IIII")
                f.seek(self._off)
                data = f.read()
        except FileNotFoundError:
            return []
        out: list[PcapRecord] = []
        rec, off = self._rec, 0
        while off + rec.size <= len(data):
            sec, usec, caplen, orig = rec.unpack_from(data, off)
            end = off + rec.size + caplen
            if end > len(data):
                break
            out.append(PcapRecord(sec + usec / 1e6, data[off + rec.size : end], orig))
            off = end
        self._off += off
        return out
