"""The contending demo jobs of ``make run``: job-description files, scaled down.

The jobs are ordinary paradigm job descriptions (``topo/jobs/*.yaml``, the
:func:`echelon.jobs.load_job` format): a GPipe pipeline h1 -> h4, a
parameter-server data-parallel job (PS h2, workers h3, h4) whose layer-wise
pull to h4 meets the pipeline's activations at h4's bottleneck, and ``big`` (PS h3,
worker h4, two large layers), whose pull makes the best order at h4 change as groups
come and go. Their EchelonFlows come from the paradigm builders, like any job's;
nothing here builds flows by hand.

**One scale factor.** The files describe the jobs at their own scale (hundreds
of kB per tensor, 0.1-0.4 s per compute step). The demo multiplies every size
(``*_bytes``) *and* every compute duration (``*_s``) by ``scale`` (default
:data:`DEFAULT_SCALE`). On the same network that shrinks the whole timeline by
``scale`` and keeps the ratio of compute to transfer time, so a run takes
seconds instead of minutes. It changes bytes per flow, not packets per second:
the soft switch (~20-30 kpps) only ever sees the hosts' pacing rate. The scaled
description is what the controller registers, so the deadlines on the wire
(``A(j)`` in µs) and the switch's deadline ranges agree.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from echelon.constants import ECHELON_HEADER_LEN, PACKET_HEADER_LEN
from echelon.errors import SpecError
from echelon.jobs import JobSpec, load_job
from echelon.schedule import Network
from echelon.specs import read_file
from echelon.topology import Topology

ROOT = Path(__file__).resolve().parents[1]
#: The demo's jobs (``make run``, and ``topo.run`` without ``--jobs``).
JOB_FILES = ("topo/jobs/pipe.yaml", "topo/jobs/dp.yaml", "topo/jobs/big.yaml")
#: Sizes and compute durations are multiplied by this (see the module docstring).
DEFAULT_SCALE = 0.1
#: Seconds one policy's run may take on the emulated links before ``topo.run`` scales
#: the jobs down to fit (the stock demo needs ~2 s; ``echelon job --model gpt2-xl
#: --pp 4`` at scale 0.1 about 30 s, which makes a four-policy run a few minutes).
DEFAULT_BUDGET_S = 20.0


def wire_factor(packet_bytes: int) -> float:
    """Bytes on the wire per byte of a flow: a packet of ``packet_bytes``
    (:mod:`topo.agents`) carries all but the echelon header of it as the flow's data,
    and :data:`echelon.constants.PACKET_HEADER_LEN` of headers (Ethernet, IPv4, UDP,
    echelon), the overhead the cross-check's models count too."""
    payload = packet_bytes - ECHELON_HEADER_LEN
    return (payload + PACKET_HEADER_LEN) / payload


@dataclass(frozen=True)
class Estimate:
    """How long a run of the jobs takes at its bottleneck, from their plans alone.

    ``link`` is the link of the paced network that the jobs' bytes keep busy longest
    in one iteration of every job, ``busy_s`` that time (on the wire, headers
    included); ``ideal_s`` the longest contention-free iteration among the jobs. One
    iteration cannot take less than either, so ``iterations * max(busy_s, ideal_s)``
    is what one policy's run takes at the least, and ``iterations * (busy_s +
    ideal_s)`` a bound no sane policy exceeds (every byte of the bottleneck after
    every compute step).
    """

    link: str
    link_mbit: float
    busy_s: float
    ideal_s: float
    iterations: int

    @property
    def run_s(self) -> float:
        return self.iterations * max(self.busy_s, self.ideal_s)

    @property
    def worst_s(self) -> float:
        return self.iterations * (self.busy_s + self.ideal_s)

    def as_json(self) -> dict[str, Any]:
        """The bottleneck and its times, as a run's results and each policy's report
        store them (each adds what it derived: the run's length, the agents' timeouts)."""
        return {"link": self.link, "link_mbit": self.link_mbit, "busy_s": self.busy_s,
                "ideal_s": self.ideal_s}  # fmt: skip


def estimate(
    specs: Sequence[JobSpec], network: Network, iterations: int, packet_bytes: int
) -> Estimate:
    """The :class:`Estimate` of playing ``iterations`` of every job on ``network``."""
    load: dict[str, float] = {}
    for spec in specs:
        for ef in spec.plan().echelons:
            for f in ef.flows:
                for link in network.path(f.src, f.dst):
                    load[link] = load.get(link, 0.0) + f.size
    cap = network.links
    link = max(load, key=lambda x: load[x] / cap[x], default="")
    busy = load[link] / cap[link] * wire_factor(packet_bytes) if link else 0.0
    ideal = max((s.ideal_iteration_s or 0.0 for s in specs), default=0.0)
    mbit = cap[link] * 8 / 1e6 if link else 0.0
    return Estimate(link, mbit, busy, ideal, iterations)


def fit_to_budget(est: Estimate, scale: float, budget_s: float) -> float:
    """The scale at which ``est`` (made at ``scale``) fits ``budget_s``: ``scale`` when it
    already does or ``budget_s`` is 0, else ``scale`` shrunk in proportion (sizes and
    durations scale together, so the run's time does; module docstring)."""
    if budget_s <= 0 or est.run_s <= budget_s:
        return scale
    return scale * budget_s / est.run_s


@dataclass(frozen=True)
class DemoJob:
    """A job as registered: the scaled description (sent to the controller) and its spec."""

    path: str
    description: dict[str, Any]
    spec: JobSpec


def scale_description(desc: Any, scale: float) -> Any:
    """``desc`` with every ``*_bytes`` (rounded, >= 1) and ``*_s`` value multiplied by ``scale``.

    Why by field name: the job format's convention is that sizes end in
    ``_bytes`` and durations in ``_s`` (``echelon.specs``), in every
    paradigm, so one rule scales any of them without knowing its schema.
    """
    if isinstance(desc, Mapping):
        out: dict[str, Any] = {}
        for k, v in desc.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                if str(k).endswith("_bytes") and v > 0:
                    v = max(1, round(v * scale))
                elif str(k).endswith("_s"):
                    v = round(v * scale, 9)
            out[k] = scale_description(v, scale)
        return out
    if isinstance(desc, list):
        return [scale_description(v, scale) for v in desc]
    return desc


def load_demo_jobs(
    paths: Sequence[str], scale: float, known_hosts: Collection[str]
) -> list[DemoJob]:
    """Read, scale and validate the job files (errors name the file and field)."""
    if not scale > 0:
        raise SpecError("scale", f"must be positive, got {scale}")
    jobs: list[DemoJob] = []
    for p in paths:
        path = Path(p) if Path(p).is_absolute() or Path(p).exists() else ROOT / p
        try:
            raw = read_file(path)
        except SpecError as exc:  # named as given, not as resolved under the repository
            raise SpecError(str(p), exc.message) from None
        if not isinstance(raw, Mapping):
            raise SpecError(str(p), "must be a job description (a mapping)")
        desc = scale_description(raw, scale)
        try:
            spec = load_job(desc, known_hosts)
        except SpecError as exc:
            raise SpecError(f"{p}: {exc.field}", exc.message) from None
        if any(j.spec.job_id == spec.job_id for j in jobs):
            raise SpecError(f"{p}: job", f"duplicate job {spec.job_id!r}")
        jobs.append(DemoJob(str(p), desc, spec))
    if not jobs:
        raise SpecError("jobs", "no job files given")
    return jobs


def specs_from_results(results: Mapping[str, Any]) -> list[JobSpec]:
    """The (scaled) job specs a ``demo-results.json`` was run with."""
    descs = results.get("jobs")
    if not isinstance(descs, list) or not descs:
        raise SpecError("jobs", "results hold no job descriptions (not from python -m topo.run?)")
    return [load_job(d) for d in descs]


def group_table(results: Mapping[str, Any]) -> str:
    """Mean EchelonFlow completion time per (job, group) and policy, over iterations.

    Why next to the per-job table: a job's mean mixes groups the switch can
    prioritise (flows into the bottleneck) with groups it cannot (flows leaving
    h4 through its unprioritised host link), which hides where a policy acts.
    """
    pols = list(results["policies"])
    lines = [f"{'job':<6} {'group':<11} " + " ".join(f"{p:>8}" for p in pols)]
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    for pol in pols:
        for job, j in sorted(results["policies"][pol]["jobs"].items()):
            for e in j["echelons"]:
                if e["completion_time"] is not None:
                    by_pol = rows.setdefault((job, e["group"]), {})
                    by_pol.setdefault(pol, []).append(e["completion_time"])
    for (job, group), by_pol in rows.items():
        cells = [sum(v) / len(v) if (v := by_pol.get(p)) else None for p in pols]
        lines.append(f"{job:<6} {group:<11} " + " ".join(
            "     n/a" if c is None else f"{c:8.3f}" for c in cells))  # fmt: skip
    return "\n".join(lines)


def paced_description(path: str | Path, rate_mbit: float) -> Any:
    """The topology file at ``path`` as the agents see it: every link of a host no faster
    than their pacing (``rate_mbit``), in both directions (``bw_mbit``, and
    ``host_bw_mbit`` where given).

    Why: the agents pace each host at ``rate_mbit`` (to spare the soft switch), and a
    host's concurrent flows share that rate, so that is the capacity a host's flows
    really have. A model told the file's faster host links lets a host's flows run in
    parallel at the full access-link rate, and a controller ranks groups by bottleneck
    times the network does not have: with the three-job scenario it put ``big``'s pull
    before ``dp``'s where the simulator, given the paced links, put ``dp``'s first.
    Mininet itself still shapes the links as the file says.
    """
    raw = read_file(path)
    hosts = set(raw.get("hosts", {}))
    for link in raw.get("links", []):
        if link.get("a") in hosts or link.get("b") in hosts:
            for key in ("bw_mbit", "host_bw_mbit"):
                bw = link.get(key)
                if bw or key == "bw_mbit":
                    link[key] = min(float(bw), rate_mbit) if bw else rate_mbit
    return raw


def controller_topology(path: str | Path, rate_mbit: float, out_dir: Path) -> Path:
    """Write the topology the controller plans with (:func:`paced_description`); return
    the written file."""
    out = out_dir / "controller-topo.yaml"
    out.write_text(yaml.safe_dump(paced_description(path, rate_mbit), sort_keys=False))
    return out


def host_pacing(topo: Topology, rate_mbit: float) -> dict[str, float]:
    """Each host's sending rate: ``rate_mbit``, or its own link's rate where that is lower
    (the link's ``host_bw_mbit``, the direction the host sends into, where given).

    Why: a host paced faster than its own shaped link overflows that link's queue on
    the host itself (a ring all-reduce's h4 sends through the 10 Mbit/s bottleneck
    link: ~10,000 packets lost per iteration at 40 Mbit/s), and closed loop a lost
    packet stalls everything behind it."""
    rates = {h: rate_mbit for h in topo.hosts}
    for lk in topo.links:
        for end in (lk.a, lk.b):
            if end in rates and (up := lk.host_rate()) is not None:
                rates[end] = min(rates[end], up)
    return rates
