"""Bottleneck emulation: a strict-priority, rate-limited egress keyed on the DSCP the switch wrote.

Why tc and not the switch: BMv2 rate-limits each priority queue separately
(``set_queue_rate <pps> <port> <prio>``) and has no port shaper, so it cannot
model "one 10 Mbit/s port, strict priority among its queues". A hardware
switch port can. We emulate that port in the kernel on the switch-side egress
interface of every ``bottleneck: true`` link: a shaper at the link rate with
eight strict-priority bands, classified on the DSCP byte the P4 program writes
(``dscp = prio << 3``). Both targets (BMv2 and the soft switch) get exactly the
same discipline, so their results are comparable.

Two recipes, chosen by what the kernel offers (:func:`choose_mode`):

* ``prio-tbf``: ``tbf`` root (the rate) with an 8-band ``prio`` child and
  ``u32`` filters; band 0 is served first. Preferred when ``prio`` exists.
* ``htb``: an HTB root with one class per priority. Each class may borrow up to
  the link rate (``ceil``) and HTB serves borrowing classes strictly by their
  ``prio`` (0 first), so CS7 -> HTB prio 0 ... CS0 -> HTB prio 7. No class is
  guaranteed anything (rate :data:`HTB_LEAF_RATE`, the least tc takes, and the
  least burst): HTB serves a class still under its *own* rate before every
  borrowing one, whatever their prios, so a guaranteed floor would let a lower
  class send ahead of a backlogged higher one whenever its tokens allow. With 8
  bit/s a class can do that once, with its first packet, and then not for ~17
  minutes (a 1-kB frame's worth of tokens).

The command lists are pure functions (unit-tested); :func:`apply_bottleneck`
runs them. docs/topology.md shows the generated commands.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from echelon.constants import ETHERNET_HEADER_LEN, LINK_MTU, NUM_PRIORITIES, dscp_for_priority
from echelon.errors import EchelonError

log = logging.getLogger(__name__)

Mode = Literal["prio-tbf", "htb", "none"]
#: The largest frame on the emulated links: their MTU with the Ethernet header.
MAX_FRAME_BYTES = LINK_MTU + ETHERNET_HEADER_LEN
#: Bytes an HTB class may send per round: one largest frame.
HTB_QUANTUM = MAX_FRAME_BYTES
#: Own rate of every priority class of the HTB recipe: everything they send is borrowed
#: from the link's class, which HTB lends strictly by prio (module docstring). Measured in
#: the demo: the static plan 14 ms from the packet model (median of 8 runs) against 24 ms
#: with guaranteed floors (docs/measurements/demo.md).
HTB_LEAF_RATE = "8bit"
#: Leaf queue length (packets). Deep on purpose: the demo's UDP senders have no
#: congestion control, so a drop means a flow never completes. The switch socket's
#: send buffer bounds what actually sits here (backpressure into the switch queues).
DEFAULT_LIMIT_PKTS = 10000


class TcError(EchelonError):
    """A tc command failed or the kernel lacks every usable queue discipline."""


@dataclass(frozen=True)
class Bottleneck:
    """A strict-priority shaper for ``iface`` at ``rate_mbit``."""

    iface: str
    rate_mbit: float
    limit_pkts: int = DEFAULT_LIMIT_PKTS

    def __post_init__(self) -> None:
        if self.rate_mbit <= 0:
            raise TcError(f"rate_mbit: must be positive, got {self.rate_mbit}")
        if self.limit_pkts <= 0:
            raise TcError(f"limit_pkts: must be positive, got {self.limit_pkts}")


def tos_of_priority(prio: int) -> int:
    """The IPv4 TOS byte of a packet the switch gave ``prio``: DSCP in the top 6 bits."""
    return dscp_for_priority(prio) << 2


def _kbit(mbit: float) -> str:
    return f"{max(1, round(mbit * 1000))}kbit"


def htb_commands(b: Bottleneck) -> list[list[str]]:
    """tc argv lists that install the HTB strict-priority shaper (after removing the root).

    Class ``1:1<p>`` holds switch priority ``p`` (hex minor 0x10 + p); unmatched
    traffic falls into priority 0's class, i.e. best effort, like the switch.
    """
    dev = ["dev", b.iface]
    rate = _kbit(b.rate_mbit)
    cmds = [
        ["tc", "qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "10"],
        ["tc", "class", "add", *dev, "parent", "1:", "classid", "1:1", "htb",
         "rate", rate, "ceil", rate, "quantum", str(HTB_QUANTUM)],
    ]  # fmt: skip
    for prio in reversed(range(NUM_PRIORITIES)):
        cls = f"1:1{prio}"
        cmds += [
            ["tc", "class", "add", *dev, "parent", "1:1", "classid", cls, "htb",
             "rate", HTB_LEAF_RATE, "burst", "0", "ceil", rate,
             "prio", str(NUM_PRIORITIES - 1 - prio), "quantum", str(HTB_QUANTUM)],
            ["tc", "qdisc", "add", *dev, "parent", cls, "handle", f"{20 + prio}:",
             "pfifo", "limit", str(b.limit_pkts)],
            ["tc", "filter", "add", *dev, "parent", "1:", "protocol", "ip",
             "prio", str(NUM_PRIORITIES - prio), "u32",
             "match", "ip", "tos", hex(tos_of_priority(prio)), "0xe0", "flowid", cls],
        ]  # fmt: skip
    return cmds


def prio_tbf_commands(b: Bottleneck) -> list[list[str]]:
    """tc argv lists for ``tbf`` (rate) over an 8-band ``prio`` (band 0 first)."""
    dev = ["dev", b.iface]
    limit_bytes = b.limit_pkts * MAX_FRAME_BYTES
    cmds = [
        ["tc", "qdisc", "add", *dev, "root", "handle", "1:", "tbf", "rate", _kbit(b.rate_mbit),
         "burst", "15kb", "limit", str(limit_bytes)],
        # priomap: every TOS value not matched by a filter goes to the last band.
        ["tc", "qdisc", "add", *dev, "parent", "1:1", "handle", "2:", "prio", "bands",
         str(NUM_PRIORITIES), "priomap", *([str(NUM_PRIORITIES - 1)] * 16)],
    ]  # fmt: skip
    for prio in reversed(range(NUM_PRIORITIES)):
        band = NUM_PRIORITIES - 1 - prio
        cmds += [
            ["tc", "qdisc", "add", *dev, "parent", f"2:{band + 1}", "handle", f"{30 + band}:",
             "pfifo", "limit", str(b.limit_pkts)],
            ["tc", "filter", "add", *dev, "parent", "2:", "protocol", "ip",
             "prio", str(band + 1), "u32",
             "match", "ip", "tos", hex(tos_of_priority(prio)), "0xe0", "flowid", f"2:{band + 1}"],
        ]  # fmt: skip
    return cmds


def commands(b: Bottleneck, mode: Mode) -> list[list[str]]:
    if mode == "prio-tbf":
        return prio_tbf_commands(b)
    if mode == "htb":
        return htb_commands(b)
    return []


@cache
def qdisc_available(kind: str) -> bool:
    """Whether the kernel knows qdisc ``kind``: try it on ``lo`` of a throwaway namespace.

    ``unshare -n`` gives a fresh network namespace that dies with the process,
    so probing leaves nothing behind and touches no real interface.
    """
    args = {
        "prio": ["prio"],
        "tbf": ["tbf", "rate", "1mbit", "burst", "10kb", "latency", "10ms"],
        "htb": ["htb"],
        "netem": ["netem", "delay", "1ms"],
    }.get(kind, [kind])
    if not shutil.which("unshare") or not shutil.which("tc"):
        return False
    res = subprocess.run(
        ["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", *args],
        capture_output=True,
        timeout=10,
    )
    return res.returncode == 0


def choose_mode() -> Mode:
    """``prio-tbf`` if the kernel has both, else ``htb``, else ``none``."""
    if qdisc_available("prio") and qdisc_available("tbf"):
        return "prio-tbf"
    if qdisc_available("htb"):
        return "htb"
    return "none"


def run_tc(argv: Sequence[str], check: bool = True, ns: Sequence[str] = ()) -> str:
    """Run one tc command, inside a namespace when ``ns`` is a prefix like ``mnexec -a PID``."""
    res = subprocess.run([*ns, *argv], capture_output=True, text=True, timeout=10)
    if check and res.returncode != 0:
        raise TcError(f"{' '.join(argv)}: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def apply_bottleneck(b: Bottleneck, ns: Sequence[str] = ()) -> Mode:
    """Replace whatever root qdisc ``b.iface`` has (Mininet's TCLink htb) by the shaper.

    Returns the mode used; with ``none`` it warns and leaves the link as it is
    (rate limited by TCLink, but FIFO: priorities then have no effect there).
    """
    mode = choose_mode()
    if mode == "none":
        log.warning(
            "no usable qdisc (need prio+tbf or htb): %s stays FIFO, priorities have no effect",
            b.iface,
        )
        return mode
    run_tc(["tc", "qdisc", "del", "dev", b.iface, "root"], check=False, ns=ns)
    for argv in commands(b, mode):
        run_tc(argv, ns=ns)
    return mode


def link_commands(iface: str, rate_mbit: float | None, delay_ms: float = 0.0) -> list[list[str]]:
    """A plain FIFO link: rate limit and/or delay (links that are not bottlenecks, host uplinks).

    Mininet's ``TCLink`` would do this too, but with an HTB quantum derived from
    r2q that the kernel warns about at 100 Mbit/s; here the quantum is explicit.
    ``delay_ms`` needs ``netem`` (callers check :func:`qdisc_available` first).
    """
    cmds: list[list[str]] = []
    parent = ["root"]
    if rate_mbit:
        rate = _kbit(rate_mbit)
        cmds += [
            ["tc", "qdisc", "add", "dev", iface, "root", "handle", "5:", "htb", "default", "1"],
            ["tc", "class", "add", "dev", iface, "parent", "5:", "classid", "5:1", "htb",
             "rate", rate, "ceil", rate, "quantum", str(HTB_QUANTUM)],
        ]  # fmt: skip
        parent = ["parent", "5:1"]
    if delay_ms:
        cmds.append(["tc", "qdisc", "add", "dev", iface, *parent, "handle", "10:", "netem",
                     "delay", f"{delay_ms}ms", "limit", str(DEFAULT_LIMIT_PKTS)])  # fmt: skip
    return cmds


def mirror_commands(src: str, dst: str) -> list[list[str]]:
    """Redirect everything arriving on ``src`` out of ``dst`` (one direction of a wire).

    Used in a "wire" namespace for the direction hosts send into; the direction
    a switch sends into is routed instead (see ``topo.net.EchelonNet._setup_wire``):
    a packet stays charged to the socket that sent it until ``ip_rcv`` orphans it
    (crossing a veth does not, on current kernels), and the switches send through
    non-blocking raw sockets that drop on a full send buffer (~100 frames). A
    routed hop lets the shaper hold any backlog without the switch dropping.
    """
    return [
        ["tc", "qdisc", "add", "dev", src, "handle", "ffff:", "ingress"],
        ["tc", "filter", "add", "dev", src, "parent", "ffff:", "protocol", "all",
         "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", dst],
    ]  # fmt: skip


def leaf_priority(handle: str, mode: Mode) -> int | None:
    """The switch priority a leaf pfifo of :func:`commands` holds, from its handle
    (``htb``: ``20+p:``; ``prio-tbf``: ``30+band:``, band 0 = priority 7); None if not one."""
    try:
        major = int(handle.rstrip(":"))
    except ValueError:
        return None
    if mode == "htb" and 20 <= major < 20 + NUM_PRIORITIES:
        return major - 20
    if mode == "prio-tbf" and 30 <= major < 30 + NUM_PRIORITIES:
        return NUM_PRIORITIES - 1 - (major - 30)
    return None


def backlog_by_priority(text: str, mode: Mode) -> dict[int, int]:
    """``{switch priority: packets queued}`` from ``tc -s qdisc show`` of a shaped port."""
    out: dict[int, int] = {}
    prio: int | None = None
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["qdisc"] and len(words) > 2:
            prio = leaf_priority(words[2], mode)
        elif words[:1] == ["backlog"] and prio is not None and len(words) > 2:
            out[prio] = int(words[2].rstrip("p"))
            prio = None
    return out
