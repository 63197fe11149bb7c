"""The report's headline (every policy on 8 queues), the ablation and the one-link optimum.

The headline compares what a switch can do: echelon's ranks quantised onto the 7
echelon levels of an 8-queue switch (`echelon.quantize`), re-planned at group
events at most every ``REPLAN_INTERVAL_S``, against every baseline given the same
8 queues and, in a second comparison, against every baseline given ideal ranks
(a level per rank, which no switch has: the baselines at full strength).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence

from echelon.oracle import (
    ONE_LINK,
    Instance,
    MyopicOptimum,
    formation_delay,
    optimum,
    random_instance,
    scaled,
)
from echelon.policies import get_policy
from echelon.schedule import Policy
from sim.coflow.workload import GroupJob
from sim.core.config import JobRun, SimConfig
from sim.core.engine import Simulator
from sim.eval.report import (
    VERSUS_HEAD,
    Row,
    echelon_vs_best,
    fmt,
    pct,
    policy_table,
    table,
    versus_cells,
)

#: Policies measured against the exact one-link optimum, and the instance count.
ORACLE_POLICIES = (
    "echelon",
    "echelon-noswap",
    "echelon-nomove",
    "echelon-nograce",
    "echelon-v1",
    "sebf-edf",
    "varys",
    "edf",
    "fair",
    "fifo",
)
ORACLE_INSTANCES = 300
#: Instance sets the policy was not designed on (the report's set is seed 0).
ORACLE_HELDOUT_SEEDS = (1, 2, 3)


def _compared(
    batch: Sequence[Row], mixes: Sequence[str]
) -> Iterator[tuple[str, tuple[Row, Row, Row], tuple[Row, Row, Row]]]:
    """Per mix with both: (mix, echelon vs best on 8 queues, echelon vs best with ideal ranks)."""
    for mix in mixes:
        k8 = echelon_vs_best(batch, mix=mix, levels="K=8")
        ideal = echelon_vs_best(batch, mix=mix, levels="ideal")
        if k8 is not None and ideal is not None:
            yield mix, k8, ideal


def headline_k8(batch: Sequence[Row], mixes: Sequence[str]) -> str:
    """Per mix: echelon on 8 queues against the best baseline on 8 queues and the best
    baseline with ideal ranks; its cost against its own ideal ranks; its re-plan load."""
    body = [
        [
            *versus_cells(mix, e, bm, bp),
            f"{pct(e['iter_mean'], im['iter_mean'])} / {pct(e['iter_p99'], ip['iter_p99'])}",
            pct(e["iter_mean"], e_ideal["iter_mean"]),
            f"{e['reranks_per_s']:.1f} / {e['level_updates_per_s']:.0f}",
        ]
        for mix, (e, bm, bp), (e_ideal, im, ip) in _compared(batch, mixes)
    ]
    return table(
        [*VERSUS_HEAD, "vs best ideal-rank baseline (mean / p99)",
         "echelon K=8 vs its ideal ranks (mean)", "re-plans/s / group level changes/s"],
        body,
    )  # fmt: skip


def targets(batch: Sequence[Row], mixes: Sequence[str]) -> str:
    """The scheduling issue's targets, met or not, with the gap (computed)."""
    lines = []
    for mix, (e, bm, bp), ideal in _compared(batch, mixes):
        mean_gap = e["iter_mean"] / bm["iter_mean"] - 1
        p99_gap = e["iter_p99"] / bp["iter_p99"] - 1
        k8_gap = e["iter_mean"] / ideal[0]["iter_mean"] - 1
        lines.append(
            f"* `{mix}`: mean {mean_gap * 100:+.1f}% vs {bm['policy']} (target -5%: "
            f"{'met' if mean_gap <= -0.05 else f'missed by {(mean_gap + 0.05) * 100:.1f} points'}"
            f"); p99 {p99_gap * 100:+.1f}% vs {bp['policy']} (target +0%: "
            f"{'met' if p99_gap <= 0 else f'missed by {p99_gap * 100:.1f} points'}); "
            f"8 queues vs ideal ranks {k8_gap * 100:+.1f}% (target within 5%: "
            f"{'met' if abs(k8_gap) <= 0.05 else 'missed'})."
        )
    return "\n".join(lines)


def ablation_table(rows: Sequence[Row], mix: str, gbit: float, policies: Sequence[str]) -> str:
    """One mix at one bandwidth: every ablation against the full policy (8 queues)."""
    sel = [r for r in rows if r["mix"] == mix and float(r["gbit"]) == gbit]
    if not any(r["policy"] == "echelon" for r in sel):
        return ""
    return policy_table(sel, policies, ("slowdown_mean",))


def policy_cost(inst: Instance, policy: Policy) -> float:
    """Formation delay of ``policy`` played on a one-link instance by the engine: each
    group a job released at its release time, the policy asked again at every group
    release and finish, equal ranks sharing the link."""
    jobs = [JobRun(GroupJob(ef), inst.release[ef.name]) for ef in scaled(inst.groups)]
    res = Simulator(ONE_LINK, jobs, SimConfig(policy=policy)).run()
    return formation_delay(inst, {(r.echelon, r.index): r.finish for r in res.flows})


def ratios(policy: Policy, count: int, seed: int = 0) -> list[float]:
    """``policy_cost / optimum`` on ``count`` random instances (optimum 0 and cost 0 -> 1)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        inst = random_instance(rng)
        best, got = optimum(inst), policy_cost(inst, policy)
        out.append(1.0 if got <= best + 1e-9 else (got / best if best > 0 else math.inf))
    return out


#: The one-link target: echelon's largest ratio to the optimum over the instances.
ORACLE_MAX_TARGET = 1.05


def oracle_table() -> str:
    """Ratio to the exact optimum on random one-link instances (echelon.oracle), with the
    myopic optimum (exact on the present, blind to the future) as the online reference,
    and echelon's maximum against :data:`ORACLE_MAX_TARGET`."""
    body = []
    named: list[tuple[str, Policy]] = [(n, get_policy(n)) for n in ORACLE_POLICIES]
    myopic = "*myopic optimum (reference)*"
    found: dict[str, list[float]] = {}
    for name, policy in [*named, (myopic, MyopicOptimum())]:
        r = found[name] = ratios(policy, ORACLE_INSTANCES)
        share = sum(x <= 1 + 1e-9 for x in r) / len(r)
        body.append([name, f"{sum(r) / len(r):.4f}", f"{max(r):.3f}", f"{share:.0%}"])
    return (
        table(["policy", "mean ratio", "max ratio", "optimal on"], body)
        + oracle_verdict(found.get("echelon", []), found[myopic])
        + heldout_line()
    )


def heldout_line() -> str:
    """echelon's and the myopic optimum's mean / max ratio on the held-out instance sets
    (:data:`ORACLE_HELDOUT_SEEDS`): what the design set's figures are worth elsewhere, and
    how many of echelon's instances above the target no policy re-planned at releases
    meets (the myopic optimum misses them too)."""
    cells = []
    for seed in ORACLE_HELDOUT_SEEDS:
        ours = ratios(get_policy("echelon"), ORACLE_INSTANCES, seed)
        ref = ratios(MyopicOptimum(), ORACLE_INSTANCES, seed)
        above, blind = misses(ours, ref)
        cells.append(
            f"seed {seed}: {sum(ours) / len(ours):.4f} / {max(ours):.3f} ({len(above)} above "
            f"{ORACLE_MAX_TARGET}, {blind} of them above it under the myopic optimum too; "
            f"myopic optimum {sum(ref) / len(ref):.4f} / {max(ref):.3f})"
        )
    return (
        f"\nHeld out ({ORACLE_INSTANCES} instances each, not used in the design), echelon's "
        f"mean / max ratio: {'; '.join(cells)}.\n"
    )


def misses(r: Sequence[float], reference: Sequence[float]) -> tuple[list[int], int]:
    """The instances (numbered as drawn) where ``r`` is above :data:`ORACLE_MAX_TARGET`,
    and how many of them ``reference`` (the myopic optimum, same instances) is above it
    on too."""
    above = [i for i, x in enumerate(r) if x > ORACLE_MAX_TARGET]
    return above, sum(reference[i] > ORACLE_MAX_TARGET for i in above)


def oracle_verdict(r: Sequence[float], reference: Sequence[float]) -> str:
    """One line: echelon's maximum ratio ``r`` against the target; where missed, by how
    much, on which instances (numbered as drawn), and how many of them the myopic optimum
    (``reference``, same instances) misses too: those no policy re-planned at releases
    can meet, the rest are the policy's own."""
    if not r:
        return ""
    worst = max(r)
    if worst <= ORACLE_MAX_TARGET:
        return f"\nTarget: echelon's maximum ratio ≤ {ORACLE_MAX_TARGET}: met ({worst:.3f}).\n"
    above, blind = misses(r, reference)
    return (
        f"\nTarget: echelon's maximum ratio ≤ {ORACLE_MAX_TARGET}: **missed by "
        f"{worst - ORACLE_MAX_TARGET:.3f}** ({len(above)} of {len(r)} instances above it: "
        f"{', '.join(f'#{i} ({r[i]:.3f})' for i in above)}). Why: on {blind} of them the "
        "myopic optimum is above it too (a later release changes what was best); the "
        "others are the policy's own (docs/measurements/scheduling.md).\n"
    )


def holdout_table(rows: Sequence[Row], mixes: Sequence[str]) -> str:
    """Per mix on the held-out seeds: echelon on 8 queues against the best baseline on
    8 queues, on mean and on p99 (the headline's first comparison)."""
    found = ((mix, echelon_vs_best(rows, mix=mix, levels="K=8")) for mix in mixes)
    return table(VERSUS_HEAD, [versus_cells(mix, *f) for mix, f in found if f is not None])


def frontier(batch: Sequence[Row], ablation: Sequence[Row], mixes: Sequence[str]) -> str:
    """Why a missed mean-and-p99 target is missed: on the (mean, p99) plane, every
    policy and ablation measured on 8 queues at 100 Gbit/s, the target box (mean at
    least 5 % below the best-mean baseline, p99 at or below the best-p99 baseline),
    whether any measured point lies in it, and the non-dominated points."""
    lines = []
    for mix in mixes:
        found = echelon_vs_best(batch, mix=mix, levels="K=8")
        if found is None:
            continue
        _, bm, bp = found
        points = {
            r["policy"]: (r["iter_mean"], r["iter_p99"])
            for r in batch
            if r["mix"] == mix and r["levels"] == "K=8"
        }
        points.update(
            (r["policy"], (r["iter_mean"], r["iter_p99"]))
            for r in ablation
            if r["mix"] == mix and float(r["gbit"]) == 100.0
        )
        mean_cap, p99_cap = 0.95 * bm["iter_mean"], bp["iter_p99"]
        inside = sorted(p for p, (m, q) in points.items() if m <= mean_cap and q <= p99_cap)
        if inside and "echelon" in inside:
            continue
        front = sorted(
            (p for p, (m, q) in points.items()
             if not any(m2 <= m and q2 <= q and (m2, q2) != (m, q)
                        for m2, q2 in points.values())),
            key=lambda p: points[p][0],
        )  # fmt: skip
        where = ", ".join(
            f"{p} {fmt(points[p][0])}/{fmt(points[p][1])} s"
            f" ({pct(points[p][0], bm['iter_mean'])} / {pct(points[p][1], p99_cap)})"
            for p in front
        )
        verdict = (
            f"measured in it: {', '.join(inside)}" if inside else "no measured policy is in it"
        )
        lines.append(
            f"* `{mix}`: target box mean ≤ {fmt(mean_cap)} s and p99 ≤ {fmt(p99_cap)} s; "
            f"{verdict} ({len(points)} policies and ablations). Non-dominated points, "
            f"mean/p99 (vs {bm['policy']} mean / vs {bp['policy']} p99): {where}."
        )
    return "\n".join(lines)


#: Per mix, :func:`sim.eval.seeds.largest_gaps`: the best-mean baseline and the seeds
#: where echelon's mean is furthest above it, ``(seed, mean gap, p99 gap)``.
Gaps = Mapping[str, tuple[str, Sequence[tuple[int, float, float]]]]


def why_missed(gaps: Gaps, draw: Callable[[str, int], str]) -> str:
    """The summary's account of why the mean-and-p99 box is missed: the trade the
    frontier shows, and the held-out seeds where echelon's mean loss sits (from
    ``gaps``, with each seed's job draw, ``draw(mix, seed)``), with pointers to the
    analyses of docs/model.md that explain them."""
    cells = []
    for mix, (best, rows) in gaps.items():
        lost = [
            f"seed {s} {m * 100:+.1f}% / {q * 100:+.1f}% ({draw(mix, s)})"
            for s, m, q in rows
            if m > 0
        ]
        if lost:
            cells.append(f"`{mix}` against {best}, mean / p99: {', '.join(lost)}")
    return (
        "Why the box is missed. The mean target is set against baselines that serve whole "
        "groups in a fixed order (`echelon-v1`, `sebf-edf`: the same jobs go first, which "
        "lowers the mean, and the job served last pays in its first iteration), the p99 "
        "target against baselines under which the jobs progress in lockstep (`edf`, `fifo`, "
        "`sincronia`). The share β moves echelon along that trade (`echelon-edf` β = 0, "
        "echelon β = 1/4, `echelon-serial` β = 1, section 3b), and the planes above show the "
        "box beyond every measured point of it. On `hybrid` the p99 is the cold start, the "
        "large jobs' first iterations: docs/model.md §5.1 ('Where it stands') bounds it on "
        "seed 0 from the busiest link's load (a lab analysis, not recomputed here). Where "
        "echelon's held-out mean loss sits (section 3c; each seed's job draw in brackets): "
        + ("; ".join(cells) if cells else "nowhere, its mean is below the baseline's on every seed")
        + ". Where several FSDP jobs share the links, the best-mean baseline runs them one "
        "after another, while echelon's groups of one size class with the same latest "
        "finishes interleave and the jobs run side by side: higher mean, much lower p99 "
        "(docs/model.md §5.1 reads `dp` seeds 5, 6 and 9)."
    )
