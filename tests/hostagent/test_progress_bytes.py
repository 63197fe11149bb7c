"""Bytes sent in the progress reports: the reporter's ``sending``, the host agent's
sampler (:class:`hostagent.progress.HostProgress`) and the sender's ``payload_sent``.

Reporter logic is tested without a network: a reporter whose ``_post`` keeps the
:class:`ReportBody` it would send (``flush`` after each call, so none collapse).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from echelon.constants import ECHELON_UDP_PORT
from echelon.progress import REPORT_PERIOD_S, ReportBody
from echelon.specs import validate
from echelon.waiting import wait_until
from hostagent.progress import HostProgress, ProgressReporter
from hostagent.scenario import parse

from .test_agent import HOSTS, _ReleaseAfter, scenario_dict, three_flow_sender
from .test_progress_client import Sink


class Kept(ProgressReporter):
    """A reporter that keeps the bodies it would post."""

    def __init__(self) -> None:
        self.bodies: list[ReportBody] = []
        super().__init__("http://127.0.0.1:9", job="dp", host="h4")

    def _post(self, body: ReportBody) -> bool:
        self.bodies.append(body)
        return True

    def step(self) -> list[ReportBody]:
        """Flush, then every body so far, each checked against the schema."""
        assert self.flush()
        for b in self.bodies:
            assert validate(ReportBody, b.model_dump()).model_dump() == b.model_dump()
        return self.bodies


def summary(b: ReportBody) -> tuple[int, int, tuple[str, ...], dict[str, Any]]:
    return (b.iteration, b.seq, b.released, dict(b.sent))


@pytest.fixture
def rep() -> Iterator[Kept]:
    r = Kept()
    yield r
    r.close()


def test_sending_reports_the_bytes_per_flow_sorted_by_index(rep: Kept) -> None:
    rep.released(0, "push")
    rep.step()
    rep.sending(0, "push", {2: 500, 0: 1000})
    rep.step()
    rep.sending(0, "push", {1: 0})  # a flow just released: another figure in the group
    rep.step()
    rep.sending(0, "pull", {0: 7})
    got = [summary(b) for b in rep.step()]
    assert got == [
        (0, 1, ("push",), {}),
        (0, 2, ("push",), {"push": ((0, 1000), (2, 500))}),
        (0, 3, ("push",), {"push": ((0, 1000), (1, 0), (2, 500))}),
        (0, 4, ("push",), {"pull": ((0, 7),), "push": ((0, 1000), (1, 0), (2, 500))}),
    ]
    assert list(rep.bodies[-1].model_dump()) == list(ReportBody.model_fields)


def test_unchanged_or_lower_bytes_send_no_snapshot(rep: Kept) -> None:
    rep.sending(0, "push", {0: 1000, 1: 20})
    rep.step()
    rep.sending(0, "push", {0: 1000, 1: 20})  # the same: nothing new
    rep.sending(0, "push", {0: 999})  # sampled before the figure held: stale
    rep.sending(0, "push", {})
    assert [b.seq for b in rep.step()] == [1]
    rep.sending(0, "push", {1: 40})  # one flow moved: the other keeps its figure
    assert summary(rep.step()[-1]) == (0, 2, (), {"push": ((0, 1000), (1, 40))})


def test_sending_ignores_older_iterations_and_a_newer_one_starts_afresh(rep: Kept) -> None:
    rep.released(3, "push")
    rep.step()
    rep.finished(3, "pull")
    rep.step()
    rep.sending(3, "push", {0: 100})
    rep.step()
    rep.sending(2, "push", {0: 5000})  # an iteration this host has left
    assert len(rep.step()) == 3
    rep.sending(4, "push", {0: 10})
    last = rep.step()[-1]
    assert (last.iteration, last.seq, last.released, last.finished) == (4, 4, (), ())
    assert last.sent == {"push": ((0, 10),)}
    rep.released(3, "late")  # the events follow the same iteration
    rep.sending(3, "push", {0: 200})
    assert len(rep.step()) == 4


def test_event_snapshots_carry_the_bytes(rep: Kept) -> None:
    rep.sending(0, "push", {0: 100})
    rep.step()
    rep.released(0, "pull", sent={"pull": {0: 0, 1: 0}})  # one snapshot for both
    rep.step()
    rep.finished(0, "grad")
    rep.step()
    rep.released(0, "pull", sent={"pull": {1: 0}})  # nothing new
    got = [(b.seq, b.released, b.finished, dict(b.sent)) for b in rep.step()]
    both = {"pull": ((0, 0), (1, 0)), "push": ((0, 100),)}
    assert got == [
        (1, (), (), {"push": ((0, 100),)}),
        (2, ("pull",), (), both),
        (3, ("pull",), ("grad",), both),
    ]
    rep.released(1, "push")  # next iteration: no bytes of the last one
    assert rep.step()[-1].sent == {}


# ------------------------------------------------------------ HostProgress


class FakeSender:
    """What HostProgress reads: bytes per uid of the flows released, not fully sent."""

    def __init__(self) -> None:
        self.live: dict[str, int] = {}

    def payload_sent(self) -> Mapping[str, int]:
        return dict(self.live)


@pytest.fixture
def sink() -> Iterator[Sink]:
    from targets.process import free_port

    s = Sink(free_port())
    yield s
    s.stop()


def last_sent(sink: Sink) -> dict[str, list[list[int]]] | None:
    bodies = list(sink.bodies)
    return bodies[-1]["sent"] if bodies else None


def test_the_sampler_reports_the_bytes_while_the_host_sends(sink: Sink) -> None:
    """h1 sends pipe/0/fwd#0 and #1 (20,000 bytes each). The release of #0 reports its
    bytes with it; the sampler then follows the figures; a flow the sender no longer
    lists was fully sent and counts at its size."""
    api = f"http://127.0.0.1:{sink.server.server_address[1]}"
    hp = HostProgress(parse(scenario_dict(0.0)), "h1", api, period=0.01)
    src = FakeSender()
    hp.watch(src)
    try:
        assert hp.sampler is not None and hp.sampler.is_alive()
        src.live["pipe/0/fwd#0"] = 0
        hp.released("pipe/0/fwd#0")
        assert hp.flush()
        # (the sampler may have reported the flow's 0 bytes just before the release)
        release = next(b for b in sink.bodies if b["released"])
        assert release["released"] == ["fwd"] and release["sent"] == {"fwd": [[0, 0]]}
        src.live["pipe/0/fwd#0"] = 4840
        wait_until(lambda: last_sent(sink) == {"fwd": [[0, 4840]]}, 10.0, "sampled bytes")
        src.live["pipe/0/fwd#1"] = 0
        hp.released("pipe/0/fwd#1")
        del src.live["pipe/0/fwd#0"]  # its last packet left
        src.live["pipe/0/fwd#1"] = 968
        want = {"fwd": [[0, 20000], [1, 968]]}
        wait_until(lambda: last_sent(sink) == want, 10.0, "the sent flow at its size")
    finally:
        hp.close()
    assert hp.sampler is not None and not hp.sampler.is_alive()
    for b in sink.bodies:
        validate(ReportBody, b)
    seqs = [b["seq"] for b in sink.bodies]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_the_sampler_ticks_a_period_after_the_start_not_after_set_up(sink: Sink) -> None:
    """Sampling runs on the scenario's clock, ``start_at + k * period``: a host set up
    early does not report bytes a few ms into the run where the others (and the packet
    model) report at the first period."""
    api = f"http://127.0.0.1:{sink.server.server_address[1]}"
    hp = HostProgress(parse(scenario_dict(0.0)), "h1", api, period=0.05)
    src = FakeSender()
    start_at = time.time() + 0.3
    hp.watch(src, start_at)
    try:
        src.live["pipe/0/fwd#0"] = 0
        hp.released("pipe/0/fwd#0")
        src.live["pipe/0/fwd#0"] = 4840
        wait_until(lambda: last_sent(sink) == {"fwd": [[0, 4840]]}, 10.0, "sampled bytes")
    finally:
        hp.close()
    sampled = next(b for b in sink.bodies if b["sent"] == {"fwd": [[0, 4840]]})
    assert sampled["at"] >= start_at + 0.05


def test_no_sampler_with_a_zero_period_but_releases_carry_the_bytes(sink: Sink) -> None:
    api = f"http://127.0.0.1:{sink.server.server_address[1]}"
    hp = HostProgress(parse(scenario_dict(0.0)), "h1", api, period=0)
    src = FakeSender()
    src.live["pipe/0/fwd#0"] = 484
    hp.watch(src)
    assert hp.sampler is None
    hp.released("pipe/0/fwd#0")
    hp.close()
    assert [b["sent"] for b in sink.bodies] == [{"fwd": [[0, 484]]}]
    assert REPORT_PERIOD_S == 0.05


def test_the_sender_lists_the_bytes_of_its_released_flows_until_fully_sent() -> None:
    """Two flows share h1; a third is released after 5 packets. At that release the
    sender lists each released flow's payload bytes (packets x chunk), the new one at
    0; once everything has left it lists nothing."""
    sender, uids = three_flow_sender()
    seen: dict[str, dict[str, int]] = {}

    def on_release(uid: str) -> None:
        seen[uid] = sender.payload_sent()

    sender.on_release = on_release
    rel = _ReleaseAfter(sender, uids[:2], uids[2], after=5)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((HOSTS["h2"], ECHELON_UDP_PORT))
    try:
        assert sender.payload_sent() == {}
        sender.run(time.time() + 10, rel)
    finally:
        rx.close()
    k = rel.sent_at_release
    assert k is not None
    at_third = seen[uids[2]]
    assert set(at_third) == set(uids) and at_third[uids[2]] == 0
    assert sum(at_third[u] for u in uids[:2]) == k * sender.sc.chunk
    assert sender.payload_sent() == {}  # all fully sent
