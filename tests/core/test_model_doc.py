"""docs/model.md's numbers and docs/paradigms.md's timelines, recomputed from the code and the
definitions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from echelon.jobs import load_job
from echelon.model import (
    EchelonFlow,
    Flow,
    completion_time,
    lateness,
    max_tardiness,
    total_tardiness,
)
from echelon.network import BigSwitch
from echelon.policies import get_policy
from echelon.policies.table import bottlenecks, build_table
from echelon.timeline import render

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = (DOCS / "model.md").read_text()
PARADIGMS = (DOCS / "paradigms.md").read_text()
TIMELINE = re.compile(
    r"```yaml\n(?P<job>.*?)```\n\n<!-- timeline scale=(?P<scale>[0-9.]+) -->\n"
    r"```text\n(?P<text>.*?)\n```",
    re.S,
)


def block(tag: str) -> Any:
    match = re.search(rf"```yaml {tag}\n(.*?)```", DOC, re.S)
    assert match, f"docs/model.md has no {tag} block"
    return yaml.safe_load(match.group(1))


def sequential(sizes: list[int], order: list[int], cap: float) -> dict[int, float]:
    clock, out = 0.0, {}
    for j in order:
        clock += sizes[j] / cap
        out[j] = clock
    return out


def processor_sharing(sizes: list[int], cap: float) -> dict[int, float]:
    """All flows start at 0 and share the link equally (max-min fair on one link)."""
    left = dict(enumerate(float(s) for s in sizes))
    clock, out = 0.0, {}
    while left:
        rate = cap / len(left)
        step = min(left.values()) / rate
        clock += step
        for j in list(left):
            left[j] -= rate * step
            if left[j] <= 1e-9 * sizes[j]:
                out[j] = clock
                del left[j]
    return out


def test_worked_example_metrics() -> None:
    ex = block("worked-example")
    cap = float(ex["link_bytes_per_s"])
    sizes = [f["size"] for f in ex["flows"]]
    flows = tuple(
        Flow(j, "h1", "h2", f["size"], float(f["offset"])) for j, f in enumerate(ex["flows"])
    )
    ef = EchelonFlow("ex", "ex", "g", flows, float(ex["t_ref"]))
    coflow = EchelonFlow(
        "co", "co", "g", tuple(Flow(f.index, f.src, f.dst, f.size, 0.0) for f in flows), ef.t_ref
    )
    assert len(ex["schedules"]) == 3
    for name, want in ex["schedules"].items():
        if "order" in want:
            finish = sequential(sizes, want["order"], cap)
        else:
            finish = processor_sharing(sizes, cap)
        assert [finish[j] for j in range(len(sizes))] == pytest.approx(want["finish"]), name
        late = lateness(ef, finish)
        assert [late[j] for j in range(len(sizes))] == pytest.approx(want["lateness"]), name
        assert completion_time(ef, finish) == pytest.approx(want["completion_time"]), name
        assert total_tardiness(ef, finish) == pytest.approx(want["total_tardiness"]), name
        assert max_tardiness(ef, finish) == pytest.approx(want["max_tardiness"]), name
        assert max_tardiness(ef, finish) == pytest.approx(max(0.0, completion_time(ef, finish)))
        assert completion_time(coflow, finish) == pytest.approx(want["coflow_completion_time"])
    net = BigSwitch.uniform(["h1", "h2"], cap)
    rank = get_policy("echelon").schedule([ef], net).flow_rank
    assert sorted(range(len(flows)), key=lambda j: rank[("ex", j)]) == ex["policy_order"]


def test_inter_group_example() -> None:
    ex = block("inter-group-example")
    cap = float(ex["link_bytes_per_s"])
    groups = []
    for name, g in ex["groups"].items():
        flows = tuple(
            Flow(j, "h1", "h2", s, float(o))
            for j, (s, o) in enumerate(zip(g["sizes"], g["offsets"], strict=True))
        )
        groups.append(EchelonFlow(name, name, "g", flows, float(g["t_ref"])))
    net = BigSwitch.uniform(["h1", "h2"], cap)
    table = build_table(groups, net)
    coflow, effective = bottlenecks(table)
    gamma = dict(zip(table.names, effective.tolist(), strict=True))
    p = dict(zip(table.names, coflow.tolist(), strict=True))
    assert gamma == pytest.approx(ex["effective_bottleneck"])
    assert p == pytest.approx(ex["coflow_bottleneck"])
    by_name = {g.name: g for g in groups}
    for policy, want in ex["orders"].items():
        order = get_policy(policy).schedule(groups, net, now=float(ex["now"])).echelon_order
        assert list(order) == want["order"], policy
        clock, total = 0.0, 0.0
        for name in order:
            g = by_name[name]
            finish = {}
            for f in sorted(g.flows, key=lambda f: f.offset):
                clock += f.size / cap
                finish[f.index] = clock
            assert completion_time(g, finish) == pytest.approx(want["completion_time"][name])
            total += max_tardiness(g, finish)
        assert total == pytest.approx(want["total_tardiness"]), policy
    for policy, want in ex["flow_orders"].items():
        rank = get_policy(policy).schedule(groups, net, now=float(ex["now"])).flow_rank
        keys = sorted(rank, key=rank.__getitem__)
        assert len(set(rank.values())) == len(keys), policy  # a strict order, no sharing
        assert [list(k) for k in keys] == want["order"], policy
        clock, finish = 0.0, {}
        for name, j in keys:
            clock += by_name[name].flows[j].size / cap
            finish[(name, j)] = clock
        total = 0.0
        for name, g in by_name.items():
            mine = {j: c for (n, j), c in finish.items() if n == name}
            assert completion_time(g, mine) == pytest.approx(want["completion_time"][name])
            total += max_tardiness(g, mine)
        assert total == pytest.approx(want["total_tardiness"]), policy


def test_doc_timelines_match_the_builders() -> None:
    found = list(TIMELINE.finditer(PARADIGMS))
    assert len(found) == 8, "one timeline per paradigm"
    seen = set()
    for m in found:
        spec = load_job(yaml.safe_load(m.group("job")))
        seen.add(spec.paradigm)
        assert render(spec.plan(), float(m.group("scale"))) == m.group("text"), spec.paradigm
    assert len(seen) == 8


def test_usage_snippet_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    snippet = re.findall(r"```python\n(.*?)```", DOC, re.S)
    assert snippet, "docs/model.md shows how to use the API"
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    scope: dict[str, Any] = {}
    exec(snippet[-1], scope)
    assert set(scope["levels"].values()) <= set(range(1, 8))
    assert set(scope["entries"]) == {ef.name for ef in scope["plan"].echelons}
