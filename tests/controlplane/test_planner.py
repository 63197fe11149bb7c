"""Incremental planning equals a full re-plan.

For random sequences of registrations and removals (random explicit specs and the
paradigm examples), after every step :class:`controlplane.planning.Planner`'s
plans equal ``plan_groups`` over the same jobs in the same order, its flow table
equals ``build_table``'s array for array, and the changes it reported are
exactly the plans that differ from the step before.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from controlplane.entries import GroupPlan
from controlplane.planning import POLICIES, Planner
from controlplane.registry import GroupIds
from echelon.errors import SpecError
from echelon.jobs import Description, load_description
from echelon.policies.table import build_table
from echelon.topology import Topology, TopologyNetwork, load
from tests.controlplane.helpers import ROOT, write_topo
from tests.controlplane.oracle import plan_groups

EXAMPLES = sorted((ROOT / "echelon" / "examples").glob("*.yaml"))
HOSTS = ("h1", "h2", "h3", "h4", "h5")


def random_spec(rng: random.Random, name: str) -> dict[str, Any]:
    groups = []
    for g in range(rng.randint(1, 3)):
        flows: list[dict[str, Any]] = []
        n = rng.randint(1, 5)
        # few distinct offsets, non-decreasing from 0: shared offsets and rank ties happen
        offsets = [
            0.0,
            *sorted(rng.choice([0.0, 0.001, 0.002, rng.uniform(0, 0.05)]) for _ in range(n - 1)),
        ]
        for k in range(n):
            src, dst = rng.sample(HOSTS, 2)
            flows.append(
                {
                    "src": src,
                    "dst": dst,
                    "size": rng.choice([1000, 10000, 100000, rng.randint(1, 10**6)]),
                    "offset": offsets[k],
                }
            )
        groups.append(
            {
                "group": f"g{g}",
                "weight": rng.choice([1.0, 1.0, 2.0]),
                "t_ref": rng.choice([0.0, 0.0, rng.uniform(0, 0.01)]),
                "flows": flows,
            }
        )
    return {"job": name, "echelonflows": groups}


def example_job(rng: random.Random, name: str, topo: Topology) -> Description:
    desc = yaml.safe_load(rng.choice(EXAMPLES).read_text())
    desc["job"] = name
    return load_description(desc, topo.hosts)


def by_key(plans: list[GroupPlan]) -> dict[tuple[str, str], GroupPlan]:
    return {(p.job, p.group): p for p in plans}


@pytest.mark.parametrize(
    ("policy", "seed"),
    [(p, s) for p in ("echelon", "coflow", "fifo") for s in range(3)]
    + [(p, 0) for p in POLICIES if p not in ("echelon", "coflow", "fifo")],
)
def test_incremental_equals_full_replan(tmp_path: Path, policy: str, seed: int) -> None:
    topo = load(write_topo(tmp_path / "t.yaml", ["127.0.0.1:1", "127.0.0.1:2"]))
    net = TopologyNetwork(topo)
    rng = random.Random(seed)
    planner = Planner(policy, net)
    jobs: list[tuple[Description, tuple[GroupIds, ...]]] = []
    next_id = 1
    changes_seen = 0
    for step in range(60):
        before = by_key(planner.plans())
        if jobs and rng.random() < 0.35:
            victim = rng.randrange(len(jobs))
            changes = planner.remove(jobs[victim][0].job_id)
            del jobs[victim]
        else:
            name = f"j{step}"
            parsed = (
                example_job(rng, name, topo)
                if rng.random() < 0.3
                else load_description(random_spec(rng, name), topo.hosts)
            )
            ids = []
            for g in parsed.groups:
                ids.append(GroupIds(g, next_id, next_id % 1024))
                next_id += 1
            changes = planner.add(parsed, ids)
            jobs.append((parsed, tuple(ids)))
        full = plan_groups(policy, jobs, net)
        assert planner.plans() == full, f"step {step}"
        after = by_key(full)
        diff = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert {c.key for c in changes} == diff, f"step {step}"
        for c in changes:
            assert c.old == before.get(c.key) and c.new == after.get(c.key)
        changes_seen += len(changes)
        efs = [ef for job, _ in jobs for ef in job.echelons]
        if efs:
            want, got = build_table(efs, net), planner.table()
            for name in ("keys", "names"):
                assert getattr(got, name) == getattr(want, name), name
            for name in (
                "weight",
                "t_ref",
                "name_rank",
                "ech",
                "index",
                "offset",
                "slack",
                "remaining",
                "inc_flow",
                "inc_link",
                "cap",
            ):
                assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert changes_seen > 60  # registrations alone report at least their own groups
    restarted = Planner(policy, net)  # a restart adds the registry's jobs at once
    restarted.add_many(jobs)
    assert restarted.plans() == planner.plans()


def test_policy_switch_snapshot_and_refusals(tmp_path: Path) -> None:
    topo = load(write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"]))
    net = TopologyNetwork(topo)
    rng = random.Random(7)
    planner = Planner("echelon", net)
    jobs = []
    for k in range(20):
        parsed = load_description(random_spec(rng, f"j{k}"), topo.hosts)
        ids = tuple(GroupIds(g, 10 * k + i + 1, 10 * k + i) for i, g in enumerate(parsed.groups))
        planner.add(parsed, ids)
        jobs.append((parsed, ids))
    token = planner.snapshot()
    kept = planner.plans()
    extra = load_description(random_spec(rng, "extra"), topo.hosts)
    planner.add(extra, [GroupIds(g, 900 + i, 900 + i) for i, g in enumerate(extra.groups)])
    assert planner.plans() != kept
    planner.restore(token)
    assert planner.plans() == kept
    changes = planner.set_policy("coflow")
    assert planner.plans() == plan_groups("coflow", jobs, net)
    assert {c.key for c in changes} == {
        k for k, p in by_key(kept).items() if by_key(planner.plans())[k] != p
    }
    with pytest.raises(SpecError):
        planner.add(jobs[0][0], jobs[0][1])
    with pytest.raises(SpecError):
        planner.set_policy("nope")
