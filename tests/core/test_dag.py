"""The dag paradigm: SPMD expansion, rank placement, each operation's flows and bytes,
and its field errors."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from echelon.errors import SpecError
from tests.core.helpers import job

H3 = ["h1", "h2", "h3"]
STEPS = [{"compute_s": 0.01}, {"compute_s": 0.02}, {"compute_s": 0.005}]


def _pairs(spec: Any) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for ef in spec.plan().echelons:
        for f in ef.flows:
            out[(f.src, f.dst)] += f.size
    return out


def _one(op: str, size: int = 900, **extra: Any) -> Any:
    comm = {"group": "g", "op": op, "size_bytes": size, "after": [0], "before": [2], **extra}
    return job("dag", H3, steps=STEPS, comms=[comm])


@pytest.mark.parametrize(
    ("op", "extra", "expect"),
    [
        ("all_reduce", {}, {("h1", "h2"): 1200, ("h2", "h3"): 1200, ("h3", "h1"): 1200}),
        ("all_gather", {}, {("h1", "h2"): 600, ("h2", "h3"): 600, ("h3", "h1"): 600}),
        ("reduce_scatter", {}, {("h1", "h2"): 600, ("h2", "h3"): 600, ("h3", "h1"): 600}),
        ("broadcast", {"root": 1}, {("h2", "h3"): 900, ("h3", "h1"): 900}),
        ("reduce", {"root": 1}, {("h3", "h1"): 900, ("h1", "h2"): 900}),
        ("gather", {"root": 0}, {("h2", "h1"): 300, ("h3", "h1"): 300}),
        ("scatter", {"root": 2}, {("h3", "h1"): 300, ("h3", "h2"): 300}),
        ("all_to_all", {}, {(a, b): 300 for a in H3 for b in H3 if a != b}),
    ],
)
def test_each_collective_moves_its_algorithms_bytes(
    op: str, extra: dict[str, Any], expect: dict[Any, int]
) -> None:
    assert _pairs(_one(op, **extra)) == expect


def test_spmd_expansion_runs_the_program_on_every_host() -> None:
    spec = _one("all_reduce")
    plan = spec.plan()
    assert Counter(t.host for t in plan.tasks) == {h: 3 for h in H3}
    (ef,) = plan.echelons
    assert ef.is_coflow and ef.t_ref == pytest.approx(0.03)  # waited for by step 2
    assert spec.ideal_iteration_s == pytest.approx(0.035)


def test_multi_rank_steps_run_on_their_hosts_and_sends_wait_on_the_receiver() -> None:
    steps = [{"rank": 0, "compute_s": 0.01}, {"rank": 1, "compute_s": 0.02},
             {"rank": 2, "compute_s": 0.0}]  # fmt: skip
    comms = [{"group": "p", "op": "send", "size_bytes": 50, "src": 0, "dst": 1,
              "after": [0], "before": [1]}]  # fmt: skip
    spec = job("dag", H3, ranks=3, steps=steps, comms=comms)
    plan = spec.plan()
    assert [(t.host, t.duration) for t in plan.tasks] == [("h1", 0.01), ("h2", 0.02), ("h3", 0.0)]
    assert _pairs(spec) == {("h1", "h2"): 50}
    assert plan.echelons[0].t_ref == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ranks": 2}, "ranks"),
        ({"comms": [{"group": "g", "op": "allreduce", "size_bytes": 1}]}, "comms[0].op"),
        ({"comms": [{"group": "g", "op": "all_reduce", "size_bytes": 1, "after": [7]}]},
         "comms[0].after[0]"),
        ({"comms": [{"group": "g", "op": "send", "size_bytes": 1, "dst": 1}]}, "comms[0].op"),
        ({"comms": [{"group": "g", "op": "broadcast", "size_bytes": 1, "root": 3}]},
         "comms[0].root"),
        ({"comms": [{"group": "g", "op": "all_reduce", "size_bytes": 0}]},
         "comms[0].size_bytes"),
        ({"steps": [{"rank": 1, "compute_s": 1}]}, "steps[0].rank"),
        ({"comms": []}, "comms"),
    ],
)  # fmt: skip
def test_field_errors_name_the_field(change: dict[str, Any], field: str) -> None:
    fields: dict[str, Any] = {"steps": STEPS, "comms": [
        {"group": "g", "op": "all_reduce", "size_bytes": 9}], **change}  # fmt: skip
    with pytest.raises(SpecError) as exc:
        job("dag", H3, **fields)
    assert exc.value.field == field
