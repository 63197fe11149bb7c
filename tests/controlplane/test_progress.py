"""Progress tracking (pure) and the entry transitions of online re-plans.

The tracker must survive lost, repeated and reordered reports and reporter
restarts; the re-plan's updates must never leave a registered packet without a
level >= 1, and with per-offset ranges every packet sees either its old or its
new level at every intermediate moment of the write.
"""

from __future__ import annotations

import ipaddress
import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.entries import T_CLASSIFY, T_DEADLINE, GroupPlan, group_entries, plan_updates
from controlplane.inflight import ProgressTracker, parse_report
from controlplane.online import percentile
from controlplane.planning import fine_ranges
from controlplane.registry import UnknownJobError
from echelon.errors import SpecError, UnknownHostError
from echelon.progress import MAX_REPORT_AGE_S
from echelon.schedule import DeadlineRange
from echelon.topology import load
from p4client.p4info import P4Info, TableEntry
from tests.controlplane.helpers import P4INFO, write_topo


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def rep(host: str, it: int, seq: int, rel: tuple[str, ...] = (), fin: tuple[str, ...] = (),
        session: str = "s1", job: str = "j", run: int = 0) -> Any:  # fmt: skip
    return parse_report(
        {
            "job": job,
            "host": host,
            "iteration": it,
            "session": session,
            "seq": seq,
            "released": list(rel),
            "finished": list(fin),
            "run": run,
        }
    )


@pytest.fixture
def tracker() -> tuple[ProgressTracker, Clock]:
    clock = Clock()
    tr = ProgressTracker(clock, timeout_s=5.0)
    # group a: h1 -> h3, h4 (two receivers); group b: h2 -> h4, planned 0.5 s in
    tr.add_job("j", {"a": (frozenset({"h3", "h4"}), 0.0), "b": (frozenset({"h4"}), 0.5)})
    return tr, clock


def alive(tr: ProgressTracker) -> dict[str, int]:
    return {i.group: i.iteration for i in tr.alive()}


def test_release_then_finish_needs_every_receiver(tracker: Any) -> None:
    tr, _ = tracker
    assert tr.ingest(rep("h1", 0, 1, rel=("a",)))
    assert alive(tr) == {"a": 0}
    assert not tr.ingest(rep("h3", 0, 1, fin=("a",))), "h4 has not received its part of a"
    assert alive(tr) == {"a": 0}
    assert tr.ingest(rep("h4", 0, 1, fin=("a",)))
    assert alive(tr) == {}


def test_duplicate_and_reordered_reports_are_ignored(tracker: Any) -> None:
    tr, _ = tracker
    assert tr.ingest(rep("h1", 0, 5, rel=("a",)))
    assert not tr.ingest(rep("h1", 0, 5, rel=("a",)))  # repeated
    assert not tr.ingest(rep("h1", 0, 3, rel=()))  # older, arrives late
    assert alive(tr) == {"a": 0}
    assert tr.ignored == 2


def test_lost_finish_is_implied_by_a_later_iteration(tracker: Any) -> None:
    tr, _ = tracker
    tr.ingest(rep("h1", 0, 1, rel=("a",)))
    tr.ingest(rep("h3", 0, 1, fin=("a",)))
    # h4's "finished a" of iteration 0 is lost; its next report is from iteration 1
    assert tr.ingest(rep("h4", 1, 7))
    assert alive(tr) == {}
    tr.ingest(rep("h1", 1, 2, rel=("a",)))
    assert alive(tr) == {"a": 1}


def test_lost_release_is_implied_by_a_finish(tracker: Any) -> None:
    tr, _ = tracker
    tr.ingest(rep("h4", 0, 1, fin=("b",)))  # h2's release was lost; b came and went
    assert alive(tr) == {}
    assert tr.view()["j"]["groups"]["b"]["iteration"] == 0


def test_reporter_restart_starts_a_new_session(tracker: Any) -> None:
    tr, _ = tracker
    tr.ingest(rep("h1", 0, 50, rel=("a",)))
    tr.ingest(rep("h3", 0, 1, fin=("a",)))
    tr.ingest(rep("h4", 0, 1, fin=("a",)))
    assert alive(tr) == {}
    assert tr.ingest(rep("h1", 1, 1, rel=("a",), session="s2")), "seq 1 of a new session"
    assert alive(tr) == {"a": 1}


def test_a_job_started_again_is_tracked_afresh_and_its_old_run_ignored(tracker: Any) -> None:
    """The job reached iteration 2 (a and b in flight), then is started again from the
    beginning (run 2): its progress starts over, so b's release in the new iteration 0
    is in flight -- not ignored as older than iteration 2 -- and a late report of the
    old run changes nothing."""
    tr, _ = tracker
    tr.ingest(rep("h1", 2, 9, rel=("a",), run=1))
    tr.ingest(rep("h2", 2, 9, rel=("b",), run=1))
    assert alive(tr) == {"a": 2, "b": 2}
    assert tr.ingest(rep("h2", 0, 1, rel=("b",), session="again", run=2))
    assert alive(tr) == {"b": 0}
    assert not tr.ingest(rep("h1", 2, 10, rel=("a", "b"), run=1)), "stale run"
    assert alive(tr) == {"b": 0}
    assert tr.ingest(rep("h1", 0, 1, rel=("a",), session="again2", run=2))
    assert alive(tr) == {"a": 0, "b": 0}


def test_a_reporter_restarting_mid_run_keeps_the_jobs_progress(tracker: Any) -> None:
    """A new session of the same run is a reporter restart, not a job restart."""
    tr, _ = tracker
    tr.ingest(rep("h1", 1, 9, rel=("a",), run=5))
    tr.ingest(rep("h2", 1, 3, rel=("b",), run=5))
    assert not tr.ingest(rep("h1", 1, 1, rel=("a",), session="s2", run=5))
    assert alive(tr) == {"a": 1, "b": 1}


def test_iteration_start_is_estimated_from_planned_t_ref(tracker: Any) -> None:
    tr, clock = tracker
    clock.t = 10.0
    tr.ingest(rep("h2", 0, 1, rel=("b",)))  # b planned at 0.5 s -> iteration began at 9.5
    (inst,) = tr.alive()
    assert inst.iteration_start == pytest.approx(9.5)
    clock.t = 10.2
    tr.ingest(rep("h1", 0, 1, rel=("a",)))  # a (t_ref 0) released later: start stays
    assert {i.group: i.iteration_start for i in tr.alive()} == {
        "a": pytest.approx(9.5),
        "b": pytest.approx(9.5),
    }


def test_silent_job_leaves_the_plan(tracker: Any) -> None:
    tr, clock = tracker
    tr.ingest(rep("h1", 0, 1, rel=("a",)))
    assert tr.next_expiry() == pytest.approx(clock.t + 5.0)
    clock.t += 5.1
    assert alive(tr) == {}
    assert tr.next_expiry() is None


def test_bad_reports_name_the_field(tracker: Any) -> None:
    tr, _ = tracker
    with pytest.raises(UnknownJobError):
        tr.ingest(rep("h1", 0, 1, rel=("a",), job="nope"))
    with pytest.raises(SpecError) as e:
        tr.ingest(rep("h1", 0, 1, rel=("zz",)))
    assert e.value.field == "released"
    with pytest.raises(UnknownHostError):
        parse_report({"job": "j", "host": "h9", "iteration": 0, "seq": 1}, hosts={"h1"})
    for body, field in [
        ({"job": "j", "host": "h1", "iteration": -1, "seq": 1}, "iteration"),
        ({"job": "j", "host": "h1", "iteration": 0, "seq": "x"}, "seq"),
        ({"job": "j", "host": "h1", "iteration": 0, "seq": 1, "released": "a"}, "released"),
        ({"job": "j", "host": "h1", "iteration": 0, "seq": 1, "bogus": 1}, "bogus"),
    ]:
        with pytest.raises(SpecError) as e:
            parse_report(body)
        assert e.value.field == field


def test_percentile_nearest_rank() -> None:
    xs = [float(i) for i in range(1, 101)]
    assert percentile(xs, 50) == 50.0
    assert percentile(xs, 99) == 99.0
    assert percentile([], 50) is None


# ---------------------------------------------------------------- entry transitions

OFFSETS = [0, 1000, 2000, 5000, 9000]


def quantised(levels: list[int]) -> tuple[DeadlineRange, ...]:
    """Merged ranges as the quantiser makes them: runs of equal level, from 0 to 2^32-1."""
    out: list[DeadlineRange] = []
    for k, (off, lv) in enumerate(zip(OFFSETS, levels, strict=True)):
        lo = 0 if k == 0 else off
        if out and out[-1].priority == lv:
            out[-1] = DeadlineRange(out[-1].lo_us, out[-1].hi_us, lv)
            continue
        if out:
            out[-1] = DeadlineRange(out[-1].lo_us, lo - 1, out[-1].priority)
        out.append(DeadlineRange(lo, 2**32 - 1, lv))
    return tuple(out)


def test_fine_ranges_keep_every_offsets_level() -> None:
    rng = random.Random(3)
    for _ in range(200):
        levels = [rng.randint(1, 7) for _ in OFFSETS]
        merged = quantised(levels)
        fine = fine_ranges(merged, OFFSETS)
        assert [r.lo_us for r in fine] == [0, *OFFSETS[1:]]
        assert fine[-1].hi_us == 2**32 - 1
        for off, lv in zip(OFFSETS, levels, strict=True):
            assert [r.priority for r in fine if r.lo_us <= off <= r.hi_us] == [lv]
    many = list(range(0, 20000, 1000))  # more offsets than FINE_RANGES_MAX: unchanged
    assert fine_ranges(quantised([7, 6, 5, 4, 3]), many) == quantised([7, 6, 5, 4, 3])


def lookup(entries: set[TableEntry], src_ip: int, eid: int, deadline: int) -> set[int]:
    """Every level the pipeline may give the packet with these entries installed (a
    set: overlapping ranges of one class, during an update, may match either)."""
    cls = [
        e
        for e in entries
        if e.table == T_CLASSIFY
        and e.match_dict()["hdr.echelon.echelon_id"] == eid
        and e.match_dict()["hdr.ipv4.srcAddr"] == src_ip
    ]
    if not cls:
        return {0}
    class_id, band = cls[0].params_dict()["class_id"], cls[0].params_dict()["prio"]
    hits = set()
    for e in entries:
        if e.table == T_DEADLINE and e.match_dict()["meta.class_id"] == class_id:
            # a range covering the whole field is a wildcard: no range field at all
            lo, hi = e.match_dict().get("hdr.echelon.deadline_us", (0, 2**32 - 1))  # type: ignore[misc]
            if lo <= deadline <= hi:
                hits.add(int(e.params_dict()["prio"]))  # type: ignore[arg-type]
    return hits or {int(band)}  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    seq=st.lists(st.lists(st.integers(1, 7), min_size=5, max_size=5), min_size=2, max_size=5),
    fine=st.booleans(),
)
def test_replans_never_leave_a_packet_without_its_old_or_new_level(
    seq: list[list[int]], fine: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    p4info = P4Info.load(P4INFO)
    topo = load(write_topo(tmp_path_factory.mktemp("t") / "t.yaml", ["127.0.0.1:1"]))
    ip = int(ipaddress.IPv4Address(topo.hosts["h1"].ip))

    def plan(levels: list[int]) -> set[TableEntry]:
        merged = quantised(levels)
        ranges = fine_ranges(merged, OFFSETS) if fine else merged
        gp = GroupPlan("j", "g", 7, 3, max(levels), ranges, (("h1", "h4"),))
        return set(group_entries(p4info, topo, gp)["s1"])

    cur = plan(seq[0])
    for old_levels, new_levels in itertools.pairwise(seq):
        new = plan(new_levels)
        steps = plan_updates(cur, new)
        # P4Runtime orders requests, not the updates inside one: check every prefix of
        # every phase in two orders (as listed and reversed) -- a switch applies some
        # subset of the request's updates at any moment.
        phases: list[list[Any]] = []
        for s in steps:
            if phases and (phases[-1][0].kind == "DELETE") == (s.kind == "DELETE"):
                phases[-1].append(s)
            else:
                phases.append([s])
        state = {e.key: e for e in cur}
        for batch in phases:
            for order in (batch, batch[::-1]):
                probe = dict(state)
                for s in order:
                    if s.kind == "DELETE":
                        probe.pop(s.entry.key, None)
                    else:
                        probe[s.entry.key] = s.entry
                    for k, off in enumerate(OFFSETS):
                        got = lookup(set(probe.values()), ip, 7, off)
                        assert min(got) >= 1, f"offset {off}: best effort during an update"
                        allowed = {old_levels[k], new_levels[k]}
                        assert got <= allowed, f"offset {off}: {got} not in {allowed}"
            for s in batch:
                if s.kind == "DELETE":
                    state.pop(s.entry.key, None)
                else:
                    state[s.entry.key] = s.entry
        assert set(state.values()) == new
        if fine:  # per-offset keys never change: a re-plan is modifies only
            assert all(s.kind == "MODIFY" for s in steps)
        cur = new


@pytest.fixture
def opening() -> tuple[ProgressTracker, Clock]:
    """Group a opens every iteration (h1 -> h3, h4); b (h2 -> h4) is produced by a task."""
    clock = Clock()
    tr = ProgressTracker(clock, timeout_s=5.0)
    tr.add_job(
        "j", {"a": (frozenset({"h3", "h4"}), 0.0), "b": (frozenset({"h4"}), 0.5)}, opening={"a"}
    )
    return tr, clock


def test_a_host_entering_an_iteration_puts_the_opening_groups_in_flight(opening: Any) -> None:
    tr, clock = opening
    clock.t = 3.0
    assert tr.ingest(rep("h4", 0, 1)), "h4 entered iteration 0: a is about to be sent"
    assert alive(tr) == {"a": 0}, "b is produced by a task: not anticipated"
    clock.t = 4.0
    assert tr.ingest(rep("h4", 1, 2)), "entering iteration 1 implies h4 got iteration 0's a"
    assert alive(tr) == {"a": 1}


def test_without_opening_groups_an_empty_snapshot_puts_nothing_in_flight(tracker: Any) -> None:
    tr, _ = tracker
    tr.ingest(rep("h4", 0, 1))
    assert alive(tr) == {}


def test_the_real_release_replaces_the_provisional_iteration_start(opening: Any) -> None:
    tr, clock = opening
    clock.t = 3.0
    tr.ingest(rep("h1", 0, 1))  # entered before sending anything
    (inst,) = tr.alive()
    assert inst.iteration_start == pytest.approx(3.0)
    clock.t = 4.0
    (inst,) = tr.alive()
    assert inst.iteration_start == pytest.approx(4.0), "not started yet: starts now, not overdue"
    clock.t = 4.5  # the traffic started 1.5 s later
    assert tr.ingest(rep("h1", 0, 2, rel=("a",))), "the start moved: a re-plan is due"
    (inst,) = tr.alive()
    assert inst.iteration_start == pytest.approx(4.5)
    clock.t = 4.6
    assert not tr.ingest(rep("h3", 0, 1, rel=())), "nothing new: h3 entered, a already alive"
    assert tr.alive()[0].iteration_start == pytest.approx(4.5)


def test_a_release_is_dated_when_the_host_took_its_snapshot(opening: Any) -> None:
    """The iteration's start is the release less ``t_ref``, the release dated by the
    report's ``at`` (the host's clock), not by its arrival; a clock ahead of ours counts
    the arrival, and one far behind at most MAX_REPORT_AGE_S before it."""
    clock = Clock()
    wall = Clock()
    wall.t = 1_000.0
    tr = ProgressTracker(clock, timeout_s=5.0, wall=wall)
    tr.add_job("j", {"a": (frozenset({"h3"}), 0.0), "b": (frozenset({"h4"}), 0.5)})
    tr.add_job("k", {"c": (frozenset({"h4"}), 0.0)})
    body = rep("h1", 0, 1, rel=("a",)).model_copy(update={"at": 1_000.0 - 0.004})
    assert tr.ingest(body)
    starts = {i.group: i.iteration_start for i in tr.alive()}
    assert starts == {"a": pytest.approx(clock.t - 0.004)}
    clock.t += 0.01
    ahead = rep("h2", 0, 1, rel=("b",)).model_copy(update={"at": 1_000.0 + 3.0})
    assert tr.ingest(ahead)
    b = next(i for i in tr.alive() if i.group == "b")
    assert b.released_at == pytest.approx(clock.t), "a clock ahead of ours: the arrival"
    late = rep("h2", 0, 1, rel=("c",), job="k").model_copy(update={"at": 1_000.0 - 60.0})
    assert tr.ingest(late)
    c = next(i for i in tr.alive() if i.group == "c")
    assert c.iteration_start == pytest.approx(clock.t - MAX_REPORT_AGE_S)


def test_an_anticipated_group_finishes_like_a_reported_one(opening: Any) -> None:
    tr, _ = opening
    tr.ingest(rep("h3", 0, 1))
    tr.ingest(rep("h3", 0, 2, fin=("a",)))
    assert alive(tr) == {"a": 0}, "h4 has not received its part"
    assert tr.ingest(rep("h4", 0, 1, fin=("a",)))
    assert alive(tr) == {}


def test_a_socket_never_started_stops_cleanly(tmp_path: Path) -> None:
    """The daemon stops the socket when its API failed to start, before start(): that
    must close and remove it, not raise over the real error."""
    from controlplane.report_socket import ProgressSocket

    sock = ProgressSocket(tmp_path / "p.sock", lambda body: None)
    assert (tmp_path / "p.sock").exists()
    sock.stop()
    assert not (tmp_path / "p.sock").exists()


def sent_rep(host: str, it: int, seq: int, sent: dict[str, list[list[int]]],
             rel: tuple[str, ...] = ()) -> Any:  # fmt: skip
    return parse_report(
        {"job": "j", "host": host, "iteration": it, "session": "s1", "seq": seq,
         "released": list(rel), "sent": sent}
    )  # fmt: skip


def test_bytes_sent_reach_the_instance_without_a_replan(tracker: Any) -> None:
    tr, _ = tracker
    assert tr.ingest(sent_rep("h1", 0, 1, {"a": [[0, 100]]}, rel=("a",)))
    assert tr.alive()[0].sent == {0: 100}
    # a refresh of the bytes changes nothing in flight: no re-plan, but the next sees it
    assert not tr.ingest(sent_rep("h1", 0, 2, {"a": [[0, 700], [1, 50]]}, rel=("a",)))
    (inst,) = tr.alive()
    assert inst.sent == {0: 700, 1: 50}
    # an older snapshot does not take the figures back
    assert not tr.ingest(sent_rep("h1", 0, 1, {"a": [[0, 10]]}, rel=("a",)))
    assert tr.alive()[0].sent == {0: 700, 1: 50}


def test_bytes_of_another_iteration_do_not_count(tracker: Any) -> None:
    tr, _ = tracker
    assert tr.ingest(sent_rep("h1", 0, 1, {"a": [[0, 900]]}, rel=("a",)))
    assert tr.ingest(sent_rep("h1", 1, 2, {}, rel=("a",)))
    (inst,) = tr.alive()
    assert (inst.iteration, inst.sent) == (1, {}), "iteration 1's a has sent nothing yet"


def test_bytes_of_an_unknown_group_are_refused(tracker: Any) -> None:
    tr, _ = tracker
    with pytest.raises(SpecError, match="sent"):
        tr.ingest(sent_rep("h1", 0, 1, {"zz": [[0, 1]]}))
