"""Markdown pieces of docs/evaluation.md, written from the measured rows.

Every sentence that compares policies is computed from the numbers (ahead /
behind, by how much), so the text cannot drift from the tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sim.core.results import SimResult


def fmt(x: Any) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "–"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.3g}" if abs(x) < 1 else f"{x:.3f}".rstrip("0").rstrip(".")
    return str(x)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def pct(a: float | None, b: float | None, missing: str = "–", unit: str = "%") -> str:
    """How much larger ``a`` is than ``b``, as a signed percentage followed by ``unit``;
    ``missing`` where either is unknown (None, NaN) or ``b`` is 0. The evaluation's
    tables write ``+1.2%``; the candidate report and ``make run``'s verdict (``topo.report``)
    ``+1.2 %`` and ``n/a``."""
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return missing
    return f"{(a / b - 1) * 100:+.1f}{unit}"


#: Headers of the metrics a policy table shows after its comparisons with echelon.
EXTRA = {
    "slowdown_mean": "slowdown mean",
    "ecct_mean": "EF completion mean (s)",
    "tardiness_total": "total tardiness (s)",
    "jct_mean": "JCT mean (s)",
}


def policy_table(
    rows: Sequence[Mapping[str, Any]], policies: Sequence[str], extra: Sequence[str] = tuple(EXTRA)
) -> str:
    """Every policy's mean and p99 iteration time against echelon's, then the ``extra``
    metrics (keys of :data:`EXTRA`); a policy's last row counts."""
    by = {r["policy"]: r for r in rows}
    base = by.get("echelon")
    body = [
        [
            f"**{p}**" if p == "echelon" else p,
            r["iter_mean"],
            pct(r["iter_mean"], base["iter_mean"]) if base else "–",
            r["iter_p99"],
            pct(r["iter_p99"], base["iter_p99"]) if base else "–",
            *(r[m] for m in extra),
        ]
        for p in policies
        if (r := by.get(p)) is not None
    ]
    return table(
        ["policy", "iter mean (s)", "vs echelon", "iter p99 (s)", "vs echelon",
         *(EXTRA[m] for m in extra)],
        body,
    )  # fmt: skip


def verdict(rows: Sequence[Mapping[str, Any]], baselines: Sequence[str], what: str) -> str:
    """Where the echelon policy is ahead of / behind each baseline on mean and p99."""
    by = {r["policy"]: r for r in rows}
    e = by.get("echelon")
    if e is None:
        return ""
    lines = []
    for metric, label in (("iter_mean", "mean"), ("iter_p99", "p99")):
        ahead = [b for b in baselines if b in by and by[b][metric] > e[metric] * (1 + 1e-3)]
        tie = [b for b in baselines if b in by and abs(by[b][metric] / e[metric] - 1) <= 1e-3]
        behind = [b for b in baselines if b in by and by[b][metric] < e[metric] * (1 - 1e-3)]
        s = f"* {what}, {label} iteration time: echelon is ahead of {len(ahead)}/{len(baselines)}"
        if tie:
            s += f", tied (within 0.1 %) with {', '.join(tie)}"
        if behind:
            s += "; **behind** " + ", ".join(
                f"{b} ({pct(e[metric], by[b][metric])} slower)" for b in behind
            )
        lines.append(s + ".")
    best = min((b for b in baselines if b in by), key=lambda b: by[b]["iter_mean"], default=None)
    if best is not None:
        lines.append(
            f"* best baseline on mean iteration time: {best} "
            f"({fmt(by[best]['iter_mean'])} s; echelon's mean is "
            f"{pct(e['iter_mean'], by[best]['iter_mean'])} relative to it)."
        )
    return "\n".join(lines)


def case_table(results: Mapping[str, SimResult]) -> str:
    body = []
    for pol, res in results.items():
        for it in res.iterations:
            ideal = res.ideal_iteration.get(it.job, math.nan)
            efs = [e for e in res.echelons if e.job == it.job]
            body.append(
                [
                    pol,
                    it.job,
                    it.duration,
                    ideal,
                    sum(e.tardiness for e in efs),
                    max((e.completion for e in efs), default=math.nan),
                ]
            )
    return table(
        [
            "policy",
            "job",
            "iteration (s)",
            "contention-free (s)",
            "total tardiness (s)",
            "max EF completion (s)",
        ],
        body,
    )


def levels_table(
    rows: Sequence[Mapping[str, Any]], mixes: Sequence[str], policies: Sequence[str]
) -> str:
    """K=8 against ideal ranks, closed batches: ratio of iteration times."""
    idx = {(r["mix"], r["policy"], r["levels"]): r for r in rows}
    body = []
    for mix in mixes:
        for p in policies:
            a, b = idx.get((mix, p, "ideal")), idx.get((mix, p, "K=8"))
            if a and b:
                body.append(
                    [
                        mix,
                        p,
                        a["iter_mean"],
                        b["iter_mean"],
                        pct(b["iter_mean"], a["iter_mean"]),
                        a["iter_p99"],
                        b["iter_p99"],
                        pct(b["iter_p99"], a["iter_p99"]),
                    ]
                )
    return table(
        ["mix", "policy", "mean ideal", "mean K=8", "K=8 cost", "p99 ideal", "p99 K=8", "K=8 cost"],
        body,
    )


def scale_table(rows: Sequence[Mapping[str, Any]]) -> str:
    body = [
        [
            r["policy"],
            r["flows"],
            r["events"],
            r["reranks"],
            r["wall_s"],
            r["flows"] / max(r["wall_s"], 1e-9),
        ]
        for r in sorted(rows, key=lambda r: (r["policy"], r["flows"]))
    ]
    return table(["policy", "flows", "events", "policy calls", "wall (s)", "flows/s"], body)


def analysis(batch: Sequence[Mapping[str, Any]], mixes: Sequence[str]) -> str:
    """Why the numbers come out as they do, with the numbers (closed batches)."""
    idx = {(r["mix"], r["policy"], r["levels"]): r for r in batch}
    out = []
    for mix in mixes:
        e = idx.get((mix, "echelon", "ideal"))
        if e is None:
            continue
        others = [
            r for (m, p, lv), r in idx.items() if m == mix and lv == "ideal" and p != "echelon"
        ]
        spread = max(abs(r["iter_mean"] / e["iter_mean"] - 1) for r in others) if others else 0.0
        if spread < 0.005:
            out.append(
                f"* `{mix}`: every policy is within {spread * 100:.2f} % of echelon on mean "
                f"iteration time. The mean slowdown is {fmt(e['slowdown_mean'])}x the "
                "contention-free iteration: the jobs are compute-bound at this bandwidth, "
                "so there is nothing for a network schedule to win (or lose)."
            )
            continue
        ahead = [r for r in others if r["iter_mean"] < e["iter_mean"] * 0.999]
        if ahead:
            best = min(ahead, key=lambda r: r["iter_mean"])
            out.append(
                f"* `{mix}`: {best['policy']} has a lower mean iteration time than echelon "
                f"({fmt(best['iter_mean'])} s vs {fmt(e['iter_mean'])} s, echelon "
                f"{pct(e['iter_mean'], best['iter_mean'])}); EchelonFlow completion mean "
                f"{fmt(e['ecct_mean'])} s vs {fmt(best['ecct_mean'])} s, total tardiness "
                f"{fmt(e['tardiness_total'])} s vs {fmt(best['tardiness_total'])} s. Inside "
                "a size class the echelon policy lets a group that the serial order would "
                "make late go ahead of its peers (a quarter of that lateness moves its virtual "
                "deadlines): that bounds the tail and costs some mean where serving peers one "
                "after another would overlap one job's computation with another's "
                "communication better (section 3b: `echelon-serial` is the same policy "
                "without that share)."
            )
        tail = [r for r in others if r["iter_p99"] < e["iter_p99"] * 0.999]
        if tail:
            best = min(tail, key=lambda r: r["iter_p99"])
            head = (
                f"* `{mix}`: echelon has the lower mean but {best['policy']} the lower p99 "
                f"({fmt(best['iter_p99'])} s vs {fmt(e['iter_p99'])} s). Who bears the delay: "
                f"the most-slowed job's mean slowdown is {fmt(e['job_slowdown_max'])}x under "
                f"echelon vs {fmt(best['job_slowdown_max'])}x under {best['policy']}, the "
                f"least-slowed job's {fmt(e['job_slowdown_min'])}x vs "
                f"{fmt(best['job_slowdown_min'])}x. "
            )
            if e["job_slowdown_max"] > best["job_slowdown_max"]:
                head += (
                    "Strict priority between size classes finishes the smaller groups first and "
                    "makes the larger ones wait for them; the baseline spreads the delay "
                    "more evenly over jobs. EchelonFlow's ordering trades tail for mean here."
                )
            else:
                head += (
                    "Here the worst job fares better under echelon, so the p99 gap is not one "
                    "starved job; it comes from individual slow iterations rather than from "
                    "one job's average."
                )
                if "iter_first_mean" not in e:
                    head += " We have not isolated it further."
            out.append(head + _cold_start(e, best))
        k8 = idx.get((mix, "echelon", "K=8"))
        if k8 is not None:
            dm = k8["iter_mean"] / e["iter_mean"] - 1
            dp = k8["iter_p99"] / e["iter_p99"] - 1
            line = (
                f"* `{mix}`, K=8: echelon's mean iteration time changes by "
                f"{pct(k8['iter_mean'], e['iter_mean'])} and its p99 by "
                f"{pct(k8['iter_p99'], e['iter_p99'])} against ideal ranks."
            )
            if abs(dm) < 0.01 and abs(dp) < 0.01:
                line += " Eight queues are enough for this mix."
            elif dm > 0 and dp < 0:
                line += (
                    " With more distinct ranks than levels, the ranks last in order share the "
                    "lowest level (fair sharing among them): that costs mean and evens out the "
                    "tail."
                )
            elif dm > 0 and dp > 0:
                line += (
                    " Both get worse: ranks that were distinct now share a level and split its "
                    "bandwidth fairly; how many groups collide is decided by the level split of "
                    "`echelon.quantize`."
                )
            else:
                line += " (Mixed effect; the level split of `echelon.quantize` decides it.)"
            out.append(line)
    return "\n".join(out)


def _cold_start(e: Mapping[str, Any], best: Mapping[str, Any]) -> str:
    """Whether a tail gap sits in the first iterations (all jobs of a closed batch start
    at t=0, so every job's first groups contend at once) or in the later ones."""
    keys = ("iter_first_mean", "iter_later_mean")
    if any(math.isnan(float(r.get(k, math.nan))) for r in (e, best) for k in keys):
        return ""
    first_gap = e["iter_first_mean"] / best["iter_first_mean"] - 1
    later_gap = e["iter_later_mean"] / best["iter_later_mean"] - 1
    text = (
        f" By iteration: first iterations average {fmt(e['iter_first_mean'])} s under "
        f"echelon vs {fmt(best['iter_first_mean'])} s under {best['policy']} "
        f"({pct(e['iter_first_mean'], best['iter_first_mean'])}), later ones "
        f"{fmt(e['iter_later_mean'])} s vs {fmt(best['iter_later_mean'])} s "
        f"({pct(e['iter_later_mean'], best['iter_later_mean'])})."
    )
    if first_gap > 0 and first_gap > later_gap:
        text += (
            " The tail is mostly the cold start: every job's first groups are released at "
            "t=0 and strict priority between groups serves them one after another, so the "
            "jobs ranked last in that round finish their first iteration late"
        )
        text += "; once the jobs are offset, echelon is ahead." if later_gap < 0 else "."
    return text


#: A run's row (a sweep row or a row averaged over seeds), as every eval table reads it.
Row = Mapping[str, Any]


def echelon_vs_best(rows: Sequence[Row], **same: Any) -> tuple[Row, Row, Row] | None:
    """Among the rows matching ``same`` (e.g. ``mix=..., levels=...``): echelon's row,
    the baseline with the best mean and the one with the best p99 iteration time
    (first in row order on ties); ``None`` if either side is missing."""
    group = [r for r in rows if all(r[k] == v for k, v in same.items())]
    e = next((r for r in group if r["policy"] == "echelon"), None)
    base = [r for r in group if r["policy"] != "echelon"]
    if e is None or not base:
        return None
    return e, min(base, key=lambda r: r["iter_mean"]), min(base, key=lambda r: r["iter_p99"])


#: Header of :func:`versus_cells` (with "mix" in front).
VERSUS_HEAD = ["mix", "echelon mean (s)", "best baseline mean", "echelon vs it",
               "echelon p99 (s)", "best baseline p99", "echelon vs it"]  # fmt: skip


def versus_cells(mix: str, e: Row, bm: Row, bp: Row) -> list[Any]:
    """One mix's row: echelon's mean and p99 against the best-mean and best-p99 baselines
    (what :func:`echelon_vs_best` found); the headline tables start with these."""
    return [
        mix,
        e["iter_mean"],
        f"{bm['policy']} {fmt(bm['iter_mean'])}",
        pct(e["iter_mean"], bm["iter_mean"]),
        e["iter_p99"],
        f"{bp['policy']} {fmt(bp['iter_p99'])}",
        pct(e["iter_p99"], bp["iter_p99"]),
    ]


def headline(batch: Sequence[Mapping[str, Any]], mixes: Sequence[str]) -> str:
    """One row per mix: echelon against the best baseline on mean and on p99."""
    k8s = {r["mix"]: r for r in batch if r["policy"] == "echelon" and r["levels"] == "K=8"}
    body = []
    for mix in mixes:
        found = echelon_vs_best(batch, mix=mix, levels="ideal")
        if found is None:
            continue
        e, bm, bp = found
        k8 = k8s.get(mix)
        body.append(
            [*versus_cells(mix, e, bm, bp), pct(k8["iter_mean"], e["iter_mean"]) if k8 else "–"]
        )
    return table([*VERSUS_HEAD, "echelon K=8 vs ideal (mean)"], body)
