"""The controller's online plan is the simulator's: same policy call, same levels.

For random sets of in-flight groups of the example jobs, at random instants, the
levels the controller would install (``planning.plan_instances`` -> per-offset
deadline ranges) equal, flow by flow, the levels the simulator uses at a re-plan
(``echelon.quantize.flow_levels`` of the same ``get_policy("echelon").schedule``
call on the same EchelonFlows, with the same bytes left: a flow's size less what its
host reported sent).
"""

from __future__ import annotations

import bisect
import random
from pathlib import Path

import pytest
import yaml

from controlplane.planning import plan_instances
from controlplane.registry import GroupIds
from echelon.jobs import load_description
from echelon.policies import get_policy
from echelon.quantize import flow_levels
from echelon.topology import TopologyNetwork, load
from tests.controlplane.helpers import ROOT, write_topo

EXAMPLES = sorted((ROOT / "echelon" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("seed", range(4))
def test_online_levels_equal_the_simulators(tmp_path: Path, seed: int) -> None:
    topo = load(write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"]))
    net = TopologyNetwork(topo)
    jobs = []
    for k, path in enumerate(EXAMPLES):
        desc = yaml.safe_load(path.read_text())
        desc["job"] = f"{path.stem}{k}"
        jobs.append(load_description(desc, topo.hosts))
    rng = random.Random(seed)
    compared = 0
    for _ in range(10):
        instances = []
        eid = 1
        for job in jobs:
            for group in job.groups:
                if len(job.of_group(group)[0]) == 1 and rng.random() < 0.4:
                    (ef,) = job.of_group(group)[0]
                    # some flows partly sent, as the hosts report them
                    sent = {
                        f.index: rng.randrange(f.size + 1) for f in ef.flows if rng.random() < 0.5
                    }
                    gid = GroupIds(group, eid, eid)
                    instances.append((job, gid, rng.uniform(0, 2.0), sent))
                eid += 1
        if not instances:
            continue
        now = rng.uniform(0, 3.0)
        plans = plan_instances("echelon", instances, net, now)
        efs = [job.shifted(gid.group, start)[0] for job, gid, start, _ in instances]
        left = {
            (ef.name, i): max(1, {f.index: f.size for f in ef.flows}[i] - b)
            for ef, (_, _, _, sent) in zip(efs, instances, strict=True)
            for i, b in sent.items()
        }
        sim = flow_levels(get_policy("echelon").schedule(efs, net, left, now), efs)
        for plan, ef in zip(plans, efs, strict=True):
            los = [r.lo_us for r in plan.ranges]
            for f in ef.flows:
                got = plan.ranges[bisect.bisect_right(los, f.offset_us) - 1].priority
                assert got == sim[(ef.name, f.index)], (ef.name, f.index)
                compared += 1
    assert compared > 100
