"""The demo's comparison table and finish-time plot."""

from __future__ import annotations

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


def plot_finish_times(results: dict[str, Any], path: Path) -> None:
    """One panel per policy: actual vs ideal finish of every flow (y = x is on time)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pols = list(results["policies"])
    fig, axes = plt.subplots(1, len(pols), figsize=(4.5 * len(pols), 4.2), squeeze=False)
    top = 0.0
    for ax, pol in zip(axes[0], pols, strict=True):
        for job, marker in zip(sorted(results["policies"][pol]["jobs"]), "os^v", strict=False):
            pts = [(f["ideal"], f["actual"])
                   for e in results["policies"][pol]["jobs"][job]["echelons"]
                   for f in e["flows"] if f["actual"] is not None]  # fmt: skip
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.scatter(xs, ys, marker=marker, s=18, label=job)
                top = max(top, *xs, *ys)
        ax.set_title(pol)
        ax.set_xlabel("ideal finish t_ref + A(j) (s)")
        ax.grid(alpha=0.3)
        ax.legend()
    for ax in axes[0]:
        ax.plot([0, top], [0, top], "k--", lw=0.8)
        ax.set_xlim(0, top * 1.05)
        ax.set_ylim(0, top * 1.05)
    axes[0][0].set_ylabel("actual finish (s)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
