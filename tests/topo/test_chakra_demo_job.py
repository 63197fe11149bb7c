"""A Chakra trace's job file in the emulation's job loader: accepted, scaled in bytes and
time together like the demo's jobs, and fitted to the run budget."""

from __future__ import annotations

import pytest

from echelon.errors import SpecError
from echelon.jobs import load_job_file
from echelon.topology import TopologyNetwork, load
from topo import demo
from topo.run import PACKET_BYTES

FILE = "topo/jobs/chakra-ddp.yaml"
TOPO = load("topo/star.yaml")


def test_the_trace_job_loads_and_scales_like_the_demo_jobs() -> None:
    (full,) = demo.load_demo_jobs([FILE], 1.0, set(TOPO.hosts))
    assert full.spec == load_job_file(demo.ROOT / FILE) and full.spec.paradigm == "dag"
    k = 0.01
    (small,) = demo.load_demo_jobs([FILE], k, set(TOPO.hosts))
    assert small.spec.ideal_iteration_s == pytest.approx(k * full.spec.ideal_iteration_s)
    for a, b in zip(small.spec.plan().echelons, full.spec.plan().echelons, strict=True):
        assert a.group == b.group and a.t_ref == pytest.approx(k * b.t_ref)
        # collectives split the scaled size_bytes: equal up to rounding, a byte per flow
        assert abs(a.total_bytes - k * b.total_bytes) <= len(a.flows)


def test_the_budget_scales_the_real_job_down_to_fit() -> None:
    net = TopologyNetwork(TOPO)
    jobs = demo.load_demo_jobs([FILE], demo.DEFAULT_SCALE, set(TOPO.hosts))
    est = demo.estimate([j.spec for j in jobs], net, 3, PACKET_BYTES)
    assert est.link == "down:h4" or "h4" in est.link  # the ring crosses h4's bottleneck
    scale = demo.fit_to_budget(est, demo.DEFAULT_SCALE, demo.DEFAULT_BUDGET_S)
    assert scale < demo.DEFAULT_SCALE
    refit = demo.estimate(
        [j.spec for j in demo.load_demo_jobs([FILE], scale, set(TOPO.hosts))], net, 3, PACKET_BYTES
    )
    assert refit.run_s <= demo.DEFAULT_BUDGET_S * 1.01


@pytest.mark.parametrize("name", ["chakra-astra-ring", "chakra-astra-allreduce"])
def test_the_astra_jobs_load_on_the_eight_host_star(name: str) -> None:
    """The 8-rank ASTRA-sim traces' jobs need one host per rank: topo/star8.yaml."""
    star8 = load("topo/star8.yaml")
    (job,) = demo.load_demo_jobs([f"topo/jobs/{name}.yaml"], 1.0, set(star8.hosts))
    sent: dict[str, int] = {}
    for ef in job.spec.plan().echelons:
        for f in ef.flows:
            sent[f.src] = sent.get(f.src, 0) + f.size
    # a ring all-reduce of 1 MiB on 8 ranks: 2 * 7/8 MiB from every rank to its successor
    assert sent == {f"h{i}": 2 * 7 * (1 << 20) // 8 for i in range(1, 9)}
    with pytest.raises(SpecError, match=r"hosts\[4\]: unknown host 'h5'"):
        demo.load_demo_jobs([f"topo/jobs/{name}.yaml"], 1.0, set(TOPO.hosts))
