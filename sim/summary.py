"""``sim run``'s summary as a table a person reads: labels, units, related numbers together.

Why: the run's summary is a 23-key dict (``SimResult.summary``) whose names
(``ecct_p99``, ``level_updates_per_s``) and bare floats say nothing without the
source at hand. ``--json`` still prints the dict, for programs. Keys this module
does not know (e.g. a coflow trace's options) are listed at the end as they are,
so nothing the summary holds is hidden.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sim.topology import NETWORK_DEFAULTS

#: (label, keys, unit) rows: the keys' values joined with " / "; unit "s", "ms", "x", "/s" or "".
ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("policy", ("policy",), ""),
    ("priority levels", ("levels",), ""),
    ("arrangement model", ("model",), ""),
    ("jobs finished", ("jobs_done",), ""),
    ("iterations finished", ("iterations_done",), ""),
    ("coflows", ("coflows",), ""),
    ("flows", ("flows",), ""),
    ("iteration time mean / p99", ("iter_mean", "iter_p99"), "s"),
    ("  first / later iterations (mean)", ("iter_first_mean", "iter_later_mean"), "s"),
    ("slowdown mean / p99", ("slowdown_mean", "slowdown_p99"), "x"),
    ("  per job min / max", ("job_slowdown_min", "job_slowdown_max"), "x"),
    ("EchelonFlow completion mean / p99", ("ecct_mean", "ecct_p99"), "s"),
    ("total tardiness", ("tardiness_total",), "s"),
    ("job completion time mean / p99", ("jct_mean", "jct_p99"), "s"),
    ("coflow completion mean / p50 / p95", ("avg_cct_ms", "p50_cct_ms", "p95_cct_ms"), "ms"),
    ("makespan (simulated)", ("makespan",), "s"),
    ("makespan (simulated)", ("makespan_s",), "s"),
    ("events", ("events",), ""),
    ("re-plans (total / per simulated s)", ("reranks", "reranks_per_s"), ""),
    ("policy calls", ("policy_calls",), ""),
    ("level updates (total / per simulated s)", ("level_updates", "level_updates_per_s"), ""),
    ("wall time", ("wall_s",), "s"),
)


def _value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value with unit) pairs for the keys present in ``summary``."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for label, keys, unit in ROWS:
        present = [k for k in keys if k in summary]
        if not present:
            continue
        seen.update(present)
        vals = [_value(summary[k]) for k in present]
        suffix = "" if not unit else ("x" if unit == "x" else f" {unit}")
        text = " / ".join(v if v == "n/a" else v + suffix for v in vals)
        out.append((label, text))
    for k, v in summary.items():
        if k not in seen:
            out.append((k, _value(v)))
    return out


def summary_table(summary: Mapping[str, Any], context: Sequence[tuple[str, str]] = ()) -> str:
    """The summary as aligned ``label  value`` lines, after ``context`` lines (what was
    simulated: network, jobs)."""
    rows = [*context, *summary_rows(summary)]
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def describe_network(spec: Mapping[str, Any]) -> str:
    """``leafspine, 4 leaves x 4 hosts, 2 spines, 100 Gbit/s host links, 2:1 uplinks``:
    a :func:`sim.topology.make_network` description in words, with that function's
    defaults for the keys it leaves out (so it names what is simulated)."""
    s = {**NETWORK_DEFAULTS, **spec}
    kind = str(s["kind"])
    if kind == "file":
        return f"topology file {s.get('path', '?')} (links unlimited)"
    parts = [kind]
    if kind == "leafspine":
        parts.append(f"{s['leaves']} leaves x {s['hosts_per_leaf']} hosts, {s['spines']} spines")
    elif kind == "fattree":
        parts.append(f"k={s['k']}")
    elif kind == "bigswitch":
        parts.append(f"{s['hosts']} hosts")
    parts.append(f"{_value(float(s['gbit']))} Gbit/s host links")
    if kind in ("leafspine", "fattree"):
        parts.append(f"{_value(float(s['oversubscription']))}:1 uplinks")
    return ", ".join(parts)
