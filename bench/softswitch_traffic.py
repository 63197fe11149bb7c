"""Traffic roles of the benchmark, run inside a host namespace (``ip netns exec``).

    python -m bench.softswitch_traffic send --iface eth0 --rate 20000 --duration 2
    python -m bench.softswitch_traffic recv --iface eth0 --duration 3

The sender cycles through eight frame kinds: seven echelon packets whose
deadlines fall into the seven deadline ranges the benchmark installs (queues
7..1) and one plain UDP packet (queue 0), so every priority queue is used.
Each frame carries ``time.monotonic_ns()`` at a fixed offset; CLOCK_MONOTONIC
is system-wide, so the receiver computes one-way latency. Both roles print one
JSON line; the receiver prints ``ready`` first, once its socket is open.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import struct
import sys
import time

from echelon.constants import ECHELON_UDP_PORT, PACKET_HEADER_LEN
from echelon.wire import pack_header
from softswitch.bm.hashing import csum16

SRC_IP, DST_IP = "10.0.9.1", "10.0.9.2"
SRC_MAC = bytes.fromhex("000000000901")
SWITCH_MAC = bytes.fromhex("0000000009aa")
ECHELON_ID = 1
#: deadline (µs) of kind k < 7; the benchmark maps [1000k, 1000k+999] to priority 7-k.
KINDS = 8
TS_OFF = PACKET_HEADER_LEN
FRAME_LEN = 100
MAGIC = b"EBEN"


def frame(kind: int) -> bytearray:
    """Frame template of one kind; timestamp and sequence are filled in per packet."""
    if kind < KINDS - 1:
        dport = ECHELON_UDP_PORT
        l4 = pack_header(ECHELON_ID, 1000 * kind + 500, kind, 0)
    else:
        dport, l4 = 7000, bytes(16)
    payload = l4 + bytes(8) + MAGIC
    payload += bytes(FRAME_LEN - 14 - 20 - 8 - len(payload))
    udp = struct.pack("!HHHH", 4000, dport, 8 + len(payload), 0)
    total = 20 + len(udp) + len(payload)
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        total,
        0,
        0,
        64,
        17,
        0,
        socket.inet_aton(SRC_IP),
        socket.inet_aton(DST_IP),
    )
    ip = ip[:10] + struct.pack("!H", csum16(ip)) + ip[12:]
    return bytearray(SWITCH_MAC + SRC_MAC + b"\x08\x00" + ip + udp + payload)


def _socket(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE
    return s


def send(iface: str, rate: float, duration: float) -> dict[str, float]:
    sock = _socket(iface)
    templates = [frame(k) for k in range(KINDS)]
    pack_ts = struct.Struct("!Q").pack_into
    sent = 0
    t0 = time.monotonic()
    while True:
        elapsed = time.monotonic() - t0
        if elapsed >= duration:
            break
        target = min(int(elapsed * rate) + 1, int(duration * rate))
        if sent >= target:
            time.sleep(0.0002)  # pacing only; not synchronisation
            continue
        while sent < target:
            f = templates[sent % KINDS]
            pack_ts(f, TS_OFF, time.monotonic_ns())
            try:
                sock.send(f)
            except OSError:
                break
            sent += 1
    elapsed = time.monotonic() - t0
    sock.close()
    return {"sent": sent, "elapsed": elapsed, "pps": sent / elapsed}


def recv(iface: str, duration: float, idle: float = 0.5) -> dict[str, object]:
    """Count benchmark frames until ``duration`` passes or ``idle`` s pass without one."""
    sock = _socket(iface)
    sock.settimeout(0.1)
    print("ready", flush=True)
    buf = bytearray(2048)
    view = memoryview(buf)
    unpack_ts = struct.Struct("!Q").unpack_from
    count = 0
    lat: list[int] = []
    per_prio = [0] * KINDS
    end = time.monotonic() + duration
    last = 0.0
    while (now_s := time.monotonic()) < end:
        if count and now_s - last > idle:
            break
        try:
            n = sock.recv_into(view)
        except TimeoutError:
            continue
        if n < TS_OFF + 12 or buf[TS_OFF + 8 : TS_OFF + 12] != MAGIC:
            continue
        now = time.monotonic_ns()
        last = now / 1e9
        count += 1
        lat.append(now - unpack_ts(buf, TS_OFF)[0])
        per_prio[buf[15] >> 5] += 1
    sock.close()
    lat.sort()

    def q(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] / 1000.0 if lat else 0.0

    return {"received": count, "p50_us": q(0.5), "p99_us": q(0.99), "per_prio": per_prio}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.softswitch_traffic")
    ap.add_argument("role", choices=["send", "recv"])
    ap.add_argument("--iface", default="eth0")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--idle", type=float, default=0.5, help="recv: stop after this quiet time")
    args = ap.parse_args(argv)
    try:
        if args.role == "send":
            result: dict[str, object] = dict(send(args.iface, args.rate, args.duration))
        else:
            result = recv(args.iface, args.duration, args.idle)
    except OSError as exc:
        print(f"error: iface: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
