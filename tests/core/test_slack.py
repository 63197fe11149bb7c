"""Flow slack from the job's DAG (PlanBuilder's critical-path backward pass)."""

from __future__ import annotations

import pytest

from echelon.jobs import load_job_file
from echelon.model import FlowKey, IterationPlan
from echelon.paradigms.plan import PlanBuilder, _timeline, ideal_timeline
from tests.core.helpers import EXAMPLES


def test_slack_by_hand() -> None:
    """h1: a (1 s) then c (3 s); a releases f to h2, where b (1 s) consumes it.
    Makespan 4 (a, c). b may start as late as 3, f is ideally needed at 1: slack 2.
    g, released by a and consumed by c (same start as its ideal), has none."""
    pb = PlanBuilder("j", 0, 0.0)
    f = pb.flow("f", "h1", "h2", 10, pb.tid("a"))
    g = pb.flow("g", "h1", "h3", 10, pb.tid("a"))
    pb.task("a", "h1", 1.0)
    pb.task("c", "h1", 3.0, after_flows=[g])
    pb.task("b", "h2", 1.0, after_flows=[f])
    plan = pb.build()
    slack = {ef.group: ef.flows[0].slack for ef in plan.echelons}
    assert slack == {"f": pytest.approx(2.0), "g": 0.0}


def makespan(plan: IterationPlan, delay: dict[FlowKey, float]) -> float:
    """Contention-free makespan with some flows arriving ``delay`` after release."""
    ends: dict[str, float] = {}

    def release(key: FlowKey) -> float | None:
        name = plan.producer.get(key)
        base = 0.0 if name is None else ends.get(name)
        return None if base is None else base + delay.get(key, 0.0)

    _timeline(plan.tasks, release, ends)
    return max(ends.values())


@pytest.mark.parametrize("example", ["hybrid.yaml", "gpipe.yaml", "dp_ps.yaml", "fsdp.yaml"])
def test_slack_is_exactly_the_total_float(example: str) -> None:
    """Delaying one flow to its latest finish keeps the iteration's length; a little
    more lengthens it (for flows the iteration waits for)."""
    plan = load_job_file(EXAMPLES / example).plan(0, 0.0)
    base = makespan(plan, {})
    released = release_times(plan)
    for ef in plan.echelons:
        for f in ef.flows[:: max(1, len(ef.flows) // 4)]:
            key = (ef.name, f.index)
            # the flow's ideal finish is its consumer's ideal start; release may be earlier
            to_latest = ef.t_ref + f.offset + f.slack - released[key]
            assert makespan(plan, {key: to_latest}) == pytest.approx(base, abs=1e-6)
            assert makespan(plan, {key: to_latest + 0.01}) > base + 1e-6


def release_times(plan: IterationPlan) -> dict[FlowKey, float]:
    """When each flow is released in the contention-free timeline: its producer's end."""
    ends = {tid: end for tid, (_, end) in ideal_timeline(plan).items()}
    return {
        (ef.name, f.index): ends.get(plan.producer.get((ef.name, f.index), ""), 0.0)
        for ef in plan.echelons
        for f in ef.flows
    }
