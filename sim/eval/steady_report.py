"""Markdown of the steady-state section (the report's headline), from the rows of
:func:`sim.eval.steady.run_steady`.

Each number is the mean over seeds of one run's figure; a comparison is the ratio of
those means with a 95 % paired bootstrap interval over seeds (:mod:`sim.eval.seeds`).
A baseline *dominates* echelon in a cell when both its mean and its p99 are lower
and both intervals exclude zero ("lower by more than the interval").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sim.eval.bandwidth import gbit_of
from sim.eval.experiments import BASELINES
from sim.eval.report import Row, fmt, table
from sim.eval.seeds import Paired, interval, mean_of, paired_ratio, per_policy, series

METRICS = ("steady_mean", "steady_p99", "worst_slowdown", "jain")


def cells(rows: Sequence[Row]) -> dict[tuple[str, float], dict[str, dict[int, Row]]]:
    """``{(mix, gbit): {policy: {seed: row}}}``, keeping the seeds every policy has, in
    the report's order (by mix, the fastest links first)."""
    groups: dict[tuple[str, float], list[Row]] = {}
    for r in rows:
        groups.setdefault((str(r["mix"]), gbit_of(r)), []).append(r)
    order = sorted(groups, key=lambda key: (key[0], -key[1]))
    return {key: per_policy(groups[key]) for key in order}


def versus(per: Mapping[str, Mapping[int, Row]], ours: str, theirs: str, metric: str) -> Paired:
    return paired_ratio(series(per[ours], metric), series(per[theirs], metric))


def dominators(per: Mapping[str, Mapping[int, Row]], ours: str = "echelon") -> list[str]:
    """Baselines lower than ``ours`` on both mean and p99 by more than the interval."""
    out = []
    for p in per:
        if p not in BASELINES:
            continue
        m = versus(per, ours, p, "steady_mean")
        q = versus(per, ours, p, "steady_p99")
        if m.low > 0 and q.low > 0:
            out.append(p)
    return out


def headline(rows: Sequence[Row], ours: str = "echelon") -> str:
    """One line per (mix, Gbit/s): ours against fair sharing and echelon-v1, its worst
    job against fair's worst job, and the baselines that dominate it."""
    body = []
    for (mix, gbit), per in cells(rows).items():
        if ours not in per or "fair" not in per:
            continue
        e, f = per[ours], per["fair"]
        v1 = (
            interval(versus(per, ours, "echelon-v1", "steady_mean")) if "echelon-v1" in per else "–"
        )
        worst = mean_of(e, "worst_slowdown") / mean_of(f, "worst_slowdown") - 1
        body.append(
            [
                mix,
                fmt(gbit),
                len(e),
                f"{fmt(mean_of(e, 'steady_mean'))} / {fmt(mean_of(e, 'steady_p99'))}",
                f"{fmt(mean_of(f, 'steady_mean'))} / {fmt(mean_of(f, 'steady_p99'))}",
                interval(versus(per, ours, "fair", "steady_mean")),
                interval(versus(per, ours, "fair", "steady_p99")),
                v1,
                f"{fmt(mean_of(e, 'worst_slowdown'))} / {fmt(mean_of(f, 'worst_slowdown'))} "
                f"({worst * 100:+.1f}%)",
                f"{fmt(mean_of(e, 'jain'))} / {fmt(mean_of(f, 'jain'))}",
                ", ".join(dominators(per, ours)) or "none",
            ]
        )
    return table(
        ["mix", "Gbit/s", "seeds", f"{ours} mean / p99 (s)", "fair mean / p99 (s)",
         "mean vs fair [95% CI]", "p99 vs fair [95% CI]", "mean vs echelon-v1 [95% CI]",
         "worst job slowdown, ours / fair", "Jain, ours / fair", "dominated by"],
        body,
    )  # fmt: skip


def cell_table(per: Mapping[str, Mapping[int, Row]], policies: Sequence[str]) -> str:
    """Every policy of one cell: its means over seeds and echelon against it."""
    body = []
    for p in policies:
        if p not in per:
            continue
        runs = per[p]
        vs = ["–", "–"]
        if p != "echelon" and "echelon" in per:
            vs = [interval(versus(per, "echelon", p, m)) for m in ("steady_mean", "steady_p99")]
        body.append(
            [
                p,
                *(mean_of(runs, m) for m in METRICS),
                min(int(r["min_iters"]) for r in runs.values()),
                max(float(r["half_gap"]) for r in runs.values()),
                *vs,
            ]
        )
    return table(
        ["policy", "mean (s)", "p99 (s)", "worst job slowdown", "Jain",
         "fewest window iterations", "largest half-window gap", "echelon mean vs it",
         "echelon p99 vs it"],
        body,
    )  # fmt: skip


def stability(rows: Sequence[Row]) -> str:
    """How stable the window estimate was over all runs: the half-window gaps and the
    censored jobs."""
    gaps = np.array([float(r["half_gap"]) for r in rows])
    cens = sum(int(r["censored"]) for r in rows)
    few = sum(1 for r in rows if int(r["min_iters"]) < 4)
    return (
        f"Over the {len(rows)} runs the mean over jobs from the window's first half and "
        f"from its second half differ by {np.median(gaps) * 100:.1f} % at the median, "
        f"{np.percentile(gaps, 90) * 100:.1f} % at the 90th percentile and "
        f"{gaps.max() * 100:.1f} % at most; {few} run(s) had a job with fewer than 4 "
        f"iteration ends in the window and {cens} job(s) in all were censored (fewer "
        "than 2 ends: their figure is a lower bound)."
    )


def _design_note(seeds: Sequence[int]) -> str:
    design = [s for s in seeds if s in DESIGN_SEEDS]
    held = [s for s in seeds if s not in DESIGN_SEEDS]
    return (
        f"seeds {', '.join(map(str, seeds))} ({len(seeds)}); the policy was chosen on "
        f"{', '.join(map(str, design)) or 'none of them'}"
        + (f", seeds {', '.join(map(str, held))} are held out" if held else "")
    )


#: Seeds the steady-state policy was designed on (docs/model.md says what ran on them).
DESIGN_SEEDS = (0, 1)


def summary(rows: Sequence[Row], profile: Any) -> str:
    """The steady-state lines of the report's summary."""
    seeds = list(profile.steady_seeds)
    short = (
        f" **{len(seeds)} seed(s), not the 10 the scheduling targets ask for**: the full "
        "grid did not fit the machine's budget for this run; `--steady-seeds 10` runs them."
        if len(seeds) < 10
        else ""
    )
    return (
        "**Steady state (the headline)**: every job of a draw keeps iterating; after a "
        "warm-up, each job's steady iteration time (section *Steady state*), every policy "
        f"on 8 queues, {_design_note(seeds)}.{short} Mean = mean over jobs of their steady "
        "iteration time; p99 over the window's iterations; worst job = the largest "
        "slowdown (steady / contention-free iteration time), averaged over seeds:\n\n"
        + headline(rows)
        + "\n\nAgainst the steady-state targets (mean below `fair` in every cell and below "
        "`echelon-v1` at 25 and 10 Gbit/s; worst job's slowdown within 5 % of fair's worst "
        "job's; no baseline lower on both mean and p99 by more than the interval):\n\n"
        + targets(rows)
    )


def section(w: Any, rows: Sequence[Row], profile: Any, wall_s: float) -> None:
    """The steady-state section: rules, stability, every policy per cell."""
    from sim.eval import steady

    w("## Steady state: long-running jobs after their cold start\n")
    w((steady.__doc__ or "").split("\n", 1)[1].strip() + "\n")
    w(
        f"Constants: horizon {fmt(float(profile.steady_horizon))} × the draw's largest "
        f"contention-free iteration, warm-up {steady.WARMUP} iterations, contention-free "
        f"time from {steady.ALONE_ITERATIONS} iterations alone; mixes "
        + ", ".join(f"`{m}`" for m in profile.steady_mixes)
        + " at "
        + ", ".join(fmt(float(g)) for g in profile.steady_gbits)
        + " Gbit/s host links (same leaf-spine, 8 jobs per draw); "
        + _design_note(list(profile.steady_seeds))
        + f"; {len(rows)} runs in {wall_s:.0f} s. `echelon-noguard` is the policy without "
        "its starvation guard (the shipped policy until 2026-12-01).\n"
    )
    w("**Stability of the window estimate.** " + stability(rows) + "\n")
    for (mix, gbit), per in cells(rows).items():
        w(f"### `{mix}` at {fmt(gbit)} Gbit/s\n")
        w(cell_table(per, list(profile.steady_policies)) + "\n")


#: Cells where the network is the bottleneck (host-link Gbit/s below the main grid's).
NETWORK_BOUND_GBIT = 25.0


def size_split(per: Mapping[str, Mapping[int, Row]], ours: str, theirs: str) -> tuple[float, float]:
    """How much of ``ours``'s mean-over-jobs difference to ``theirs`` comes from each
    draw's larger jobs and from its smaller ones, as shares of ``theirs``'s mean
    (the two add up to the ratio of the means over seeds minus one).

    Why: the mean over jobs of iteration *times* is carried by the jobs with long
    iterations, so a policy that favours small jobs can speed most jobs up and still
    lose the mean; this says whether that is what happened. A job is *larger* when its
    contention-free time is at least its draw's median (per seed, the same jobs under
    both policies)."""
    large = small = 0.0
    base = 0.0
    for seed, row in per[theirs].items():
        mine, other = per[ours][seed]["jobs"], row["jobs"]
        median = float(np.median([float(j["alone_s"]) for j in other.values()]))
        for name, j in other.items():
            d = (float(mine[name]["steady_s"]) - float(j["steady_s"])) / len(other)
            if float(j["alone_s"]) >= median:
                large += d
            else:
                small += d
        base += float(row["steady_mean"])
    return large / base, small / base


def why_mean(per: Mapping[str, Mapping[int, Row]], ours: str, theirs: str = "fair") -> str:
    """Where a mean is lost: the larger and the smaller jobs' shares (:func:`size_split`)."""
    large, small = size_split(per, ours, theirs)
    text = f"larger half of the jobs {large * 100:+.1f} points, smaller half {small * 100:+.1f}"
    if large > 0 >= small:
        text += (
            ": the size classes serve the small jobs' groups first, and the mean over jobs is "
            "carried by the large jobs' long iterations"
        )
    return text


def targets(rows: Sequence[Row], ours: str = "echelon") -> str:
    """Per cell, the steady-state targets met or missed, and by how much (and, for the
    mean against fair, which jobs carry the difference): mean below fair's; mean below
    echelon-v1's where the network is the bottleneck; the worst job's slowdown within
    5 % of fair's worst job's; no baseline dominating."""
    lines = []
    for (mix, gbit), per in cells(rows).items():
        if ours not in per or "fair" not in per:
            continue
        missed = []
        vs_fair = versus(per, ours, "fair", "steady_mean")
        if vs_fair.ratio >= 0:
            missed.append(f"mean {vs_fair.ratio * 100:+.1f}% against fair ({why_mean(per, ours)})")
        if gbit <= NETWORK_BOUND_GBIT and "echelon-v1" in per:
            vs_v1 = versus(per, ours, "echelon-v1", "steady_mean")
            if vs_v1.ratio >= 0:
                missed.append(f"mean {vs_v1.ratio * 100:+.1f}% against echelon-v1")
        worst = mean_of(per[ours], "worst_slowdown") / mean_of(per["fair"], "worst_slowdown")
        if worst > 1.05:
            missed.append(f"worst job {(worst - 1) * 100:+.1f}% against fair's (limit +5%)")
        dom = dominators(per, ours)
        if dom:
            missed.append("dominated by " + ", ".join(dom))
        verdict = "all met" if not missed else "missed: " + "; ".join(missed)
        lines.append(f"* `{mix}` at {fmt(gbit)} Gbit/s: {verdict}.")
    return "\n".join(lines)
