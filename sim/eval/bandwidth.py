"""The network-bound regime: the closed-batch grid re-run at slower host links.

At the 100 Gbit/s of the main grid the `pipeline` mix is compute-bound (section 3:
every policy within a fraction of a percent), so it cannot show what an
EchelonFlow schedule buys pipeline jobs. This sweep keeps everything else fixed
(topology, 2:1 oversubscription, jobs, placement, seeds) and lowers the host-link
bandwidth to the NIC speeds of real V100 machines (listed below), so the same jobs
meet a slower network. Nothing here is tuned: the bandwidths come from the
machines listed, and the tables report whatever the runs produce.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sim.eval.experiments import NETWORK, POLICIES, Profile, batch_point, network_at
from sim.eval.report import echelon_vs_best, fmt, pct, table, versus_cells
from sim.points import Point
from sim.topology import NETWORK_DEFAULTS

#: Mixes swept (the ones made of pipeline-parallel jobs).
MIXES = ("pipeline", "hybrid")

#: Where each swept host-link bandwidth (Gbit/s) comes from. The models are V100
#: jobs (echelon/models.py), so the sources are V100 machines' NICs.
SOURCES: dict[float, str] = {
    100: "AWS p3dn.24xlarge (8x V100, 100 Gbit/s networking); the main grid's setting",
    25: "AWS p3.16xlarge (8x V100, 25 Gbit/s networking); 25 GbE is a common on-prem NIC",
    10: "AWS p3.8xlarge (4x V100, 10 Gbit/s networking); 10 GbE on-prem clusters",
    1: "1 GbE commodity Ethernet (older commodity clusters): a stress point below every "
    "V100 machine above, added after the 10 Gbit/s runs left the pipeline mix within a "
    "few percent of compute-bound; read it as where the pipeline jobs become "
    "network-bound, not as a deployment target",
}


def points(profile: Profile) -> list[Point]:
    """Closed batches (ideal ranks and K=8) for every swept bandwidth except the main
    grid's own, whose rows :func:`sim.eval.experiments.main_points` already produce."""
    return [
        batch_point(profile, mix, pol, levels, seed, network_at(gbit))
        for gbit in profile.bandwidths
        if gbit != NETWORK["gbit"]
        for mix in MIXES
        for pol in POLICIES
        for levels in (None, 8)
        for seed in profile.seeds
    ]


def gbit_of(row: Mapping[str, Any]) -> float:
    """A row's host-link bandwidth (Gbit/s), read back from its network JSON."""
    return float(json.loads(str(row["network"])).get("gbit", NETWORK_DEFAULTS["gbit"]))


def tag(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with their host-link bandwidth (``gbit``) read back from the network JSON."""
    return [{**r, "gbit": gbit_of(r)} for r in rows]


def policy_table(rows: Sequence[Mapping[str, Any]], mix: str, gbits: Sequence[float]) -> str:
    """Mean and p99 iteration time of every policy at every bandwidth (ideal ranks)."""
    idx = {(r["policy"], r["gbit"]): r for r in rows if r["mix"] == mix and r["levels"] == "ideal"}
    head = ["policy"]
    for g in gbits:
        head += [f"mean @{fmt(g)}G (s)", f"p99 @{fmt(g)}G (s)", f"slowdown @{fmt(g)}G"]
    body = []
    for p in POLICIES:
        cells: list[Any] = [f"**{p}**" if p == "echelon" else p]
        for g in gbits:
            r = idx.get((p, float(g)))
            cells += [r["iter_mean"], r["iter_p99"], r["slowdown_mean"]] if r else ["–"] * 3
        body.append(cells)
    return table(head, body)


def versus_table(
    rows: Sequence[Mapping[str, Any]], mixes: Sequence[str], gbits: Sequence[float]
) -> str:
    """Per (mix, bandwidth, levels): echelon against the best baseline on mean and p99.

    Like against like: the *K=8* rows compare with the baselines also mapped onto 8
    queues; the last column compares echelon on 8 queues with the best baseline given
    ideal ranks (an upper bound for what any baseline could do with unlimited queues).
    """
    body = []
    for mix in mixes:
        for g in gbits:
            for lv in ("ideal", "K=8"):
                found = echelon_vs_best(rows, mix=mix, gbit=g, levels=lv)
                if found is None:
                    continue
                e, bm, bp = found
                vs_ideal = "–"
                ideal = echelon_vs_best(rows, mix=mix, gbit=g, levels="ideal")
                if lv != "ideal" and ideal is not None:
                    bi = ideal[1]
                    vs_ideal = f"{pct(e['iter_mean'], bi['iter_mean'])} ({bi['policy']})"
                _, *versus = versus_cells(mix, e, bm, bp)
                body.append(
                    [mix, g, lv, *versus, e["slowdown_mean"], bm["slowdown_mean"], vs_ideal]
                )
    return table(
        ["mix", "Gbit/s", "ranks", "echelon mean (s)", "best baseline mean",
         "echelon vs it", "echelon p99 (s)", "best baseline p99", "echelon vs it",
         "echelon slowdown", "best-mean baseline slowdown", "mean vs best ideal-rank baseline"],
        body,
    )  # fmt: skip


def as_mixes(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows relabelled ``"<mix> @ <g> Gbit/s"`` so the per-mix analysis of
    :func:`sim.eval.report.analysis` can explain each bandwidth separately."""
    return [{**r, "mix": label(r["mix"], r["gbit"])} for r in rows]


def label(mix: str, gbit: float) -> str:
    return f"{mix} @ {fmt(float(gbit))} Gbit/s"


def sources_list(gbits: Sequence[float]) -> str:
    return "\n".join(f"* {fmt(float(g))} Gbit/s: {SOURCES.get(g, 'not sourced')}" for g in gbits)


def trend(rows: Sequence[Mapping[str, Any]], mixes: Sequence[str], gbits: Sequence[float]) -> str:
    """Per mix and rank mode: how echelon's slowdown and its gap to the best baseline
    (same rank mode) move as the links get slower -- computed, not written by hand."""
    out = []
    for mix in mixes:
        for lv, what in (("ideal", "ideal ranks"), ("K=8", "every policy on 8 queues")):
            parts = []
            for g in sorted(gbits, reverse=True):
                found = echelon_vs_best(rows, mix=mix, levels=lv, gbit=float(g))
                if found is None:
                    continue
                e, bm, bp = found
                parts.append(
                    f"{fmt(float(g))} Gbit/s: slowdown {fmt(e['slowdown_mean'])}x, mean "
                    f"{pct(e['iter_mean'], bm['iter_mean'])} vs {bm['policy']}, p99 "
                    f"{pct(e['iter_p99'], bp['iter_p99'])} vs {bp['policy']}"
                )
            if parts:
                out.append(
                    f"* `{mix}`, {what} (echelon vs the best baseline): " + "; ".join(parts) + "."
                )
    return "\n".join(out)
