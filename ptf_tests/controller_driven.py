"""Controller-driven: the daemon, not hand-written entries, produces the ordering on the wire.

The test hands the switch over to ``python -m controlplane.daemon`` (the one-switch
topology of :func:`echelon.topology.one_switch`: host h<p> on PTF's port p), registers
a two-group job through the northbound HTTP API, reads back the priorities the
controller chose, and checks with a frozen burst that the higher group's frames all
leave before the lower group's, at the DSCPs the controller's levels imply.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from controlplane.client import ApiClient
from controlplane.daemon import DaemonProcess
from echelon.topology import one_switch
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest
from ptf_tests.burst import burst

OUT = 4
N = 3
DAEMON_ELECTION_ID = 10  # above the tests' (0, 1): the daemon becomes primary
JOB = {
    "job": "ptfjob",
    "echelonflows": [
        {"group": "early", "t_ref": 0.0, "flows": [{"src": "h1", "dst": "h4", "size": 3000}]},
        {"group": "late", "t_ref": 0.5, "flows": [{"src": "h2", "dst": "h4", "size": 3000}]},
    ],
}


def level_for(group: dict[str, Any], deadline_us: int) -> int:
    """The level the controller's entries give ``deadline_us`` (band top if no range)."""
    for r in group["ranges"]:
        if r["lo_us"] <= deadline_us <= r["hi_us"]:
            return int(r["priority"])
    return int(group["priority"])


class ControllerDrivenOrdering(EchelonTest):
    """Register a job via the API; its higher group wins the contended port."""

    #: extra daemon options (subclasses: ``ptf_tests/online.py`` runs it online)
    daemon_args: tuple[str, ...] = ()

    def runTest(self) -> None:
        self.sw.close()  # hand the primary role to the daemon
        with tempfile.TemporaryDirectory(prefix="ptf-ctl-") as tmp:
            topo = Path(tmp, "topo.json")
            topo.write_text(
                json.dumps(one_switch("ptf", self.p["grpc_addr"], self.p["thrift_port"]))
            )
            extra = ["--p4info", self.p["p4info"], "--election-id", str(DAEMON_ELECTION_ID)]
            extra += ["--device-config", self.p["bmv2_json"], *self.daemon_args]
            # The daemon's log outlives the temporary directory, for post-mortems.
            log_path = Path(self.p.get("log_dir", tmp), "controller-daemon.log")
            log_path.unlink(missing_ok=True)  # this test's alone (the launcher appends)
            daemon = DaemonProcess(topo, Path(tmp, "reg.db"), log_path, *extra)
            daemon.start()
            try:
                daemon.wait_in_sync(timeout=20, switch="s1")
                self.drive(daemon.url)
            finally:
                daemon.close(10)

    def drive(self, api: str) -> None:
        """Drive the synced daemon whose API is at ``api``."""
        with ApiClient(api, timeout=10) as client:
            self.drive_with(client)

    def drive_with(self, client: ApiClient) -> None:
        client.register(JOB)
        groups = {g.group: g.model_dump() for g in client.show("ptfjob").groups}
        hi, lo = sorted(groups.values(), key=lambda g: -level_for(g, 0))
        self.assertGreater(level_for(hi, 0), level_for(lo, 0), f"no order between {groups}")
        # Reads need no primary role: reconnect as a backup for the counters.
        self.sw.connect()
        src = {g["group"]: int(g["sources"][0].lstrip("h")) for g in groups.values()}
        frames = {
            g: [pk.echelon(src[g], OUT, groups[g]["echelon_id"], 0, seq=i) for i in range(N)]
            for g in groups
        }
        prio = {g: level_for(groups[g], 0) for g in groups}
        # Interleaved, the lower group first each time: the order that favours it.
        pairs = zip(frames[lo["group"]], frames[hi["group"]], strict=True)
        sends = [
            (src[g], f, prio[g]) for pair in pairs for f in pair for g in groups if f in frames[g]
        ]
        counts = {int(g["class_id"]): N for g in groups.values()}
        first, rest = burst(self, OUT, sends, counts)
        want_first = {pk.forwarded(frames[g][0], OUT, prio[g]) for g in groups}
        self.assertEqual(set(first), want_first)
        want = [pk.forwarded(f, OUT, prio[hi["group"]]) for f in frames[hi["group"]][1:]]
        want += [pk.forwarded(f, OUT, prio[lo["group"]]) for f in frames[lo["group"]][1:]]
        self.assertEqual([pk.describe(f) for f in rest], [pk.describe(f) for f in want])
        self.assertEqual(rest, want)
        # Removing the job removes its priority: the same frame now leaves best-effort.
        self.assertEqual(client.remove("ptfjob").removed, "ptfjob")
        self.send(src[hi["group"]], frames[hi["group"]][0])
        self.expect(OUT, [pk.forwarded(frames[hi["group"]][0], OUT, 0)])
        self.expect_nothing_else()
