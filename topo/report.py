"""The demo's comparison table and finish-time plot."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def _fmt(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:6.3f}"


def table(results: dict[str, Any]) -> str:
    """Per job and policy: mean iteration time (actual, ideal), mean/max EchelonFlow
    completion time, total lateness, finish (s). Iteration time is what training
    feels; it is measured in closed loop only (n/a open loop)."""
    lines = [f"{'job':<6} {'policy':<8} {'iter':>6} {'ideal':>6} {'ECT mean':>9} {'ECT max':>8} "
             f"{'lateness':>9} {'finish':>7}  complete"]  # fmt: skip
    jobs = sorted({j for r in results["policies"].values() for j in r["jobs"]})
    for job in jobs:
        for policy, r in results["policies"].items():
            j = r["jobs"].get(job, {})
            lines.append(f"{job:<6} {policy:<8} {_fmt(j.get('iteration_time_mean')):>6} "
                         f"{_fmt(j.get('iteration_time_ideal')):>6} {_fmt(j.get('ect_mean')):>9} "
                         f"{_fmt(j.get('ect_max')):>8} {_fmt(j.get('total_lateness')):>9} "
                         f"{_fmt(j.get('finish')):>7}  {j.get('complete')}")  # fmt: skip
    return "\n".join(lines)


#: A job is network-bound when its largest ideal finish is below this fraction of its
#: largest actual finish: on linear axes its points then sit in the leftmost sliver.
NETWORK_BOUND_RATIO = 0.1


def _points(results: dict[str, Any], pol: str, job: str) -> list[tuple[float, float]]:
    jobs = results["policies"][pol]["jobs"]
    return [
        (float(f["ideal"]), float(f["actual"]))
        for e in jobs.get(job, {}).get("echelons", [])
        for f in e["flows"]
        if f.get("actual") is not None and f.get("ideal") is not None
    ]


def network_bound(results: dict[str, Any]) -> list[str]:
    """One warning per job whose ideal finish times are near 0 next to its actual ones
    (over all policies): the network, not the compute plan, sets its pace, so on
    linear axes its points collapse to x = 0."""
    out = []
    pols = list(results["policies"])
    jobs = sorted({j for p in pols for j in results["policies"][p]["jobs"]})
    for job in jobs:
        pts = [pt for p in pols for pt in _points(results, p, job)]
        if not pts:
            continue
        ideal, actual = max(x for x, _ in pts), max(y for _, y in pts)
        if actual > 0 and ideal < NETWORK_BOUND_RATIO * actual:
            out.append(
                f"job {job} is network-bound: its ideal finish times (max {ideal:.3g} s) "
                f"are under {NETWORK_BOUND_RATIO:.0%} of its actual ones (max {actual:.3g} s); "
                f"the finish-time plot uses log axes"
            )
    return out


def _iteration_bars(ax: Any, results: dict[str, Any]) -> None:
    """Grouped bars: mean iteration time of each job under each policy, the ideal
    iteration as a black tick over the group (closed loop only; n/a open loop)."""
    pols = list(results["policies"])
    jobs = sorted({j for p in pols for j in results["policies"][p]["jobs"]})
    width = 0.8 / max(1, len(pols))
    measured = False
    for k, pol in enumerate(pols):
        labelled = False
        for i, job in enumerate(jobs):
            j = results["policies"][pol]["jobs"].get(job, {})
            x = i - 0.4 + width * (k + 0.5)
            value = j.get("iteration_time_mean")
            if value is None:
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
                continue
            measured = True
            ax.bar(x, value, width, color=f"C{k}", label=None if labelled else pol)
            labelled = True
    ideal_shown = False
    for i, job in enumerate(jobs):
        ideals = [
            results["policies"][p]["jobs"].get(job, {}).get("iteration_time_ideal") for p in pols
        ]
        ideal = next((v for v in ideals if v is not None), None)
        if ideal is not None:
            ax.hlines(
                ideal,
                i - 0.45,
                i + 0.45,
                colors="k",
                lw=1.5,
                label="_ideal" if ideal_shown else "ideal iteration",
            )
            ideal_shown = True
    ax.set_xticks(range(len(jobs)), jobs)
    ax.set_ylim(bottom=0)  # bars start at 0, and the n/a labels sit there
    ax.set_ylabel("mean iteration time (s)")
    ax.set_title(
        "iteration time per policy" if measured else "iteration time: closed loop only (n/a)"
    )
    ax.grid(alpha=0.3, axis="y")
    if measured:
        ax.legend(fontsize=8)


def plot_finish_times(results: dict[str, Any], path: Path) -> Any:
    """One panel per policy: actual vs ideal finish of every flow, the diagonal
    (actual = ideal, on time) labelled; a last panel: each job's iteration time per
    policy. A network-bound job (:func:`network_bound`) is warned about on stderr and
    switches the scatter panels to log axes, where its points stay apart. Returns the
    (closed) matplotlib figure, for inspection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    warnings = network_bound(results)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr, flush=True)
    log = bool(warnings)
    pols = list(results["policies"])
    n = len(pols) + 1
    fig, axes = plt.subplots(1, n, figsize=(4.5 * n, 4.2), squeeze=False)
    jobs = sorted({j for p in pols for j in results["policies"][p]["jobs"]})
    pts_all = [pt for p in pols for j in jobs for pt in _points(results, p, j)]
    positive = [v for pt in pts_all for v in pt if v > 0]
    top = max([*positive, 1e-3])
    low = min(positive) / 2 if positive else top / 1e3
    for ax, pol in zip(axes[0], pols, strict=False):
        for job, marker in zip(jobs, "os^vDP*X", strict=False):
            pts = _points(results, pol, job)
            if pts:
                xs, ys = zip(
                    *[(max(x, low), max(y, low)) if log else (x, y) for x, y in pts], strict=True
                )
                ax.scatter(xs, ys, marker=marker, s=18, label=job)
        lo = low if log else 0.0
        ax.plot([lo, top], [lo, top], "k--", lw=0.8, label="actual = ideal (on time)")
        mid = (lo * top) ** 0.5 if log else top / 2  # the middle of the diagonal as drawn
        ax.annotate(
            "actual = ideal",
            xy=(mid, mid),
            xytext=(6, -10),
            textcoords="offset points",
            ha="left",
            fontsize=8,
        )
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(lo, top * 1.5)
            ax.set_ylim(lo, top * 1.5)
        else:
            ax.set_xlim(0, top * 1.05)
            ax.set_ylim(0, top * 1.05)
        ax.set_title(f"{pol} (log axes)" if log else pol)
        ax.set_xlabel("ideal finish t_ref + A(j) (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("actual finish (s)")
    _iteration_bars(axes[0][-1], results)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig
