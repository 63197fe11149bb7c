"""Paradigm builders against arrangement values computed by hand.

Each docstring gives the hand-derived ideal timeline the expected values come from.
"""

from __future__ import annotations

import pytest

from echelon.paradigms import PARADIGMS, ideal_timeline
from echelon.paradigms.pipeline import task_order
from tests.core.helpers import by_group, example_files, job, offsets


def test_gpipe_arrangement() -> None:
    """s0: F0 0-1 F1 1-2 F2 2-3; s1: F0 1-3 F1 3-5 F2 5-7 B2 7-11 B1 11-15 B0 15-19;
    s0: B2 11-13 B1 15-17 B0 19-21. Activations are consumed at 1, 3, 5 (spaced by
    stage 1's forward time 2), gradients at 11, 15, 19."""
    spec = job(
        "gpipe",
        ["h1", "h2"],
        micro_batches=3,
        stages=[
            {"fwd_s": 1, "bwd_s": 2, "activation_bytes": 100},
            {"fwd_s": 2, "bwd_s": 4},
        ],
    )
    plan = spec.plan()
    g = by_group(list(plan.echelons))
    assert set(g) == {"fwd/s0-s1", "bwd/s1-s0"}
    fwd, bwd = g["fwd/s0-s1"], g["bwd/s1-s0"]
    assert (fwd.t_ref, offsets(fwd)) == (1.0, [0.0, 2.0, 4.0])
    assert (bwd.t_ref, offsets(bwd)) == (11.0, [0.0, 4.0, 8.0])
    assert all((f.src, f.dst, f.size) == ("h1", "h2", 100) for f in fwd.flows)
    assert all((f.src, f.dst) == ("h2", "h1") for f in bwd.flows)
    # gradient flow 0 is micro-batch 2's (backward runs newest first)
    assert plan.producer[(bwd.name, 0)] == "j/0/B2/s1"
    assert spec.ideal_iteration_s == 21.0
    times = ideal_timeline(plan)
    assert times["j/0/B0/s0"] == (19.0, 21.0)


def test_iterations_keep_offsets_and_move_t_ref() -> None:
    spec = job(
        "gpipe",
        ["h1", "h2"],
        micro_batches=2,
        stages=[{"fwd_s": 1, "bwd_s": 2, "activation_bytes": 7}, {"fwd_s": 3, "bwd_s": 1}],
    )
    a, b = spec.plan(0, 0.0).echelons, spec.plan(5, 100.0).echelons
    assert [e.name for e in b] == [f"j/5/{e.group}" for e in a]
    for ea, eb in zip(a, b, strict=True):
        assert offsets(ea) == offsets(eb)
        assert eb.t_ref == pytest.approx(ea.t_ref + 100.0)
    plan = spec.plan(5, 100.0)
    assert all(t.id.startswith("j/5/") for t in plan.tasks)


def test_1f1b_arrangement() -> None:
    """Stage 0 (warm-up 1): F0 F1 B0 F2 B1 B2; stage 1: F0 B0 F1 B1 F2 B2.
    s0 F0 0-1 F1 1-2; s1 F0 1-2 B0 2-4 F1 4-5 B1 5-7 F2 7-8 B2 8-10;
    s0 B0 4-6 F2 6-7 B1 7-9 B2 10-12."""
    assert task_order("1f1b", 0, 2, 3) == [
        ("F", 0),
        ("F", 1),
        ("B", 0),
        ("F", 2),
        ("B", 1),
        ("B", 2),
    ]
    spec = job(
        "pipedream_1f1b",
        ["h1", "h2"],
        micro_batches=3,
        stages=[{"fwd_s": 1, "bwd_s": 2, "activation_bytes": 10}, {"fwd_s": 1, "bwd_s": 2}],
    )
    g = by_group(list(spec.plan().echelons))
    assert (g["fwd/s0-s1"].t_ref, offsets(g["fwd/s0-s1"])) == (1.0, [0.0, 3.0, 6.0])
    assert (g["bwd/s1-s0"].t_ref, offsets(g["bwd/s1-s0"])) == (4.0, [0.0, 3.0, 6.0])
    assert spec.ideal_iteration_s == 12.0


def test_dp_ps_pull_is_echelon_push_is_coflow() -> None:
    """Forward 0-1, 1-3, 3-6; backward 6-12; update 12-13. Layer l's parameters
    are needed at 0, 1, 3; all gradients at 12."""
    spec = job(
        "dp_ps",
        ["h1", "h2", "h3"],
        ps="h3",
        update_s=1,
        layers=[
            {"fwd_s": 1, "bwd_s": 2, "param_bytes": 10},
            {"fwd_s": 2, "bwd_s": 2, "param_bytes": 20},
            {"fwd_s": 3, "bwd_s": 2, "param_bytes": 30},
        ],
    )
    g = by_group(list(spec.plan().echelons))
    pull, push = g["pull"], g["push"]
    assert pull.t_ref == 0.0 and offsets(pull) == [0.0, 0.0, 1.0, 1.0, 3.0, 3.0]
    assert [f.size for f in pull.flows] == [10, 10, 20, 20, 30, 30]
    assert {f.src for f in pull.flows} == {"h3"} and {f.dst for f in pull.flows} == {"h1", "h2"}
    assert push.is_coflow and push.t_ref == 12.0 and len(push.flows) == 6
    assert {f.dst for f in push.flows} == {"h3"}
    assert spec.ideal_iteration_s == 13.0


def test_dp_allreduce_ring_buckets() -> None:
    """One bucket per layer (bucket_bytes 0), 3 hosts: 2(N-1)=4 ring steps of size/3
    per host -> 12 flows per bucket; the optimizer needs both at F+B = 2+5 = 7."""
    spec = job(
        "dp_allreduce",
        ["h1", "h2", "h3"],
        layers=[
            {"fwd_s": 1, "bwd_s": 2, "grad_bytes": 300},
            {"fwd_s": 1, "bwd_s": 3, "grad_bytes": 600},
        ],
    )
    plan = spec.plan()
    g = by_group(list(plan.echelons))
    assert set(g) == {"allreduce/b0", "allreduce/b1"}
    b0, b1 = g["allreduce/b0"], g["allreduce/b1"]
    assert len(b0.flows) == len(b1.flows) == 12
    assert {f.size for f in b0.flows} == {200} and {f.size for f in b1.flows} == {100}
    assert b0.is_coflow and b1.is_coflow and b0.t_ref == b1.t_ref == 7.0
    ring = {(f.src, f.dst) for f in b0.flows}
    assert ring == {("h1", "h2"), ("h2", "h3"), ("h3", "h1")}
    # bucket 0 holds the last layer, released when its backward ends
    assert plan.producer[(b0.name, 0)].startswith("j/0/bwd/l1@")


def test_dp_allreduce_bucket_fill() -> None:
    spec = job(
        "dp_allreduce",
        ["h1", "h2"],
        bucket_bytes=250,
        layers=[{"fwd_s": 1, "bwd_s": 1, "grad_bytes": b} for b in (100, 100, 100, 100)],
    )
    from echelon.paradigms.dp_allreduce import buckets

    assert buckets(spec.params) == [[3, 2, 1], [0]]


def test_tensor_per_layer_allreduce() -> None:
    """fwd0 0-1, fwd1 1-3, bwd1 3-7, bwd0 7-9. Forward all-reduces needed at 1
    (fwd1) and 3 (bwd1); backward ones at 7 (bwd0) and 9 (end)."""
    spec = job(
        "tensor",
        ["h1", "h2"],
        layers=[
            {"fwd_s": 1, "bwd_s": 2, "allreduce_bytes": 10},
            {"fwd_s": 2, "bwd_s": 4, "allreduce_bytes": 10},
        ],
    )
    g = by_group(list(spec.plan().echelons))
    assert (g["allreduce/fwd"].t_ref, offsets(g["allreduce/fwd"])) == (1.0, [0.0] * 4 + [2.0] * 4)
    assert (g["allreduce/bwd"].t_ref, offsets(g["allreduce/bwd"])) == (7.0, [0.0] * 4 + [2.0] * 4)
    assert {f.size for f in g["allreduce/fwd"].flows} == {5}


def test_fsdp_gathers_and_reduce_scatter() -> None:
    """fwd0 0-1 fwd1 1-3 bwd1 3-7 bwd0 7-11. Forward gathers needed at 0 and 1;
    backward re-gathers (released at 3) at 3 and 7; gradients at 11."""
    spec = job(
        "fsdp",
        ["h1", "h2"],
        layers=[
            {"fwd_s": 1, "bwd_s": 4, "param_bytes": 8},
            {"fwd_s": 2, "bwd_s": 4, "param_bytes": 8},
        ],
    )
    g = by_group(list(spec.plan().echelons))
    assert (g["allgather/fwd"].t_ref, offsets(g["allgather/fwd"])) == (0.0, [0.0, 0.0, 1.0, 1.0])
    assert (g["allgather/bwd"].t_ref, offsets(g["allgather/bwd"])) == (3.0, [0.0, 0.0, 4.0, 4.0])
    assert g["reducescatter"].is_coflow and g["reducescatter"].t_ref == 11.0


def test_moe_all_to_all() -> None:
    """gate 0-1, dispatch needed at 1; expert 1-3, combine needed by loss at 3;
    loss 3-3.5, combine-grad needed at 3.5; expert_bwd 3.5-7.5, dispatch-grad at 7.5."""
    spec = job(
        "moe",
        ["h1", "h2"],
        loss_s=0.5,
        layers=[{"fwd_s": 1, "bwd_s": 2, "expert_fwd_s": 2, "expert_bwd_s": 4, "a2a_bytes": 9}],
    )
    g = by_group(list(spec.plan().echelons))
    assert (g["alltoall/fwd"].t_ref, offsets(g["alltoall/fwd"])) == (1.0, [0.0, 0.0, 2.0, 2.0])
    assert (g["alltoall/bwd"].t_ref, offsets(g["alltoall/bwd"])) == (3.5, [0.0, 0.0, 4.0, 4.0])
    assert {(f.src, f.dst) for f in g["alltoall/fwd"].flows} == {("h1", "h2"), ("h2", "h1")}


def test_hybrid_tensor_split_pipeline() -> None:
    """tp=2, two stages, one micro-batch (F/B split in halves around the tp all-reduce):
    s0 F0a 0-1 | F0b 1-2; s1 F0a 2-4 | F0b 4-6, B0a 6-10 | B0b 10-14; s0 B0a 14-16 | B0b 16-18."""
    spec = job(
        "hybrid",
        ["h1", "h2", "h3", "h4"],
        tp=2,
        micro_batches=1,
        stages=[
            {"fwd_s": 2, "bwd_s": 4, "activation_bytes": 100, "tp_allreduce_bytes": 10},
            {"fwd_s": 4, "bwd_s": 8, "tp_allreduce_bytes": 10},
        ],
    )
    g = by_group(list(spec.plan().echelons))
    assert (g["allreduce/tp/s0"].t_ref, offsets(g["allreduce/tp/s0"])) == (
        1.0,
        [0.0] * 4 + [15.0] * 4,
    )
    assert (g["allreduce/tp/s1"].t_ref, offsets(g["allreduce/tp/s1"])) == (
        4.0,
        [0.0] * 4 + [6.0] * 4,
    )
    assert g["fwd/s0-s1"].t_ref == 2.0 and {f.size for f in g["fwd/s0-s1"].flows} == {50}
    assert {(f.src, f.dst) for f in g["fwd/s0-s1"].flows} == {("h1", "h3"), ("h2", "h4")}
    assert g["bwd/s1-s0"].t_ref == 14.0
    assert spec.ideal_iteration_s == 18.0


def test_hybrid_3d_data_parallel_sync() -> None:
    hosts = [f"h{i}" for i in range(1, 9)]
    spec = job(
        "hybrid",
        hosts,
        dp=2,
        tp=2,
        schedule="1f1b",
        micro_batches=2,
        stages=[
            {
                "fwd_s": 1,
                "bwd_s": 2,
                "activation_bytes": 8,
                "param_bytes": 40,
                "tp_allreduce_bytes": 4,
            },
            {"fwd_s": 1, "bwd_s": 2, "param_bytes": 40, "tp_allreduce_bytes": 4},
        ],
    )
    g = by_group(list(spec.plan().echelons))
    assert {"allreduce/dp/s0", "allreduce/dp/s1", "fwd/s0-s1", "bwd/s1-s0"} <= set(g)
    # 2 replicas x 2 tensor ranks x 2 micro-batches, all in one group
    assert len(g["fwd/s0-s1"].flows) == 8
    dp0 = g["allreduce/dp/s0"]
    assert dp0.is_coflow and {f.size for f in dp0.flows} == {10}  # 40/tp, halved by the ring
    # replicas of stage 0, tensor rank 0 are hosts[0] and hosts[4]
    assert ("h1", "h5") in {(f.src, f.dst) for f in dp0.flows}


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_examples_build_monotone_plans(path: object) -> None:
    from echelon.jobs import load_job_file

    spec = load_job_file(str(path), known_hosts={"h1", "h2", "h3", "h4"})
    plan = spec.plan(2, 10.0)
    assert plan.echelons, "every example has communication"
    for ef in plan.echelons:
        assert ef.name == f"{spec.job_id}/2/{ef.group}"
        assert ef.t_ref >= 10.0
        assert offsets(ef) == sorted(offsets(ef))
    # every flow is waited for by some task, and no consumer starts before the
    # flow's ideal finish (which is the earliest consumer's start)
    times = ideal_timeline(plan)
    by_name = {e.name: e for e in plan.echelons}
    consumed = set()
    for t in plan.tasks:
        for name, j in t.after_flows:
            consumed.add((name, j))
            assert by_name[name].ideal_finish(j) - 10.0 <= times[t.id][0] + 1e-9
    assert consumed == {ef.key(f) for ef in plan.echelons for f in ef.flows}


def test_every_paradigm_has_an_example() -> None:
    assert {p.stem for p in example_files()} == set(PARADIGMS)
