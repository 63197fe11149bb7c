"""The interleaving scenarios on the emulated network, in steady state.

    sudo .venv/bin/python -m topo.run --scenario compatible-2 [--policies fair,echelon-online,...]
                                      [--horizon 20] [--scale 0.25] [--target soft|bmv2]

Why this exists: the simulator's interleaving scenarios (:mod:`sim.eval.interleave`:
2-host ring all-reduce jobs through ``h0`` whose communication fits into each other's
compute, or does not) say which policies let compatible jobs run at their
contention-free speed. This plays the same jobs -- the simulator's own descriptions,
written into the run folder as job files and scaled by ``--scale`` -- on
``topo/interleave.yaml`` (hosts h0..h3 at 9 Mbit/s: the simulator's 1 MB/s plus
headers and the closed loop's per-step latency, so a job alone takes the simulator's
time), and
measures them by the simulator's steady-state rules (:mod:`sim.eval.steady`, imported):

1. each job **alone** for :data:`sim.eval.steady.ALONE_ITERATIONS` iterations: its
   contention-free time ``c_j`` (:func:`sim.eval.steady.alone_mean`);
2. every job together under each policy, all starting at the same instant, for enough
   iterations that each is still iterating at the horizon ``H = --horizon × max c_j``;
   the window, each job's steady iteration time and its slowdown are
   :func:`sim.eval.steady.measure_iterations` on the iterations' ends (seconds from
   the shared start);
3. the simulator's slowdown for the same scenario and policy beside each job's.

By default every planned policy plays *online* (``NAME-online``: the controller
re-plans from the agents' progress reports), because the simulator re-plans at every
group event (:func:`default_policies` says what the registration plan alone does).

``fair`` is every flow on one switch level (:mod:`topo.fairlevel`: the controller
refuses per-flow fair sharing). The hosts' own uplinks have no priorities in the
emulation (a host shares its NIC round-robin between flows), while the simulator
prioritises every link: h0's uplink carries every job's traffic, so the emulation's
policies act on h0's downlink only. ``--topo topo/interleave-uplink.yaml`` lets h0 send
faster than its peers' links take, which removes that contention (docs/measurements/demo.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from echelon.errors import EchelonError
from echelon.jobs import JobSpec
from sim.eval import interleave, steady
from sim.eval.experiments import POLICIES as SIM_POLICIES
from topo.report import iteration_records

TOPO = "topo/interleave.yaml"
#: Sizes and compute times multiplied by this: compatible-2 alone then iterates in
#: ~0.9 s on the 9 Mbit/s links, and 20 horizons' worth of iterations take ~25 s.
DEFAULT_SCALE = 0.25
FAIR = "fair"
#: What the controller installs for ``fair`` (module docstring).
FAIR_PLUGIN = "topo.fairlevel:OneLevelFair"
#: ``NAME-online``: policy NAME re-planned online from the agents' progress reports
#: (docs/controller.md, "Online re-planning"); ``NAME`` alone is the registration plan.
ONLINE_SUFFIX = "-online"
#: ``play(specs, iterations, out_dir, policy)``: one closed-loop run's formation report.
Play = Callable[[Sequence[JobSpec], int, Path, str], dict[str, Any]]


def default_policies(planned: Sequence[str]) -> tuple[str, ...]:
    """What a scenario plays without ``--policies``: ``fair`` and every planned policy
    re-planned online. Why online: the simulator re-plans at every group release and
    finish, and so must the emulation to play the same policy. The registration plan
    alone (the policy's name without the suffix) fixes one level per group for good,
    which on compatible-3 puts two jobs on one level and keeps them colliding every
    other iteration (docs/measurements/demo.md)."""
    return (FAIR, *(p + ONLINE_SUFFIX for p in planned))


def base_policy(policy: str) -> str:
    """The policy a ``--policies`` entry plays (``NAME-online`` -> ``NAME``): what the
    controller installs, and the simulator's policy of that name (it always re-plans)."""
    return policy.removesuffix(ONLINE_SUFFIX)


def policy_dir(policy: str) -> str:
    """A folder name for ``policy`` (a ``module:Class`` reference has a colon)."""
    return policy.replace(":", "_").replace("/", "_")


def controller_policy(policy: str) -> str:
    """The name the controller installs for ``policy`` (``fair`` -> :data:`FAIR_PLUGIN`)."""
    return FAIR_PLUGIN if policy == FAIR else policy


def write_job_files(scenario: interleave.Scenario, folder: Path) -> list[str]:
    """The scenario's jobs (the simulator's descriptions) as job files in ``folder``,
    for ``topo.run``'s loader and for replaying a job by hand with ``--jobs``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for desc in interleave.descriptions(scenario):
        path = folder / f"{scenario.key}-{desc['job']}.yaml"
        path.write_text(yaml.safe_dump(desc, sort_keys=False))
        paths.append(str(path))
    return paths


def steady_iterations(alone: Mapping[str, float], horizon_c: float) -> tuple[float, int]:
    """The horizon ``H`` (s) and the iterations every job plays so that even the
    fastest one, at its contention-free speed, is still iterating at ``H``."""
    horizon = horizon_c * max(alone.values())
    return horizon, math.ceil(horizon / min(alone.values())) + 1


def play_steady(
    play: Play,
    specs: Sequence[JobSpec],
    scenario: interleave.Scenario,
    policies: Sequence[str],
    horizon_c: float,
    out: Path,
) -> dict[str, Any]:
    """Alone runs, then every policy's steady run; the numbers of the module docstring."""
    alone: dict[str, float] = {}
    for spec in specs:
        rep = play([spec], steady.ALONE_ITERATIONS, out / f"alone-{spec.job_id}", FAIR)
        times = sorted((r for r in iteration_records(rep) if r.job == spec.job_id),
                       key=lambda r: r.iteration)  # fmt: skip
        if len(times) < steady.ALONE_ITERATIONS:
            raise EchelonError(f"job {spec.job_id} alone: {len(times)} of "
                               f"{steady.ALONE_ITERATIONS} iterations ended; see "
                               f"{out / f'alone-{spec.job_id}'}")  # fmt: skip
        alone[spec.job_id] = steady.alone_mean([r.duration for r in times])
        print(f"*** {spec.job_id} alone: {alone[spec.job_id]:.3f} s per iteration", flush=True)
    horizon, n = steady_iterations(alone, horizon_c)
    print(f"*** steady runs: {n} iterations per job, horizon {horizon:.1f} s", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    for policy in policies:
        rep = play(specs, n, out / policy_dir(policy), policy)
        records = iteration_records(rep)
        row = steady.measure_iterations(records, alone, horizon)
        for j, v in row["jobs"].items():  # the series behind the number, for a reader
            v["ends_s"] = sorted(round(r.end, 4) for r in records if r.job == j)
        row["complete"] = all(a["complete"] for a in rep.get("agents", {}).values())
        row["lost_packets"] = int(rep.get("lost_packets", 0))
        row["attempts"] = int(rep.get("attempts", 1))
        rows[policy] = row
        per_job = [f"{j} {v['steady_s']:.3f} s ({v['slowdown']:.3f}×)"
                   for j, v in row["jobs"].items()]  # fmt: skip
        print(f"*** {policy}: " + ", ".join(per_job), flush=True)
    sim = {p: interleave.run(scenario, base_policy(p)) for p in policies
           if base_policy(p) in SIM_POLICIES}  # fmt: skip
    return {
        "scenario": scenario.key,
        "title": scenario.title,
        "compatible": scenario.compatible,
        "horizon_c": horizon_c,
        "horizon_s": horizon,
        "iterations": n,
        "alone_s": alone,
        "policies": rows,
        "sim": {p: {j: v["slowdown"] for j, v in r["jobs"].items()} for p, r in sim.items()},
    }


def markdown(result: Mapping[str, Any], header: Mapping[str, Any]) -> str:
    """The report: per policy and job the emulated steady time, its slowdown against
    contention-free, and the simulator's slowdown for the same scenario."""
    jobs = list(result["alone_s"])
    lines = [
        f"# Interleaving in the emulation: {result['scenario']} ({result['title']})",
        "",
        f"`{header.get('command', '')}`; target {header.get('target')}, scale "
        f"{header.get('scale')}, each host paced at its link's rate or "
        f"{header.get('rate_mbit')} Mbit/s, the lower.",
        "",
        "Contention-free (each job alone, mean of iterations 2-"
        f"{steady.ALONE_ITERATIONS}): "
        + ", ".join(f"{j} {c:.3f} s" for j, c in result["alone_s"].items())
        + f". Steady runs: {result['iterations']} iterations per job, horizon "
        f"{result['horizon_s']:.1f} s ({result['horizon_c']:g} × the largest), window "
        "as in sim.eval.steady. `fair` = every flow on one switch level (topo.fairlevel).",
        "",
        "Per job: emulated steady iteration (s) / slowdown against contention-free / "
        "the simulator's slowdown.",
        "",
        "| policy | " + " | ".join(jobs) + " | worst job | lost packets |",
        "| --- | " + " | ".join("---:" for _ in jobs) + " | ---: | ---: |",
    ]
    for policy, row in result["policies"].items():
        sim = result["sim"].get(policy, {})
        cells = []
        for j in jobs:
            v = row["jobs"][j]
            s = f"{sim[j]:.3f}×" if j in sim else "n/a"
            cells.append(f"{v['steady_s']:.3f} / {v['slowdown']:.3f}× / {s}")
        flag = "" if row["complete"] else " (incomplete)"
        lines.append(f"| {policy}{flag} | " + " | ".join(cells)
                     + f" | {row['worst_slowdown']:.3f}× | {row['lost_packets']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def write(results: Mapping[str, Any], out: Path) -> list[str]:
    """``interleave-results.json`` and ``interleave.md`` in ``out``; the policies whose
    runs did not complete."""
    result = results["interleave"]
    (out / "interleave-results.json").write_text(json.dumps(results, indent=1))
    md = markdown(result, results)
    (out / "interleave.md").write_text(md)
    print(md)
    print(f"*** wrote {out / 'interleave.md'} and {out / 'interleave-results.json'}")
    return [p for p, r in result["policies"].items() if not r["complete"]]
