"""The queue-depth picture of ``make run``: tc backlog parsing, samples, the plot."""

from __future__ import annotations

from pathlib import Path

from topo import tc
from topo.queuedepth import plot_queue_depths

#: ``tc -s qdisc show`` of a prio-tbf bottleneck (iproute2 6.x layout), backlog in
#: band 1 (switch priority 6) and band 7 (priority 0).
PRIO_TBF = """\
qdisc tbf 1: root refcnt 2 rate 10Mbit burst 15Kb lat 0us
 Sent 123 bytes 2 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 4542b 3p requeues 0
qdisc prio 2: parent 1:1 bands 8 priomap 7 7 7 7 7 7 7 7 7 7 7 7 7 7 7 7
 Sent 123 bytes 2 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 4542b 3p requeues 0
qdisc pfifo 30: parent 2:1 limit 10000p
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc pfifo 31: parent 2:2 limit 10000p
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 3028b 2p requeues 0
qdisc pfifo 37: parent 2:8 limit 10000p
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 1514b 1p requeues 0
"""

HTB = """\
qdisc htb 1: root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0
 backlog 9084b 6p requeues 0
qdisc pfifo 27: parent 1:17 limit 10000p
 backlog 9084b 6p requeues 0
qdisc pfifo 20: parent 1:10 limit 10000p
 backlog 0b 0p requeues 0
"""


def test_backlog_per_switch_priority_in_both_modes() -> None:
    assert tc.backlog_by_priority(PRIO_TBF, "prio-tbf") == {7: 0, 6: 2, 0: 1}
    assert tc.backlog_by_priority(HTB, "htb") == {7: 6, 0: 0}
    # the root's total is no priority's; handles of the other mode are not leaves
    assert tc.leaf_priority("1:", "htb") is None
    assert tc.leaf_priority("30:", "htb") is None
    assert tc.leaf_priority("27:", "prio-tbf") is None


def test_plot_one_panel_per_policy_and_port(tmp_path: Path) -> None:
    view = {
        "port": "s1 port 4 -> h4",
        "t": [0.0, 0.1, 0.2],
        "bottleneck": {"6": [0, 5, 2], "1": [0, 9, 12]},
        "switch": {"6": [0, 1, 0]},
        "errors": [],
    }
    results = {"policies": {"echelon": {"queue_depths": [view]}, "fifo": {"queue_depths": [view]}}}
    out = tmp_path / "q.png"
    fig = plot_queue_depths(results, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [ax.get_title() for ax in fig.axes] == [
        "echelon: s1 port 4 -> h4",
        "fifo: s1 port 4 -> h4",
    ]
    lines = fig.axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines] == [[0, 5, 2], [0, 1, 0], [0, 9, 12]]
    assert [line.get_linestyle() for line in lines] == ["-", ":", "-"]
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == ["priority 6", "priority 1"]


def test_plot_without_samples_says_so(tmp_path: Path) -> None:
    fig = plot_queue_depths({"policies": {"echelon": {}}}, tmp_path / "q.png")
    assert "no queue samples" in [t.get_text() for t in fig.axes[0].texts]


def test_the_sampler_reads_the_switch_queue_on_one_connection(tmp_path: Path) -> None:
    """The switch half of a sample: the bottleneck port's cells of the depth register,
    over one Thrift connection for the whole run (opened again only after a failure)."""
    from echelon.constants import NUM_PRIORITIES, REG_QUEUE_DEPTH
    from p4client.bmruntime import RuntimeClient
    from tests.controlplane.inproc import running_controller
    from topo.net import ShapedPort
    from topo.queuedepth import QueueSampler

    with running_controller(tmp_path) as c:
        (sw,) = c.topo.switches.values()
        with RuntimeClient(sw.thrift_port) as rt:
            rt.write_register(REG_QUEUE_DEPTH, 4 * NUM_PRIORITIES + 5, 17)
        port = ShapedPort("s1", 4, "h4", "s1-eth4", (), "htb")
        sampler = QueueSampler(port, sw.thrift_port)
        assert sampler._switch_depths()[5] == 17
        first = sampler._rt
        assert sampler._switch_depths() == {p: 17 if p == 5 else 0 for p in range(8)}
        assert first is not None and sampler._rt is first
        with sampler:  # stopping the sampler closes its connection
            pass
        assert first._transport is None
