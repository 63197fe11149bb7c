"""Predicted per-flow finish times for the emulated demo (cross-check of the emulation).

The Mininet demo plays jobs over a topology file whose bottleneck link has
``bw_mbit``; this module runs the same jobs through the flow-level simulator on
the same topology so the measured finish times can be compared with a model::

    from sim.predict import predict_finish_times
    finish = predict_finish_times([job_spec], "topo/star.yaml", policy="echelon",
                                  levels_mode="k8", header_bytes=58, payload_bytes=1400)
    finish[("job1/0/fwd/s0-s1", 2)]   # seconds after the jobs' common start

Packet overhead matters at the bottleneck: a flow of ``size`` payload bytes sent
in packets of ``payload_bytes`` puts ``size + ceil(size/payload_bytes) *
header_bytes`` bytes on the wire (58 = Ethernet 14 + IPv4 20 + UDP 8 + echelon 16;
``tc``/htb counts the Ethernet header but not preamble or FCS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from echelon.constants import PACKET_HEADER_LEN
from echelon.errors import SpecError
from echelon.model import FlowKey
from sim.core.config import JobRun, SimConfig, parse_levels
from sim.core.engine import Simulator
from sim.topology import file_network


def _as_run(job: Any, iterations: int) -> JobRun:
    if isinstance(job, JobRun):
        return job
    if isinstance(job, Mapping):
        from echelon.jobs import load_job

        job = load_job(job)
    return JobRun(job, iterations=iterations)


def predict_finish_times(
    jobs: Sequence[Any],
    topology: Any,
    policy: str = "echelon",
    levels_mode: str | int | None = "k8",
    *,
    header_bytes: int = PACKET_HEADER_LEN,
    payload_bytes: int = 1400,
    iterations: int = 1,
    replan_interval: float = 0.0,
    policy_sizes: Literal["remaining", "registered"] = "remaining",
    replan_delay: float = 0.0,
    keep_levels: bool = False,
    initial_levels: Mapping[tuple[str, str, int], int] | None = None,
    sender_round_robin: bool = False,
) -> dict[FlowKey, float]:
    """Per-flow finish times (seconds after the common start) predicted by the fluid model.

    ``jobs``: ``echelon.jobs.JobSpec`` objects, job-description dicts, or
    :class:`sim.core.engine.JobRun` (to give arrival times / iteration counts);
    ``topology``: an ``echelon.topology.Topology`` or a path to its YAML file;
    ``policy``: a policy name of :func:`echelon.policies.get_policy`;
    ``levels_mode``: ``"ideal"`` (unlimited ranks) or ``"k8"`` (8 switch queues, the
    data plane's quantisation; ``"kN"``/int N for other counts);
    ``iterations``: iterations per job unless a ``JobRun`` says otherwise;
    ``replan_interval``, ``policy_sizes``, ``replan_delay``, ``keep_levels``,
    ``initial_levels``, ``sender_round_robin``: as in :class:`sim.core.config.SimConfig`.
    Keys are ``(echelon name, flow index)``, as in the job's ``IterationPlan``.
    """
    if header_bytes < 0 or payload_bytes <= 0:
        raise SpecError("payload_bytes", "header bytes >= 0 and payload bytes > 0 required")
    runs = [_as_run(j, iterations) for j in jobs]
    cfg = SimConfig(
        policy=policy,
        levels=parse_levels(levels_mode, "levels_mode"),
        header_bytes=header_bytes,
        payload_bytes=payload_bytes,
        replan_interval=replan_interval,
        policy_sizes=policy_sizes,
        replan_delay=replan_delay,
        keep_levels=keep_levels,
        initial_levels=initial_levels,
        sender_round_robin=sender_round_robin,
    )
    res = Simulator(file_network(topology), runs, cfg).run()
    return {(f.echelon, f.index): f.finish for f in res.flows}
