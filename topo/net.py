"""Mininet launcher: a topology file becomes hosts in namespaces, P4 switches and tc links.

    with EchelonNet(load("topo/star.yaml"), kind="auto") as net:
        net["h1"].popen([...])          # Mininet host API
        ...                             # everything is torn down on exit, also on errors

* Hosts: one network namespace each (Mininet ``Host``), ``ip/32`` on their one
  interface, a /32 route and a permanent ARP entry for every other host (the
  switch rewrites MACs per hop, so the first-hop MAC only has to be accepted),
  IPv6 off (no router solicitations through the P4 program), TX/RX checksum
  offload off (a raw-socket switch forwards what it reads; offloaded frames
  carry no checksum).
* Switches: :class:`P4Switch` starts the chosen target through
  :func:`targets.switch.start_target` on its interfaces (``-i port@intf``), logs to
  ``run/logs/<switch>.log`` and is stopped by PID. With ``pcap_dir`` each switch
  writes BMv2's per-port captures into ``pcap_dir/<switch>/`` (``--pcap``); with
  ``packet_trace`` its per-packet trace log into ``<log dir>/<switch>-trace.txt``
  (``--packet-trace``).
  No OpenFlow controller: the controller daemon programs the switches over P4Runtime.
* Links: ``bw_mbit`` via Mininet's ``TCLink`` (a host's own direction
  ``host_bw_mbit`` where given); ``delay_ms`` only where the
  kernel has ``netem`` (warned once and ignored otherwise). A ``bottleneck``
  link gets a "wire" namespace between the switch and its neighbour carrying
  the strict-priority shaper of :mod:`topo.tc` (see :func:`topo.tc.mirror_commands`
  for why not on the switch's own interface). The bottleneck's delay, if any, is
  applied on its host side only.
* Names in the root namespace (switch ports) are ``<prefix><switch>-<port>``;
  :class:`EchelonNet` refuses to start if one exists, and removes every one it
  made on :meth:`stop`. Tests use their own prefix so they never collide with a
  demo running at the same time.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet.link import TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, Node, Switch

from echelon.constants import LINK_MTU
from echelon.errors import EchelonError
from echelon.topology import Link, Topology
from targets.switch import Target, TargetKind, resolve_kind, start_target
from topo import tc

log = logging.getLogger(__name__)
DEFAULT_PREFIX = "ec"
#: Packets each switch egress queue holds: deep, so the shaper is the bottleneck.
SWITCH_QUEUE_DEPTH = 10000
#: ``nice`` increment of the switch process. A switch is hardware of its own; here it is
#: one process sharing the CPUs with every emulated host, agent and the controller, and
#: a single-threaded BMv2 near its packet rate drops at its input when they take its CPU
#: (measured: docs/measurements/demo.md), so it runs before them.
SWITCH_NICE = -10
_warned_netem = False


class NetError(EchelonError):
    """The emulated network could not be built (names taken, tools missing, ...)."""


def ns_cmd(node: Node) -> list[str]:
    """Prefix that runs a command inside ``node``'s network namespace."""
    return ["mnexec", "-a", str(node.pid)]


@dataclass(frozen=True)
class ShapedPort:
    """A bottleneck direction: switch ``switch`` sends out of ``port`` towards ``toward``
    through the strict-priority shaper on ``iface`` (in the wire namespace ``ns``)."""

    switch: str
    port: int
    toward: str
    iface: str
    ns: tuple[str, ...]
    mode: str


class P4Switch(Switch):  # type: ignore[misc]
    """A Mininet switch whose data plane is BMv2 or the soft switch, started by PID."""

    def __init__(
        self,
        name: str,
        kind: TargetKind = "auto",
        grpc: str = "127.0.0.1:9559",
        thrift_port: int = 9090,
        device_id: int = 0,
        log_dir: str = "run/logs",
        pcap_dir: str | None = None,
        packet_trace: bool = False,
        **params: Any,
    ) -> None:
        super().__init__(name, dpid="1", **params)
        self.kind: TargetKind = kind
        self.grpc = grpc
        self.thrift_port = thrift_port
        self.device_id = device_id
        self.log_dir = Path(log_dir)
        self.pcap_dir = pcap_dir
        self.packet_trace = self.log_dir / f"{name}-trace.txt" if packet_trace else None
        self.port_map: dict[int, str] = {}
        self.target: Target | None = None

    def start(self, controllers: Any) -> None:
        self.target = start_target(
            self.kind,
            self.port_map,
            self.grpc,
            self.thrift_port,
            device_id=self.device_id,
            log_path=self.log_dir / f"{self.name}.log",
            pcap_dir=self.pcap_dir,
            nice=SWITCH_NICE,
            packet_trace=self.packet_trace,
        )

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.target is not None:
            self.target.stop()
            self.target = None
        super().stop(deleteIntfs)


def netem_ok() -> bool:
    """Whether link delay can be emulated; warns once when it cannot."""
    global _warned_netem
    ok = tc.qdisc_available("netem")
    if not ok and not _warned_netem:
        log.warning("kernel has no netem qdisc: link delay_ms is IGNORED (links have no delay)")
        _warned_netem = True
    return ok


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


class EchelonNet:
    """Build, start and tear down the emulated network of a topology."""

    def __init__(
        self,
        topo: Topology,
        kind: TargetKind = "auto",
        prefix: str = DEFAULT_PREFIX,
        log_dir: str | Path = "run/logs",
        pcap_dir: str | Path | None = None,
        packet_trace: bool = False,
    ) -> None:
        self.topo = topo
        #: ``--packet-trace``: each switch's trace log in ``log_dir/<switch>-trace.txt``.
        self.packet_trace = packet_trace
        #: ``--pcap``: each switch captures its ports into ``pcap_dir/<switch>/``.
        self.pcap_dir = Path(pcap_dir) if pcap_dir is not None else None
        self.kind = resolve_kind(kind)
        self.prefix = prefix
        self.log_dir = str(log_dir)
        self.mn: Mininet | None = None
        self.root_intfs: list[str] = []
        self.shaper_mode: str | None = None
        #: every shaped direction: the switch port feeding it and the shaper's interface
        self.shaped: list[ShapedPort] = []
        self._wires: list[tuple[Node, Link]] = []

    # ------------------------------------------------------------ naming

    def intf_name(self, switch: str, port: int) -> str:
        name = f"{self.prefix}{switch}-{port}"
        if len(name) > 15:
            raise NetError(f"interface name {name!r} exceeds 15 characters; shorten prefix/switch")
        return name

    def planned_root_intfs(self) -> list[str]:
        return [
            self.intf_name(node, port)
            for lk in self.topo.links
            for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port))
            if node in self.topo.switches and port is not None
        ]

    # ------------------------------------------------------------ life cycle

    def start(self) -> EchelonNet:
        setLogLevel("warning")
        planned = self.planned_root_intfs()
        taken = sorted(set(planned) & root_links())
        if taken:
            raise NetError(f"interfaces {taken} already exist (another run with prefix "
                           f"{self.prefix!r}?); refusing to touch them")  # fmt: skip
        self.root_intfs = planned
        try:
            self._build()
        except BaseException:
            self.stop()
            raise
        return self

    def _build(self) -> None:
        mn = self.mn = Mininet(topo=None, controller=None, build=False, link=TCLink)
        for h in self.topo.hosts.values():
            mn.addHost(h.name, ip=None, mac=h.mac)
        for s in self.topo.switches.values():
            pcap = str(self.pcap_dir / s.name) if self.pcap_dir else None
            mn.addSwitch(s.name, cls=P4Switch, kind=self.kind, grpc=s.grpc,
                         thrift_port=s.thrift_port, device_id=s.device_id,
                         log_dir=self.log_dir, pcap_dir=pcap,
                         packet_trace=self.packet_trace)  # fmt: skip
        delay_ok = any(lk.delay_ms for lk in self.topo.links) and netem_ok()
        for i, lk in enumerate(self.topo.links):
            self._add_link(mn, i, lk, delay_ok)
        mn.build()
        # jumbo frames on hosts, wires and the switches' ports, so the demo can send its bytes
        # in fewer packets where a switch forwards too few per second (--packet-bytes)
        for node in (*mn.hosts, *mn.switches):
            for intf in node.intfList():
                if intf.name != "lo":
                    node.cmd("ip", "link", "set", "dev", intf.name, "mtu", str(LINK_MTU))
        for h in self.topo.hosts.values():
            self._config_host(mn[h.name])
        for name in self.root_intfs:
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"],
                           capture_output=True)  # fmt: skip
        for wire, lk in self._wires:
            self._setup_wire(wire, lk)
        mn.start()
        for s in self.switches():
            if s.target is not None:
                with s.target.runtime() as rt:
                    for port in s.port_map:
                        rt.set_queue_depth(SWITCH_QUEUE_DEPTH, port)

    def _add_link(self, mn: Mininet, i: int, lk: Link, delay_ok: bool) -> None:
        params: dict[str, Any] = {"txo": False, "rxo": False}
        delay = lk.delay_ms if delay_ok else 0.0
        ends = [(lk.a, lk.a_port), (lk.b, lk.b_port)]
        if not lk.bottleneck:
            self._connect(mn, ends[0], ends[1], params)
            for node, port in ends:
                rate = lk.host_rate() if node in self.topo.hosts else lk.bw_mbit
                self._limit(mn, node, port, rate, delay)
            return
        wire = mn.addHost(f"w{i}", ip=None, inNamespace=True)
        self._connect(mn, ends[0], (wire.name, None), params, "wa")
        self._connect(mn, (wire.name, None), ends[1], params, "wb")
        self._wires.append((wire, lk))
        for node, port in ends:  # a host's own direction keeps a plain rate limit
            if node in self.topo.hosts:
                self._limit(mn, node, port, lk.host_rate(), delay)

    def next_hop_mac(self, switch: str, port: int) -> str:
        """The destination MAC ``switch`` writes on frames it sends out of ``port``."""
        macs = {r.next_hop_mac for r in self.topo.routes(switch) if r.port == port}
        if len(macs) != 1:
            raise NetError(f"{switch} port {port}: expected one next-hop MAC, got {sorted(macs)}")
        return macs.pop()

    def _setup_wire(self, wire: Node, lk: Link) -> None:
        """Forward between ``wa`` (towards ``lk.a``) and ``wb`` (towards ``lk.b``).

        A direction a switch sends into is *routed* (IPv4 forwarding, policy rule
        "in on one side, out of the other"): ``ip_rcv`` orphans the packet from the
        switch's socket, so the shaper behind it may queue any backlog (see
        :func:`topo.tc.mirror_commands`). The receiving side takes the MAC the switch
        addresses, the sending side a permanent neighbour with the far end's MAC.
        A direction a host sends into is mirrored as is (the host's own rate limit
        applies; its backlog belongs to the host's sockets).
        """
        ns = ns_cmd(wire)
        sysctls = ["net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
                   "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf.all.send_redirects=0",
                   "net.ipv6.conf.all.disable_ipv6=1"]  # fmt: skip
        for sc in sysctls:
            subprocess.run([*ns, "sysctl", "-qw", sc], capture_output=True)
        ends = {"wa": (lk.a, lk.a_port), "wb": (lk.b, lk.b_port)}
        # Neighbours last: changing an interface's MAC flushes its neighbour table,
        # permanent entries included, which silently broke the first routed direction
        # of a switch-switch wire when the second direction set the MAC.
        neighbours: list[list[str]] = []
        for table, (in_if, out_if) in enumerate((("wb", "wa"), ("wa", "wb")), start=100):
            sender, sport = ends[in_if]
            if sender not in self.topo.switches or sport is None:
                for argv in tc.mirror_commands(in_if, out_if):
                    tc.run_tc(argv, ns=ns)
                continue
            mac = self.next_hop_mac(sender, sport)
            for argv in (
                ["ip", "link", "set", in_if, "address", mac],
                ["sysctl", "-qw", f"net.ipv4.conf.{in_if}.rp_filter=0"],
                ["ip", "rule", "add", "iif", in_if, "table", str(table)],
                ["ip", "route", "add", "default", "via", "169.254.0.1", "dev", out_if,
                 "onlink", "table", str(table)],
            ):  # fmt: skip
                tc.run_tc(argv, ns=ns)
            neighbours.append(["ip", "neigh", "replace", "169.254.0.1", "lladdr", mac,
                               "dev", out_if, "nud", "permanent"])  # fmt: skip
            rate = lk.bw_mbit or 1000.0
            self.shaper_mode = tc.apply_bottleneck(tc.Bottleneck(out_if, rate), ns=ns)
            toward = ends[out_if][0]
            self.shaped.append(
                ShapedPort(sender, sport, toward, out_if, tuple(ns), self.shaper_mode)
            )
        for argv in neighbours:
            tc.run_tc(argv, ns=ns)

    def _limit(
        self, mn: Mininet, node: str, port: int | None, mbit: float | None, delay_ms: float
    ) -> None:
        if not mbit and not delay_ms:
            return
        if node in self.topo.switches:
            assert port is not None
            iface, ns = self.intf_name(node, port), []
        else:
            iface, ns = f"{node}-eth0", ns_cmd(mn[node])
        for argv in tc.link_commands(iface, mbit, delay_ms):
            tc.run_tc(argv, ns=ns)

    def _connect(
        self,
        mn: Mininet,
        a: tuple[str, int | None],
        b: tuple[str, int | None],
        params: Mapping[str, Any],
        wire_intf: str | None = None,
    ) -> None:
        names = []
        for node, port in (a, b):
            if node in self.topo.switches:
                assert port is not None
                names.append(self.intf_name(node, port))
            elif node in self.topo.hosts:
                names.append(f"{node}-eth0")
            else:
                names.append(wire_intf or f"{node}-eth0")
        # Create from the namespaced end so the veth appears directly in its namespace.
        first, second = (b, a) if a[0] in self.topo.switches else (a, b)
        n1, n2 = (names[1], names[0]) if first is b else (names[0], names[1])
        link = mn.addLink(mn[first[0]], mn[second[0]], port1=first[1], port2=second[1],
                          intfName1=n1, intfName2=n2, cls=TCLink, **params)  # fmt: skip
        for node, port in (a, b):
            if node in self.topo.switches and port is not None:
                sw = mn[node]
                sw.port_map[port] = self.intf_name(node, port)
        del link

    def _config_host(self, host: Host) -> None:
        me = self.topo.hosts[host.name]
        intf = f"{host.name}-eth0"
        cmds = [
            "sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
            "sysctl -qw net.ipv6.conf.default.disable_ipv6=1",
            f"ip addr flush dev {intf}",
            f"ip addr add {me.ip}/32 dev {intf}",
            f"ip link set {intf} up",
            "ip link set lo up",
        ]
        for other in self.topo.hosts.values():
            if other.name != me.name:
                cmds.append(f"ip route replace {other.ip}/32 dev {intf}")
                cmds.append(f"ip neigh replace {other.ip} lladdr {other.mac} dev {intf} "
                            "nud permanent")  # fmt: skip
        out = host.cmd("; ".join(cmds))
        if "rror" in out:
            raise NetError(f"configuring {host.name}: {out.strip()}")
        # Tell Mininet the address too: its CLI substitutes host names by IP()
        # (``h1 ping h4``), which is None for a host added with ip=None.
        with suppress(AttributeError):
            host.defaultIntf().ip, host.defaultIntf().prefixLen = me.ip, 32

    def switches(self) -> Iterator[P4Switch]:
        if self.mn is not None:
            for s in self.mn.switches:
                if isinstance(s, P4Switch):
                    yield s

    def __getitem__(self, name: str) -> Node:
        assert self.mn is not None
        return self.mn[name]

    def stop(self) -> None:
        """Stop switches (by PID), hosts and wires, delete every interface made. Idempotent."""
        mn, self.mn = self.mn, None
        if mn is not None:
            for s in mn.switches:
                with suppress(Exception):
                    s.stop(deleteIntfs=False)
            for lk in mn.links:
                with suppress(Exception):
                    lk.stop()
            for node in (*mn.hosts, *mn.switches):
                with suppress(Exception):
                    node.terminate()  # SIGHUP to the node's shell process group
            for node in (*mn.hosts, *mn.switches):
                shell = getattr(node, "shell", None)
                if shell is not None:
                    try:
                        shell.wait(5)
                    except subprocess.TimeoutExpired:
                        shell.kill()
                        shell.wait()
        left = set(self.root_intfs) & root_links()
        for name in left:
            subprocess.run(["ip", "link", "del", name], capture_output=True)

    def __enter__(self) -> EchelonNet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
