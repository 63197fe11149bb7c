"""Hand-known instances of the fluid model: each answer is computed in the test."""

from __future__ import annotations

import pytest

from echelon.model import ComputeTask, EchelonFlow, Flow, IterationPlan
from sim.core.engine import JobRun, SimConfig, SimError
from tests.sim.conftest import FAIR, Links, PlanJob, RankPolicy, simulate

CAP = 1000.0  # bytes/s


def one_link() -> Links:
    return Links({"l": CAP}, {("a", "b"): ["l"], ("c", "b"): ["l"]})


def flows_job(name: str, sizes: list[int], srcs: list[str] | None = None) -> PlanJob:
    """One iteration: one EchelonFlow per size, all released at t0, no compute."""

    def make(it: int, t0: float) -> IterationPlan:
        efs = tuple(
            EchelonFlow(
                f"{name}/{it}/g{i}",
                name,
                f"g{i}",
                (Flow(0, (srcs or ["a"] * len(sizes))[i], "b", s, 0.0),),
                t_ref=t0,
            )
            for i, s in enumerate(sizes)
        )
        return IterationPlan(name, it, efs, (), {})

    return PlanJob(name, make)


def finish_times(res) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {f.echelon.split("/")[-1]: f.finish for f in res.flows}


def test_one_flow_one_link() -> None:
    size = 12_345
    res = simulate(one_link(), [JobRun(flows_job("j", [size]))], SimConfig(policy=FAIR))
    assert finish_times(res)["g0"] == pytest.approx(size / CAP)


def test_two_flows_share_then_survivor_speeds_up() -> None:
    small, big = 1000, 3000
    res = simulate(one_link(), [JobRun(flows_job("j", [small, big]))], SimConfig(policy=FAIR))
    ft = finish_times(res)
    t1 = small / (CAP / 2)  # equal split until the small one is done
    assert ft["g0"] == pytest.approx(t1)
    assert ft["g1"] == pytest.approx(t1 + (big - small) / CAP)


def test_strict_priority_preempts() -> None:
    """A low-priority flow runs alone, is preempted by a high-priority one, resumes."""
    a_size, b_size, delay = 2000, 1000, 0.5

    def make(it: int, t0: float) -> IterationPlan:
        lo = EchelonFlow("j/0/lo", "j", "lo", (Flow(0, "a", "b", a_size, 0.0),), t_ref=t0)
        hi = EchelonFlow("j/0/hi", "j", "hi", (Flow(0, "c", "b", b_size, 0.0),), t_ref=t0)
        task = ComputeTask("t", "c", delay)
        return IterationPlan("j", it, (lo, hi), (task,), {("j/0/hi", 0): "t"})

    prio = RankPolicy("prio", lambda ef, j: 0 if ef.group == "hi" else 1)
    res = simulate(one_link(), [JobRun(PlanJob("j", make))], SimConfig(policy=prio))
    ft = finish_times(res)
    hi_done = delay + b_size / CAP
    assert ft["hi"] == pytest.approx(hi_done)
    sent_before = delay * CAP
    assert ft["lo"] == pytest.approx(hi_done + (a_size - sent_before) / CAP)


def pipeline_job(micro: int, c0: float, c1: float, size: int) -> PlanJob:
    """Two stages on hosts a and b; micro-batch m's activation flows a->b."""

    def make(it: int, t0: float) -> IterationPlan:
        name = f"p/{it}/fwd"
        flows = tuple(Flow(m, "a", "b", size, m * c1) for m in range(micro))
        ef = EchelonFlow(name, "p", "fwd", flows, t_ref=t0 + c0 + size / CAP)
        tasks = [ComputeTask(f"a{m}", "a", c0) for m in range(micro)]
        tasks += [ComputeTask(f"b{m}", "b", c1, after_flows=((name, m),)) for m in range(micro)]
        producer = {(name, m): f"a{m}" for m in range(micro)}
        return IterationPlan("p", it, (ef,), tuple(tasks), producer)

    return PlanJob("p", make)


@pytest.mark.parametrize("micro", [1, 4])
def test_two_stage_pipeline_iteration_time(micro: int) -> None:
    c0, c1, size = 1.0, 2.0, 500
    job = pipeline_job(micro, c0, c1, size)
    res = simulate(
        Links({"l": CAP}, {("a", "b"): ["l"]}),
        [JobRun(job, arrival=3.0, iterations=2)],
        SimConfig(policy=FAIR, record_tasks=True),
    )
    # c1 >= c0 and each transfer (0.5 s) is shorter than c0: stage b is the bottleneck
    # once the first activation has arrived.
    expected = c0 + size / CAP + micro * c1
    assert [r.duration for r in res.iterations] == pytest.approx([expected, expected])
    assert res.jobs[0].jct == pytest.approx(2 * expected)
    assert res.iterations[1].start == pytest.approx(3.0 + expected)
    b_tasks = [t for t in res.tasks if t.host == "b" and t.iteration == 0]
    assert all(t.end - t.start == pytest.approx(c1) for t in b_tasks)


def test_real_paradigm_job_through_the_engine() -> None:
    """A core GPipe job: iteration time equals the core's contention-free timeline when
    the network is fast, and grows when it is slow."""
    from echelon.jobs import load_job
    from echelon.network import BigSwitch

    desc = {
        "job": "g",
        "paradigm": "gpipe",
        "hosts": ["h0", "h1", "h2"],
        "micro_batches": 3,
        "stages": [{"fwd_s": 0.1, "bwd_s": 0.2, "activation_bytes": 1000}] * 2
        + [{"fwd_s": 0.1, "bwd_s": 0.2}],
    }
    spec = load_job(desc)
    fast = simulate(BigSwitch.uniform(spec.hosts, 1e12), [JobRun(spec, iterations=2)], SimConfig())
    assert [r.duration for r in fast.iterations] == pytest.approx(
        [spec.ideal_iteration_s] * 2, rel=1e-6
    )
    slow = simulate(BigSwitch.uniform(spec.hosts, 1e4), [JobRun(spec)], SimConfig())
    assert slow.iterations[0].duration > spec.ideal_iteration_s + 0.1  # 0.1 s per 1000 B hop


def test_dependency_cycle_is_reported() -> None:
    from sim.core.engine import SimError

    def make(it: int, t0: float) -> IterationPlan:
        tasks = (
            ComputeTask("a", "x", 1.0, after_tasks=("b",)),
            ComputeTask("b", "y", 1.0, after_tasks=("a",)),
        )
        ef = EchelonFlow("j/0/g", "j", "g", (Flow(0, "a", "b", 10, 0.0),), t_ref=t0)
        return IterationPlan("j", it, (ef,), tasks, {})

    with pytest.raises(SimError, match="never finished"):
        simulate(one_link(), [JobRun(PlanJob("j", make))], SimConfig(policy=FAIR))


def test_bad_plans_are_spec_errors() -> None:
    from echelon.errors import SpecError

    def make(it: int, t0: float) -> IterationPlan:
        ef = EchelonFlow("j/0/g", "j", "g", (Flow(0, "a", "b", 10, 0.0),), t_ref=t0)
        task = ComputeTask("t", "x", 1.0, after_flows=(("j/0/other", 0),))
        return IterationPlan("j", it, (ef,), (task,), {})

    with pytest.raises(SpecError, match="unknown flow"):
        simulate(one_link(), [JobRun(PlanJob("j", make))], SimConfig(policy=FAIR))
    job = flows_job("same", [10])
    with pytest.raises(SpecError):
        simulate(one_link(), [JobRun(job), JobRun(job)], SimConfig(policy=FAIR))


def test_packet_overhead_counts_on_the_wire() -> None:
    size = 10_000
    cfg = SimConfig(policy=FAIR, header_bytes=50, payload_bytes=1000)
    res = simulate(one_link(), [JobRun(flows_job("j", [size]))], cfg)
    assert finish_times(res)["g0"] == pytest.approx((size + 10 * 50) / CAP)


def test_flow_rerank_mode_calls_the_policy_more_often() -> None:
    """Three flows of one group released at different times: group mode asks the policy
    once per group event, flow mode at every release/finish as well."""
    calls: list[float] = []

    def fn(ef: EchelonFlow, j: int) -> int:
        return j

    class Counting(RankPolicy):
        def schedule(self, echelons, network, remaining=None, now=0.0):  # type: ignore[no-untyped-def]
            calls.append(now)
            return super().schedule(echelons, network, remaining, now)

    def make(it: int, t0: float) -> IterationPlan:
        flows = tuple(Flow(i, "a", "b", 1000, float(i)) for i in range(3))
        ef = EchelonFlow("j/0/g", "j", "g", flows, t_ref=t0)
        tasks = tuple(ComputeTask(f"t{i}", "a", 0.3) for i in range(3))
        return IterationPlan("j", it, (ef,), tasks, {("j/0/g", i): f"t{i}" for i in range(3)})

    counts = {}
    for mode in ("group", "flow"):
        calls.clear()
        res = simulate(
            one_link(), [JobRun(PlanJob("j", make))], SimConfig(Counting("c", fn), rerank=mode)
        )
        counts[mode] = (len(calls), res.n_reranks)
    assert counts["group"][0] == counts["group"][1] == 1  # the group's first release only
    assert counts["flow"][0] > counts["group"][0]


@pytest.mark.parametrize("sizes", ["remaining", "registered"])
def test_policy_sizes_say_what_the_policy_is_told(sizes: str) -> None:
    """``remaining``: bytes still to send (finished flows 0); ``registered``: nothing, so
    the policy counts every flow whole -- the online controller's knowledge."""
    told: list[dict[tuple[str, int], int] | None] = []

    class Recording(RankPolicy):
        def schedule(self, echelons, network, remaining=None, now=0.0):  # type: ignore[no-untyped-def]
            told.append(None if remaining is None else dict(remaining))
            return super().schedule(echelons, network, remaining, now)

    # g0 (1000 B) at t=0; g1 released at t=0.5 by a task: a second re-plan mid-transfer
    def make(it: int, t0: float) -> IterationPlan:
        g0 = EchelonFlow("j/0/g0", "j", "g0", (Flow(0, "a", "b", 1000, 0.0),), t_ref=t0)
        g1 = EchelonFlow("j/0/g1", "j", "g1", (Flow(0, "c", "b", 1000, 0.0),), t_ref=t0)
        return IterationPlan("j", it, (g0, g1), (ComputeTask("t", "c", 0.5),), {("j/0/g1", 0): "t"})

    cfg = SimConfig(Recording("r", lambda ef, j: 0), policy_sizes=sizes)  # type: ignore[arg-type]
    simulate(one_link(), [JobRun(PlanJob("j", make))], cfg)
    assert len(told) >= 2
    if sizes == "registered":
        assert all(t is None for t in told)
    else:
        mid = told[1]
        assert mid is not None and mid[("j/0/g0", 0)] == pytest.approx(500, abs=1)
        assert mid[("j/0/g1", 0)] == 1000


def test_keep_levels_and_replan_delay_model_the_online_controller() -> None:
    """Two 1000 B flows on one link, both released at t=0. The policy ranks g0 first.
    Without a delay the re-plan at t=0 ranks them: g0 ends at 1 s, g1 at 2 s. With a
    0.5 s reaction and ``keep_levels`` from an initial plan that put g1 on top, g1 has
    the link alone until the re-plan, then g0 takes it: g0 ends at 1.5 s, g1 at 2 s;
    without ``keep_levels`` both wait on the lowest level and share it until then."""
    policy = RankPolicy("r", lambda ef, j: 0 if ef.group == "g0" else 1)
    job = flows_job("j", [1000, 1000], ["a", "c"])
    base = SimConfig(policy, levels=8)
    now = finish_times(simulate(one_link(), [JobRun(job)], base))
    assert now["g0"] == pytest.approx(1.0) and now["g1"] == pytest.approx(2.0)
    initial = {("j", "g0", 0): 1, ("j", "g1", 0): 7}
    cfg = SimConfig(policy, levels=8, replan_delay=0.5, keep_levels=True, initial_levels=initial)
    kept = finish_times(simulate(one_link(), [JobRun(job)], cfg))
    assert kept["g0"] == pytest.approx(1.5) and kept["g1"] == pytest.approx(2.0)
    fair = SimConfig(policy, levels=8, replan_delay=0.5)
    shared = finish_times(simulate(one_link(), [JobRun(job)], fair))
    assert shared["g0"] == pytest.approx(1.25) and shared["g1"] == pytest.approx(2.0)


def test_keep_levels_needs_switch_levels() -> None:
    with pytest.raises(SimError, match="keep_levels"):
        simulate(one_link(), [JobRun(flows_job("j", [1000]))], SimConfig(FAIR, keep_levels=True))
