"""``topo.crosscheck.registration_levels`` against the switch's own lookup.

The oracle is what the controller installs and the data plane does with it: the
echelon policy's schedule quantised into deadline ranges per EchelonFlow
(:func:`echelon.quantize.quantize`), and each packet's level looked up by its
offset (:func:`echelon.quantize.level_of`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from echelon.jobs import JobSpec, opening_groups
from echelon.policies import get_policy
from echelon.quantize import level_of, quantize
from echelon.topology import TopologyNetwork, load, parse
from tests.topo.helpers import ROOT
from topo.crosscheck import registration_levels
from topo.demo import JOB_FILES, load_demo_jobs, paced_description


def switch_lookup(
    specs: Sequence[JobSpec], net: TopologyNetwork, anticipated: bool
) -> dict[tuple[str, str, int], int]:
    plans = [spec.plan(0, 0.0) for spec in specs]
    efs = [ef for plan in plans for ef in plan.echelons]
    levels = dict(quantize(get_policy("echelon").schedule(efs, net), efs))
    if anticipated:
        opening = [ef for p in plans for ef in p.echelons if ef.group in opening_groups(p)]
        levels.update(quantize(get_policy("echelon").schedule(opening, net, None, 0.0), opening))
    return {(ef.job, ef.group, f.index): level_of(levels[ef.name], f.offset_us)
            for ef in efs for f in ef.flows}  # fmt: skip


@pytest.mark.parametrize("anticipated", [False, True])
@pytest.mark.parametrize("jobs", [JOB_FILES, JOB_FILES[1:], JOB_FILES[:1]])
def test_levels_are_the_switchs_lookup_of_the_installed_ranges(
    jobs: Sequence[str], anticipated: bool
) -> None:
    star = ROOT / "topo/star.yaml"
    specs = [j.spec for j in load_demo_jobs(list(jobs), 0.1, set(load(star).hosts))]
    net = TopologyNetwork(parse(paced_description(star, 40.0), default_name="star"))
    got = registration_levels(specs, net, anticipated)
    assert got == switch_lookup(specs, net, anticipated)
    assert len(set(got.values())) > 1  # not one level for everything: the plan separates groups
