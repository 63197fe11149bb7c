"""How sure the headline is: echelon against the best baseline seed by seed.

Why this exists: a closed batch (8 jobs, 3 iterations) gives one mean and one p99
per seed, and seeds differ a lot — on the held-out seeds 3-5 the `dp` mix once
swung from level with the best baseline to 10 % behind it on a single seed. A
difference of a few percent averaged over three seeds says little on its own, so
the report re-runs the headline on many seeds the policy was not chosen on and
states, for each comparison, a paired bootstrap interval over seeds and in how
many seeds echelon was ahead.

The ratio is the one the headline uses: the mean over seeds of echelon's metric
divided by the mean over seeds of the baseline's, minus one. The bootstrap draws
seeds with replacement and recomputes that ratio on both sides with the same
draw (paired: a seed with a hard job draw is hard for both policies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sim.eval.report import Row, echelon_vs_best, fmt, table

#: Bootstrap resamples per interval and the generator's seed (the report is reproducible).
DRAWS = 4000
DRAW_SEED = 0


@dataclass(frozen=True)
class Paired:
    """``ours`` against ``theirs`` over the same seeds."""

    ratio: float  # mean(ours) / mean(theirs) - 1
    low: float  # 2.5th percentile of the bootstrap ratio
    high: float  # 97.5th percentile
    ahead: int  # seeds where ours is strictly lower
    seeds: int


def paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> Paired:
    """Ratio of the means and its 95 % paired bootstrap interval over seeds."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"need two equal, non-empty series, got {a.shape} and {b.shape}")
    pick = np.random.default_rng(DRAW_SEED).integers(0, len(a), size=(DRAWS, len(a)))
    boot = a[pick].mean(axis=1) / b[pick].mean(axis=1) - 1.0
    low, high = np.percentile(boot, [2.5, 97.5])
    return Paired(
        float(a.mean() / b.mean() - 1.0), float(low), float(high), int((a < b).sum()), len(a)
    )


def per_policy(rows: Iterable[Row]) -> dict[str, dict[int, Row]]:
    """Rows as ``{policy: {seed: row}}``, keeping only seeds every policy has (the
    closed-batch tables here and the steady-state cells of :mod:`sim.eval.steady_report`)."""
    got: dict[str, dict[int, Row]] = {}
    for r in rows:
        got.setdefault(str(r["policy"]), {})[int(r["seed"])] = r
    common = set.intersection(*(set(s) for s in got.values())) if got else set()
    return {p: {s: v[s] for s in sorted(common)} for p, v in got.items()}


def by_seed(rows: Sequence[Row], mix: str) -> dict[str, dict[int, Row]]:
    """One mix's rows as :func:`per_policy` groups them."""
    return per_policy(r for r in rows if r["mix"] == mix)


def series(runs: Mapping[int, Row], metric: str) -> list[float]:
    """One policy's ``metric`` seed by seed, in seed order (what :func:`paired_ratio` pairs)."""
    return [float(runs[s][metric]) for s in sorted(runs)]


def mean_of(runs: Mapping[int, Row], metric: str) -> float:
    """The mean over seeds of one policy's ``metric``."""
    return float(np.mean(series(runs, metric)))


def seed_means(per: Mapping[str, Mapping[int, Row]]) -> list[Row]:
    """One row per policy with its mean and p99 iteration time averaged over seeds
    (:func:`mean_of`): what :func:`sim.eval.report.echelon_vs_best` picks the best
    baselines from."""
    metrics = ("iter_mean", "iter_p99")
    return [{"policy": p, **{m: mean_of(runs, m) for m in metrics}} for p, runs in per.items()]


def interval(p: Paired) -> str:
    """``+1.2% [-0.5, +3.0]``: the ratio and its 95 % interval, in percent."""
    return f"{p.ratio * 100:+.1f}% [{p.low * 100:+.1f}, {p.high * 100:+.1f}]"


def seed_table(rows: Sequence[Row], mixes: Sequence[str]) -> str:
    """Per mix: echelon against the best-mean and the best-p99 baseline, with the
    paired 95 % interval and the number of seeds echelon was lower in."""
    body = []
    for mix in mixes:
        per = by_seed(rows, mix)
        found = echelon_vs_best(seed_means(per))
        if found is None:
            continue
        _, bm, bp = found
        e = per["echelon"]
        m = paired_ratio(series(e, "iter_mean"), series(per[bm["policy"]], "iter_mean"))
        q = paired_ratio(series(e, "iter_p99"), series(per[bp["policy"]], "iter_p99"))
        body.append(
            [
                mix,
                m.seeds,
                f"{bm['policy']} {fmt(bm['iter_mean'])}",
                interval(m),
                f"{m.ahead}/{m.seeds}",
                f"{bp['policy']} {fmt(bp['iter_p99'])}",
                interval(q),
                f"{q.ahead}/{q.seeds}",
            ]
        )
    return table(
        ["mix", "seeds", "best baseline mean (s)", "echelon vs it [95% CI]", "echelon lower in",
         "best baseline p99 (s)", "echelon vs it [95% CI]", "echelon lower in"],
        body,
    )  # fmt: skip


def largest_gaps(
    rows: Sequence[Row], mix: str, count: int = 3
) -> tuple[str, list[tuple[int, float, float]]]:
    """The seeds where echelon's mean is furthest above the best-mean baseline's, as
    that baseline's name and ``(seed, mean gap, p99 gap)`` against it: where the
    average loss comes from, and what the baseline's order cost there in tail."""
    per = by_seed(rows, mix)
    found = echelon_vs_best(seed_means(per))
    if found is None:
        return "", []
    bm = str(found[1]["policy"])
    gaps = [
        (
            s,
            float(per["echelon"][s]["iter_mean"]) / float(per[bm][s]["iter_mean"]) - 1.0,
            float(per["echelon"][s]["iter_p99"]) / float(per[bm][s]["iter_p99"]) - 1.0,
        )
        for s in per["echelon"]
    ]
    return bm, sorted(gaps, key=lambda g: -g[1])[:count]
