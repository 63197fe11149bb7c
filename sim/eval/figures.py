"""Plots of the evaluation (matplotlib, Agg backend, PNG files)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from sim.core.results import SimResult

_JOB_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


def save_figure(fig: Any, path: Path) -> Path:
    """Every figure's ending, the evaluation's and the emulation's (``topo.report``,
    ``topo.queuedepth``): laid out, written at 110 dpi into ``path``'s folder (created
    if needed), closed (pyplot keeps open figures alive)."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def timeline(results: Mapping[str, SimResult], title: str, path: Path) -> Path:
    """One panel per policy: compute tasks per host and flows per group, over time.

    A flow is drawn from its release to its finish; the black tick is its ideal
    finish ``t_ref + A(j)``.
    """
    policies = list(results)
    first = results[policies[0]]
    jobs = sorted({r.job for r in first.iterations})
    color = {j: _JOB_COLORS[i % len(_JOB_COLORS)] for i, j in enumerate(jobs)}
    hosts = sorted({t.host for r in results.values() for t in r.tasks})
    groups = sorted({(f.job, f.group) for r in results.values() for f in r.flows})
    lanes = [f"{h} compute" for h in hosts] + [f"{j} {g}" for j, g in groups]
    end = max(r.end_time for r in results.values())
    fig, axes = plt.subplots(
        len(policies),
        1,
        figsize=(10, 1.0 + 0.42 * len(lanes) * len(policies)),
        sharex=True,
        squeeze=False,
    )
    for ax, pol in zip(axes[:, 0], policies, strict=True):
        res = results[pol]
        for t in res.tasks:
            y = lanes.index(f"{t.host} compute")
            ax.barh(
                y,
                t.end - t.start,
                left=t.start,
                height=0.6,
                color=color[t.job],
                edgecolor="black",
                linewidth=0.4,
            )
        for f in res.flows:
            y = lanes.index(f"{f.job} {f.group}")
            off = (f.index % 4) * 0.15 - 0.22
            ax.barh(
                y + off,
                f.finish - f.release,
                left=f.release,
                height=0.13,
                color=color[f.job],
                alpha=0.8,
            )
            ax.plot([f.ideal, f.ideal], [y + off - 0.08, y + off + 0.08], color="black", lw=1)
        iters = ", ".join(f"{r.job} {r.duration:.2f}s" for r in res.iterations)
        ax.set_title(f"{pol}: iteration {iters}", fontsize=9, loc="left")
        ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, end * 1.02)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(
        "time (s); bars: compute tasks / flows (release→finish); ticks: ideal finish"
    )
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def policy_bars(
    rows: Sequence[Mapping[str, Any]], mixes: Sequence[str], policies: Sequence[str], path: Path
) -> Path:
    """Mean and p99 iteration time per policy, normalised to the echelon policy, per mix."""
    fig, axes = plt.subplots(1, len(mixes), figsize=(3.2 * len(mixes), 3.2), squeeze=False)
    for ax, mix in zip(axes[0], mixes, strict=True):
        sel = {r["policy"]: r for r in rows if r["mix"] == mix}
        base = sel.get("echelon")
        if base is None:
            continue
        xs = range(len(policies))
        mean = [sel[p]["iter_mean"] / base["iter_mean"] if p in sel else math.nan for p in policies]
        p99 = [sel[p]["iter_p99"] / base["iter_p99"] if p in sel else math.nan for p in policies]
        ax.bar([x - 0.2 for x in xs], mean, width=0.4, label="mean")
        ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xticks(list(xs), policies, rotation=60, fontsize=8)
        ax.set_title(mix, fontsize=9)
        ax.set_ylabel("iteration time / echelon's", fontsize=8)
    axes[0, 0].legend(fontsize=8)
    return save_figure(fig, path)


def load_lines(
    rows: Sequence[Mapping[str, Any]], mix: str, policies: Sequence[str], metric: str, path: Path
) -> Path:
    """``metric`` against offered load, one line per policy."""
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for pol in policies:
        pts = sorted(
            (float(r["load"]), r[metric])
            for r in rows
            if r["mix"] == mix and r["policy"] == pol and r["load"] != "batch"
        )
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=pol)
    ax.set_xlabel("offered load")
    ax.set_ylabel(metric)
    ax.set_title(f"{mix}: {metric} vs load", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def scale_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for pol in sorted({r["policy"] for r in rows}):
        pts = sorted((r["flows"], r["wall_s"]) for r in rows if r["policy"] == pol)
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker="o", label=pol)
    ax.set_xlabel("flows simulated")
    ax.set_ylabel("wall-clock seconds")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def bandwidth_lines(
    rows: Sequence[Mapping[str, Any]],
    mixes: Sequence[str],
    policies: Sequence[str],
    path: Path,
) -> Path:
    """Mean (top) and p99 (bottom) iteration time against host-link bandwidth, one line
    per policy and one column per mix; both axes logarithmic (the bandwidths span 100x)."""
    fig, axes = plt.subplots(2, len(mixes), figsize=(5.2 * len(mixes), 7), squeeze=False)
    gbits = sorted({float(r["gbit"]) for r in rows})
    for col, mix in enumerate(mixes):
        for row, (metric, what) in enumerate((("iter_mean", "mean"), ("iter_p99", "p99"))):
            ax = axes[row, col]
            for pol in policies:
                pts = sorted(
                    (float(r["gbit"]), float(r[metric]))
                    for r in rows
                    if r["mix"] == mix and r["policy"] == pol and r["levels"] == "ideal"
                )
                if pts:
                    style = {"lw": 2.4, "color": "black"} if pol == "echelon" else {"lw": 1.0}
                    ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                              label=pol, **style)  # fmt: skip
            ax.set_xticks(gbits, [f"{g:g}" for g in gbits])
            ax.xaxis.set_minor_locator(NullLocator())
            # log y with readable labels at 1, 2, 3, 5 x 10^k (plain numbers, no 10^k)
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("host link (Gbit/s), 2:1 oversubscribed uplinks", fontsize=8)
            ax.set_ylabel(f"{what} iteration time (s)", fontsize=8)
            ax.set_title(f"{mix}: {what} iteration time vs bandwidth", fontsize=9)
            ax.grid(alpha=0.3, which="both")
    axes[0, 0].legend(fontsize=7)
    return save_figure(fig, path)
