"""The controller: registrations in, minimal entry updates out, to every switch.

One lock serialises every change (registration, removal, policy switch, a
switch's reconciliation). A registration runs inside a registry transaction:
parse -> allocate IDs -> re-plan every group -> check P4Info sizes -> write the
difference to every in-sync switch -> commit. Any refusal (bad spec, duplicate,
IDs exhausted, a full table on any switch) rolls back the switches already
written and the transaction, so nothing is half-applied; after ``commit`` the
registration is on disk (see :mod:`controlplane.registry`) before the API answers.

Switches that are down when a change happens simply miss it: their agent
reconciles against the then-current desired set when they come back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from controlplane.agent import SwitchAgent
from controlplane.entries import (
    GroupPlan,
    check_capacity,
    forwarding_entries,
    group_entries,
)
from controlplane.p4info import P4Info, TableEntry
from controlplane.planning import ParsedJob, check_policy, parse_job, plan_groups
from controlplane.registry import JobRecord, Registry, UnknownJobError
from echelon.constants import UNPRIO_COUNT, UNPRIO_NAMES
from topo.topology import Topology, TopologyNetwork

log = logging.getLogger(__name__)

C_ECHELON = "EchelonIngress.echelon_pkts"
C_UNPRIO = "EchelonIngress.unprioritized_pkts"


class Controller:
    """Owns the registry, the plans and one :class:`SwitchAgent` per topology switch."""

    def __init__(
        self,
        topo: Topology,
        p4info: P4Info,
        registry: Registry,
        device_config: bytes = b"",
        election_id: tuple[int, int] = (0, 1),
        role: str = "",
        policy: str | None = None,
    ) -> None:
        if policy is not None:
            check_policy(policy)
            registry.set_setting("policy", policy)
        self.topo = topo
        self.p4info = p4info
        self.registry = registry
        self.network = TopologyNetwork(topo)
        self.lock = threading.RLock()
        self.policy = registry.get_setting("policy", "echelon")
        self._parsed: dict[str, ParsedJob] = {}
        self._plans: list[GroupPlan] = []
        self._fwd = {s: frozenset(forwarding_entries(p4info, topo, s)) for s in topo.switches}
        self._group_entries = lru_cache(maxsize=65536)(self._entries_of)
        self.agents = {
            name: SwitchAgent(sw, p4info, device_config, election_id, self.desired, self.lock, role)
            for name, sw in topo.switches.items()
        }
        with self.lock:
            self._records = self.registry.jobs(specs=False)
            self._plans = self._replan(self._records, self.policy)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for agent in self.agents.values():
            agent.start()

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop()

    def wait_in_sync(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(
            a.wait_in_sync(max(0.0, deadline - time.monotonic())) for a in self.agents.values()
        )

    # ------------------------------------------------------------ desired state

    def _entries_of(self, plan: GroupPlan) -> frozenset[TableEntry]:
        return frozenset(group_entries(self.p4info, self.topo, plan))

    def desired(self, switch: str, plans: list[GroupPlan] | None = None) -> set[TableEntry]:
        out = set(self._fwd[switch])
        for plan in self._plans if plans is None else plans:
            out |= self._group_entries(plan)
        return out

    def _job(self, rec: JobRecord) -> ParsedJob:
        if rec.job_id not in self._parsed:
            spec = rec.spec or self.registry.job(rec.job_id).spec
            self._parsed[rec.job_id] = parse_job(spec, self.topo)
        return self._parsed[rec.job_id]

    def _replan(self, records: list[JobRecord], policy: str) -> list[GroupPlan]:
        jobs = [(self._job(r), r.groups) for r in records]
        return plan_groups(policy, jobs, self.network)

    def _transition(self, plans: list[GroupPlan]) -> None:
        """Check sizes, write every in-sync switch; on refusal undo and re-raise."""
        wanted = {s: self.desired(s, plans) for s in self.agents}
        for entries in wanted.values():
            check_capacity(self.p4info, entries)
        done: list[tuple[SwitchAgent, Any]] = []
        try:
            for name, agent in self.agents.items():
                steps = agent.apply(wanted[name])
                if steps:
                    done.append((agent, steps))
        except BaseException:
            for agent, steps in reversed(done):
                agent.undo(steps)
            raise
        self._plans = plans

    # ------------------------------------------------------------ changes

    def register(self, desc: Any) -> dict[str, Any]:
        """Register one job (paradigm description or explicit EchelonFlow spec)."""
        with self.lock:
            parsed = parse_job(desc, self.topo)
            self.registry.begin()
            try:
                rec = self.registry.add_job(parsed.job_id, dict(desc), list(parsed.groups))
                self._parsed[rec.job_id] = parsed
                records = [*self._records, rec]
                self._transition(self._replan(records, self.policy))
            except BaseException:
                self._parsed.pop(parsed.job_id, None)
                self.registry.rollback()
                raise
            self.registry.commit()
            self._records = records
            return self.show(rec.job_id)

    def remove(self, job_id: str) -> None:
        with self.lock:
            self.registry.begin()
            try:
                self.registry.remove_job(job_id)
                records = [r for r in self._records if r.job_id != job_id]
                self._transition(self._replan(records, self.policy))
            except BaseException:
                self.registry.rollback()
                raise
            self.registry.commit()
            self._records = records
            self._parsed.pop(job_id, None)

    def set_policy(self, name: str) -> None:
        check_policy(name)
        with self.lock:
            self.registry.begin()
            try:
                self.registry.set_setting("policy", name)
                self._transition(self._replan(self._records, name))
            except BaseException:
                self.registry.rollback()
                raise
            self.registry.commit()
            self.policy = name

    # ------------------------------------------------------------ views

    def jobs(self) -> list[dict[str, Any]]:
        with self.lock:
            return [self._summary(r) for r in self.registry.jobs()]

    def _summary(self, rec: JobRecord) -> dict[str, Any]:
        return {
            "job": rec.job_id,
            "seq": rec.seq,
            "groups": [
                {"group": g.group, "echelon_id": g.echelon_id, "class_id": g.class_id}
                for g in rec.groups
            ],
        }

    def show(self, job_id: str) -> dict[str, Any]:
        with self.lock:
            rec = self.registry.job(job_id)
            parsed = self._job(rec)
            plans = {p.group: p for p in self._plans if p.job == job_id}
            out = self._summary(rec)
            out["policy"] = self.policy
            out["spec"] = rec.spec
            for g in out["groups"]:
                p = plans[g["group"]]
                g["sources"] = list(p.sources)
                g["priority"] = p.priority
                g["ranges"] = [
                    {"lo_us": r.lo_us, "hi_us": r.hi_us, "priority": r.priority} for r in p.ranges
                ]
            out["echelonflows"] = [
                {
                    "name": ef.name,
                    "group": ef.group,
                    "t_ref": ef.t_ref,
                    "weight": ef.weight,
                    "flows": [
                        {
                            "index": f.index,
                            "src": f.src,
                            "dst": f.dst,
                            "size": f.size,
                            "offset": f.offset,
                            "offset_us": f.offset_us,
                        }
                        for f in ef.flows
                    ],
                }
                for ef in parsed.echelons
            ]
            out["installed"] = {n: a.status.in_sync for n, a in self.agents.items()}
            return out

    def status(self) -> dict[str, Any]:
        switches = {}
        for name, a in self.agents.items():
            st = a.status
            switches[name] = {
                "grpc": a.switch.grpc,
                "device_id": a.switch.device_id,
                "connected": st.connected,
                "primary": bool(a.conn is not None and a.conn.is_primary and st.connected),
                "in_sync": st.in_sync,
                "pipeline_cookie": st.pipeline_cookie,
                "pipeline_pushes": st.pipeline_pushes,
                "reconciles": st.reconciles,
                "updates_written": st.updates_written,
                "last_error": st.last_error,
                "entries": a.entry_counts() if st.in_sync else {},
            }
        with self.lock:
            n_jobs = len(self._records)
        return {"policy": self.policy, "jobs": n_jobs, "switches": switches}

    def stats(self) -> dict[str, Any]:
        """Per-group packets/bytes summed over switches, plus unprioritized packets by reason."""
        with self.lock:
            plans = list(self._plans)
        per_switch: dict[str, Any] = {}
        totals: dict[int, list[int]] = {}
        unprio = [[0, 0] for _ in range(UNPRIO_COUNT)]
        for name, a in self.agents.items():
            conn = a.conn
            if conn is None or not a.status.in_sync:
                per_switch[name] = {"error": a.status.last_error or "not connected"}
                continue
            try:
                ech = conn.read_counter(C_ECHELON)
                spc = conn.read_counter(C_UNPRIO)
            except Exception as exc:  # a dying switch must not break the endpoint
                per_switch[name] = {"error": str(exc)}
                continue
            per_switch[name] = {"unprioritized": _unprio_view(spc)}
            for p in plans:
                pk, by = ech.get(p.class_id, (0, 0))
                t = totals.setdefault(p.class_id, [0, 0])
                t[0] += pk
                t[1] += by
            for i, (pk, by) in spc.items():
                if i < UNPRIO_COUNT:
                    unprio[i][0] += pk
                    unprio[i][1] += by
        groups = [
            {
                "job": p.job,
                "group": p.group,
                "echelon_id": p.echelon_id,
                "class_id": p.class_id,
                "packets": totals.get(p.class_id, [0, 0])[0],
                "bytes": totals.get(p.class_id, [0, 0])[1],
            }
            for p in plans
        ]
        unprio_total = _unprio_view({i: (v[0], v[1]) for i, v in enumerate(unprio)})
        return {"groups": groups, "unprioritized": unprio_total, "switches": per_switch}


def _unprio_view(counts: Mapping[int, tuple[int, int]]) -> dict[str, dict[str, int]]:
    return {
        name: {"packets": counts.get(i, (0, 0))[0], "bytes": counts.get(i, (0, 0))[1]}
        for i, name in enumerate(UNPRIO_NAMES)
    }


__all__ = ["Controller", "UnknownJobError"]
