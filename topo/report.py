"""The demo's comparison table and finish-time plot, from its formation reports."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sim.core.results import IterationRecord
from sim.eval.report import pct


def iteration_records(report: Mapping[str, Any]) -> list[IterationRecord]:
    """Every finished iteration of a formation report (``hostagent.report``), seconds
    from the shared start."""
    return [
        IterationRecord(job, int(r["iteration"]), float(r["start"]), float(r["end"]))
        for job, j in report.get("jobs", {}).items()
        for r in j.get("iterations", [])
        if r.get("start") is not None and r.get("end") is not None
    ]


def _fmt(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:6.3f}"


def table(results: dict[str, Any]) -> str:
    """Per job and policy: mean iteration time (actual, ideal), mean/max EchelonFlow
    completion time (ECT: from a group's reference time to its last flow's arrival),
    total lateness (sum over flows of how far past ``t_ref + A(j)`` they finished) and
    finish (the job's last arrival), all in seconds. Iteration time is what training
    feels; it is measured in closed loop only (n/a open loop)."""
    pols = list(results["policies"])
    w = max([len(p) for p in pols] + [8])
    lines = [f"{'job':<6} {'policy':<{w}} {'iter':>6} {'ideal':>6} {'ECT mean':>9} "
             f"{'ECT max':>8} {'lateness':>9} {'finish':>7}  complete   (all in s)"]  # fmt: skip
    jobs = sorted({j for r in results["policies"].values() for j in r["jobs"]})
    for job in jobs:
        for policy, r in results["policies"].items():
            j = r["jobs"].get(job, {})
            lines.append(f"{job:<6} {policy:<{w}} {_fmt(j.get('iteration_time_mean')):>6} "
                         f"{_fmt(j.get('iteration_time_ideal')):>6} {_fmt(j.get('ect_mean')):>9} "
                         f"{_fmt(j.get('ect_max')):>8} {_fmt(j.get('total_lateness')):>9} "
                         f"{_fmt(j.get('finish')):>7}  {j.get('complete')}")  # fmt: skip
    return "\n".join(lines)


#: The baselines every policy is compared with in the verdict, when they were played.
REFERENCES = ("fifo", "coflow")


def iteration_times(results: dict[str, Any]) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Jobs, and per policy the mean iteration time of each job that finished (the
    verdict's and :mod:`topo.summary`'s numbers)."""
    jobs = sorted({j for r in results["policies"].values() for j in r["jobs"]})
    times: dict[str, dict[str, float]] = {}
    for pol, r in results["policies"].items():
        times[pol] = {
            job: float(j["iteration_time_mean"])
            for job, j in r["jobs"].items()
            if j.get("complete") and j.get("iteration_time_mean") is not None
        }
    return jobs, times


def verdict_rows(results: dict[str, Any]) -> list[tuple[str, dict[str, float | None]]]:
    """Rows of the verdict: each job's mean iteration time per policy, then the mean
    over jobs and the slowest job (``None`` where a policy lacks a job's result: a
    summary over fewer jobs would not compare)."""
    jobs, times = iteration_times(results)
    rows: list[tuple[str, dict[str, float | None]]] = []
    for job in jobs:
        rows.append((job, {p: t.get(job) for p, t in times.items()}))
    whole = {p: (list(t.values()) if len(t) == len(jobs) else None) for p, t in times.items()}
    rows.append(("mean over jobs", {p: sum(v) / len(v) if v else None for p, v in whole.items()}))
    rows.append(("slowest job", {p: max(v) if v else None for p, v in whole.items()}))
    return rows


#: An agent is late when it released its first flow (one that waits on no other flow:
#: :func:`hostagent.report.first_flow_delays`) more than this fraction of its job's ideal
#: iteration time after the plan said, and at least :data:`LATE_MIN_S` after. A tenth
#: of an iteration shifts that agent's whole iteration by as much, which is of the
#: order of the differences the verdict compares.
LATE_FRACTION = 0.1
#: ... and never less than this: below it is a Python agent's timer and scheduling
#: jitter, which every run has (a job scaled to a 20 ms iteration would otherwise call
#: every run disturbed).
LATE_MIN_S = 0.005


def late_agents(delays: dict[str, dict[str, Any]]) -> list[str]:
    """One note per late agent (see :data:`LATE_FRACTION`), from ``agent_delays``."""
    out = []
    for host, d in sorted(delays.items()):
        late, ideal = float(d["late_s"]), float(d["ideal_iteration_s"])
        if late > max(LATE_FRACTION * ideal, LATE_MIN_S):
            out.append(
                f"agent {host} released its first flow of {d['job']} {late * 1e3:.0f} ms late "
                f"({late / ideal:.0%} of its {ideal:.3f} s ideal iteration; late: over "
                f"{LATE_FRACTION:.0%} and {LATE_MIN_S * 1e3:.0f} ms)"
            )
    return out


def disturbances(results: dict[str, Any]) -> dict[str, list[str]]:
    """Per policy, what the machine did to its run: packets lost at the switch's input
    (and the attempts played again), agents that stopped early, agents that started
    late (:func:`late_agents`). Why: on a loaded machine a run can measure the machine
    rather than the policy, and its numbers must say so."""
    out: dict[str, list[str]] = {}
    for pol, r in results["policies"].items():
        notes = []
        attempts = int(r.get("attempts", 1))
        if attempts > 1:
            losses = r.get("lost_packets_per_attempt", [])
            notes.append(f"played {attempts} times (packets lost: {losses})")
        if int(r.get("lost_packets", 0)):
            notes.append(f"{r['lost_packets']} packets lost in the run kept")
        if r.get("stalls"):
            notes.append(f"{len(r['stalls'])} agents stopped before the end")
        notes += late_agents(r.get("agent_delays", {}))
        if notes:
            out[pol] = notes
    return out


def verdict(results: dict[str, Any]) -> str:
    """The end-of-run verdict: mean iteration time per job (s) for every policy, the
    mean over jobs and the slowest job, the best of each row marked ``*``, then each
    policy's mean and slowest job against FIFO and Coflow (%, negative is faster), and
    the runs the machine disturbed."""
    pols = list(results["policies"])
    rows = verdict_rows(results)
    w = max([len(p) for p in pols] + [9])
    _, times = iteration_times(results)
    ideal = {
        job: j.get("iteration_time_ideal")
        for r in results["policies"].values()
        for job, j in r["jobs"].items()
    }
    lines = [
        "verdict: mean iteration time (s), lower is better; * best of the row; "
        "n/a: the policy's run did not finish that job",
        f"{'':<19} {'ideal':>6}  " + "  ".join(f"{p:>{w}}" for p in pols),
    ]
    for name, vals in rows:
        present = [v for v in vals.values() if v is not None]
        best = min(present) if present else None
        cells = []
        for p in pols:
            v = vals.get(p)
            cell = "n/a" if v is None else f"{v:.3f}" + (" *" if v == best else "  ")
            cells.append(f"{cell:>{w}}")
        i = ideal.get(name)
        lines.append(f"{name:<19} {'' if i is None else f'{i:6.3f}':>6}  " + "  ".join(cells))
    summary = dict(rows[-2:])
    for ref in REFERENCES:
        if ref not in pols:
            continue
        for label in ("mean over jobs", "slowest job"):
            base = summary[label].get(ref)
            cells = []
            for p in pols:
                cells.append(f"{pct(summary[label].get(p), base, 'n/a', ' %'):>{w}}")
            lines.append(f"{('vs ' + ref + ', ' + label.split()[0]):<19} {'':>6}  "
                         + "  ".join(cells))  # fmt: skip
    for pol, notes in disturbances(results).items():
        lines.append(f"note: {pol}'s run was disturbed: {'; '.join(notes)}")
    if any(len(t) == 0 for t in times.values()):
        lines.append("note: a policy with no finished job has no numbers; see the lines above")
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


def _has_results(results: dict[str, Any], pol: str) -> bool:
    """Whether any flow of ``pol``'s run arrived (a policy without results is drawn nowhere)."""
    return any(_points(results, pol, job) for job in results["policies"][pol]["jobs"])


def _iteration_bars(ax: Any, results: dict[str, Any], pols: list[str]) -> None:
    """Grouped bars: mean iteration time of each job under each policy, its value on
    the bar, the ideal iteration as a black tick over the group (closed loop only;
    n/a open loop). The legend sits below the panel, clear of the bars."""
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
            bars = ax.bar(x, value, width, color=f"C{k}", label=None if labelled else pol)
            ax.bar_label(bars, fmt="%.3f", fontsize=7, rotation=90, padding=2)
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
    if measured:
        ax.set_ylim(top=ax.get_ylim()[1] * 1.2)  # room for the values on the bars
    ax.set_ylabel("mean iteration time (s)")
    ax.set_title(
        "mean iteration time per job (lower is better)"
        if measured
        else "iteration time: closed loop only (n/a)"
    )
    ax.grid(alpha=0.3, axis="y")
    if measured:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)


#: Panels per row of the plot's grid.
GRID_COLUMNS = 3


def plot_finish_times(results: dict[str, Any], path: Path) -> Any:
    """A grid: first each job's iteration time per policy (the verdict), then one panel
    per policy with results: actual vs ideal finish of every flow, the diagonal
    (actual = ideal, on time) labelled, the legend in the empty lower right (no flow
    finishes before its ideal). A policy without results is drawn nowhere (the title
    names it). A network-bound job (:func:`network_bound`) is warned about on stderr
    and switches the scatter panels to log axes, where its points stay apart. Returns
    the (closed) matplotlib figure, for inspection."""
    import matplotlib.pyplot as plt

    from sim.eval.figures import save_figure  # (importing it selects the Agg backend)

    warnings = network_bound(results)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr, flush=True)
    log = bool(warnings)
    pols = [p for p in results["policies"] if _has_results(results, p)]
    missing = [p for p in results["policies"] if p not in pols]
    n = len(pols) + 1
    cols = min(GRID_COLUMNS, n)
    rows = -(-n // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(4.6 * cols, 4.4 * rows), squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[n:]:
        fig.delaxes(ax)
    _iteration_bars(axes[0], results, pols)
    jobs = sorted({j for p in pols for j in results["policies"][p]["jobs"]})
    pts_all = [pt for p in pols for j in jobs for pt in _points(results, p, j)]
    positive = [v for pt in pts_all for v in pt if v > 0]
    top = max([*positive, 1e-3])
    low = min(positive) / 2 if positive else top / 1e3
    for ax, pol in zip(axes[1:n], pols, strict=True):
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
        ax.set_ylabel("actual finish (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    title = "make run: iteration time per policy, and each flow's finish against its ideal"
    if missing:
        title += f"\nno results (not drawn): {', '.join(missing)}"
    fig.suptitle(title, fontsize=11)
    save_figure(fig, path)
    return fig
