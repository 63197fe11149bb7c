"""``python -m sim.eval --policy NAME``: one policy of your own against every built-in one.

The same closed batches as the evaluation's main grid (every mix, 8 switch queues,
the profile's seeds), with ``NAME`` (a built-in, an ``echelon.policies`` entry point
or ``package.module:Class``, docs/policies.md) run next to every policy of
:data:`sim.eval.experiments.POLICIES`. The report goes to its own file
(``run/eval-<name>.md`` unless ``--doc`` says otherwise), so trying a policy never
rewrites docs/evaluation.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from echelon.policies import get_policy
from sim.eval.experiments import POLICIES, Profile, average, batch_point
from sim.eval.report import pct
from sim.points import Point, Progress
from sim.sweep import run_sweep

#: The switch's queues in every run of the comparison (the evaluation's headline setting).
LEVELS = 8


def default_doc(name: str) -> str:
    """Where the comparison of ``name`` goes unless ``--doc`` is given."""
    return f"run/eval-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.md"


def points(name: str, profile: Profile, mixes: Sequence[str]) -> list[Point]:
    pols = [name, *(p for p in POLICIES if p != name)]
    return [
        batch_point(profile, mix, pol, LEVELS, seed)
        for mix in mixes
        for pol in pols
        for seed in profile.seeds
    ]


def report(name: str, rows: Sequence[dict[str, Any]], profile: Profile) -> str:
    """Markdown: per mix, every policy's mean and p99 iteration time (s, mean over
    seeds; lower is better), the best of each column in bold, and the candidate
    against ``echelon`` and against the best built-in baseline."""
    avg = average(rows, ("mix", "policy"))
    mixes = list(dict.fromkeys(r["mix"] for r in avg))
    lines = [
        f"# {name} against the built-in policies",
        "",
        f"Closed batches of {profile.batch_jobs} jobs, {profile.iterations} iterations, "
        f"seeds {list(profile.seeds)}, {LEVELS} switch queues, the evaluation's network "
        f"(docs/evaluation.md). Iteration time in seconds, mean over seeds; lower is better; "
        "**bold**: best of the column.",
        "",
    ]
    for mix in mixes:
        val = {r["policy"]: (r["iter_mean"], r["iter_p99"]) for r in avg if r["mix"] == mix}
        pols = list(val)
        best = (min(v[0] for v in val.values()), min(v[1] for v in val.values()))
        lines += [f"## {mix}", "", "| policy | mean (s) | p99 (s) |", "| --- | ---: | ---: |"]
        for p in pols:
            pairs = zip(val[p], best, strict=True)
            cells = [f"**{v:.4f}**" if v == b else f"{v:.4f}" for v, b in pairs]
            lines.append(f"| {p} | {cells[0]} | {cells[1]} |")
        mine = val[name]
        others = [p for p in pols if p != name]
        lines.append("")
        if "echelon" in val and name != "echelon":
            mean, p99 = (pct(m, e, "n/a", " %") for m, e in zip(mine, val["echelon"], strict=True))
            lines.append(f"{name} vs echelon: mean {mean}, p99 {p99}.")
        if others:
            bm = min(others, key=lambda p: val[p][0])
            bp = min(others, key=lambda p: val[p][1])
            mean, p99 = (pct(mine[i], val[p][i], "n/a", " %") for i, p in enumerate((bm, bp)))
            lines.append(f"{name} vs the best other policy: mean {mean} ({bm}), p99 {p99} ({bp}).")
        lines.append("")
    return "\n".join(lines)


def compare(
    name: str,
    profile: Profile,
    mixes: Sequence[str],
    workers: int | None,
    ray_address: str | None,
    progress: Progress | None,
) -> tuple[str, list[dict[str, Any]]]:
    """Run the comparison; return the markdown report and the raw rows."""
    get_policy(name)  # a typo fails before any simulation
    pts = points(name, profile, mixes)
    rows = run_sweep(pts, workers, ray_address, progress=progress)
    return report(name, rows, profile), rows
