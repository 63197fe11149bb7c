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

from controlplane.counters import read_stats
from controlplane.entries import (
    GroupPlan,
    TableFullError,
    check_capacity,
    count_by_table,
    forwarding_entries,
    group_entries,
)
from controlplane.inflight import DEFAULT_TIMEOUT_S, ProgressTracker, parse_report
from controlplane.limits import check_description, check_flows, check_parsed
from controlplane.online import OnlinePlanner, check_mode, freeze_heap
from controlplane.planner import PlanChange, Planner
from controlplane.planning import ParsedJob, check_policy, parse_job
from controlplane.registry import GroupIds, JobRecord, Registry, RegistryError, UnknownJobError
from controlplane.switchsync import Delta, SwitchSync
from echelon.errors import SpecError
from echelon.topology import Topology, TopologyNetwork
from p4client.codec import encoded
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import P4RuntimeError

log = logging.getLogger(__name__)


class Controller:
    """Owns the registry, the plans and one :class:`SwitchSync` per topology switch."""

    def __init__(
        self,
        topo: Topology,
        p4info: P4Info,
        registry: Registry,
        device_config: bytes = b"",
        election_id: tuple[int, int] = (0, 1),
        role: str = "",
        policy: str | None = None,
        replan: str = "static",
        replan_interval: float = 0.01,
        progress_timeout: float = DEFAULT_TIMEOUT_S,
        idle_level: str = "keep",
    ) -> None:
        check_mode(replan)
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
        #: the static plans, kept incrementally (:mod:`controlplane.planner`)
        self.planner = Planner(self.policy, self.network)
        self._plans: list[GroupPlan] = []
        #: online mode: the latest plan of every group that has been in flight, over
        #: the static plan (``_plans``); see :mod:`controlplane.online`
        self.overlay: dict[tuple[str, str], GroupPlan] = {}
        #: every switch's desired entries as of the last change (online re-plans diff
        #: against it instead of rebuilding it)
        self._wanted: dict[str, set[TableEntry]] | None = None
        self._wanted_counts: dict[str, tuple[set[TableEntry], dict[str, int]]] = {}
        #: seconds the last change spent in the switches' writes (diff + RPCs + acks)
        self.last_write_s = 0.0
        self.replan = replan
        self.progress = ProgressTracker(time.monotonic, progress_timeout)
        self.online = (
            OnlinePlanner(self, replan_interval, idle_level) if replan == "online" else None
        )
        self._fwd = {s: frozenset(forwarding_entries(p4info, topo, s)) for s in topo.switches}
        self._group_entries = lru_cache(maxsize=65536)(self._entries_of)
        self.agents = {
            name: SwitchSync(sw, p4info, device_config, election_id, self.desired, self.lock, role)
            for name, sw in topo.switches.items()
        }
        #: jobs whose description no longer fits the topology (a host left it):
        #: kept in the registry with their IDs, planned nothing, shown and removable
        self.orphans: dict[str, str] = {}
        with self.lock:
            self._records = []
            for rec in self.registry.jobs(specs=False):
                try:
                    self._job(rec)
                except SpecError as exc:
                    self.orphans[rec.job_id] = str(exc)
                    log.warning("job %s kept but not installed: %s", rec.job_id, exc)
                else:
                    self._records.append(rec)
            self.planner.add_many([(self._job(r), r.groups) for r in self._records])
            self._plans = self.planner.plans()
            for rec in self._records:
                self._track(rec)
            # build and encode every entry now, not while a switch waits to be reconciled
            groups = [e for plan in self._plans for e in self._group_entries(plan)]
            for e in [*groups, *(e for fwd in self._fwd.values() for e in fwd)]:
                encoded(p4info, e)
            self._settled()

    def _settled(self) -> None:
        """After a change of the registrations: online, keep the long-lived state out
        of the cyclic collector's scans (:func:`controlplane.online.freeze_heap`)."""
        if self.online is not None:
            freeze_heap()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for agent in self.agents.values():
            agent.start()
        if self.online is not None:
            self.online.start()

    def stop(self) -> None:
        if self.online is not None:
            self.online.stop()
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

    def desired(
        self,
        switch: str,
        plans: list[GroupPlan] | None = None,
        overlay: Mapping[tuple[str, str], GroupPlan] | None = None,
    ) -> set[TableEntry]:
        out = set(self._fwd[switch])
        for plan in self.effective(plans, overlay):
            out |= self._group_entries(plan)
        return out

    def effective(
        self,
        plans: list[GroupPlan] | None = None,
        overlay: Mapping[tuple[str, str], GroupPlan] | None = None,
    ) -> list[GroupPlan]:
        """The static plans with every group's online plan (if any) in its place."""
        ov = self.overlay if overlay is None else overlay
        base = self._plans if plans is None else plans
        return [ov.get((p.job, p.group), p) for p in base] if ov else list(base)

    def _job(self, rec: JobRecord) -> ParsedJob:
        if rec.job_id not in self._parsed:
            spec = rec.spec or self.registry.job(rec.job_id).spec
            self._parsed[rec.job_id] = parse_job(spec, self.topo)
        return self._parsed[rec.job_id]

    def _apply_changes(
        self, changes: list[PlanChange], overlay: dict[tuple[str, str], GroupPlan] | None = None
    ) -> int:
        """Write what ``changes`` (the planner's, already applied to it) change on the
        switches: only the entries of the groups whose *effective* plan moved (an
        online plan in the overlay hides a static change). Returns updates written."""
        ov_old = self.overlay
        ov_new = self.overlay if overlay is None else overlay
        gone: set[TableEntry] = set()
        new: set[TableEntry] = set()
        for c in changes:
            before = ov_old.get(c.key, c.old)
            after = ov_new.get(c.key, c.new) if c.new is not None else None
            if before == after:
                continue
            if before is not None:
                gone |= self._group_entries(before)
            if after is not None:
                new |= self._group_entries(after)
        keys = {c.key for c in changes}
        for key, p in ov_old.items():  # online plans dropped (a removal, a policy switch)
            if key not in ov_new and key not in keys:
                static = self._static(key)
                if static != p:
                    gone |= self._group_entries(p)
                    if static is not None:
                        new |= self._group_entries(static)
        plans = self.planner.plans()
        if self._wanted is None:
            return self._transition(plans, ov_new)
        wanted = {}
        deltas = {}
        counts = {}
        for s in self.agents:
            base = self._wanted[s]
            want = set(base)  # a copy of the hash table, then the few changes
            want -= gone
            want |= new
            wanted[s] = want
            deltas[s] = (base, gone, new)
            # counted from the base's counts and the change, not by walking 5,000 entries
            tally = dict(self._counts(s, base))
            for e in gone:
                if e in base:
                    tally[e.table] -= 1
            for e in new:
                if e not in base or e in gone:
                    tally[e.table] = tally.get(e.table, 0) + 1
            for t, n in sorted(tally.items()):
                size = self.p4info.table(t).size
                if size and n > size:
                    raise TableFullError(t, n, size)
            counts[s] = tally
        steps = self._transition(plans, ov_new, wanted, deltas)
        self._wanted_counts = {s: (wanted[s], counts[s]) for s in wanted}
        return steps

    def _counts(self, switch: str, entries: set[TableEntry]) -> dict[str, int]:
        """``count_by_table(entries)``, remembered for the set last written to ``switch``."""
        hit = self._wanted_counts.get(switch)
        if hit is not None and hit[0] is entries:
            return hit[1]
        c = count_by_table(entries)
        self._wanted_counts[switch] = (entries, c)
        return c

    def _static(self, key: tuple[str, str]) -> GroupPlan | None:
        try:
            return self.planner.plan(*key)
        except KeyError:
            return None

    def _transition(
        self,
        plans: list[GroupPlan],
        overlay: dict[tuple[str, str], GroupPlan] | None = None,
        wanted: dict[str, set[TableEntry]] | None = None,
        deltas: Mapping[str, Delta] | None = None,
    ) -> int:
        """Check sizes, write every in-sync switch; on refusal undo and re-raise.
        ``wanted`` (already checked) skips recomputing every switch's desired set;
        ``deltas`` says how each was built (:meth:`SwitchSync.apply`).
        Returns the number of updates written (all switches)."""
        for name, agent in self.agents.items():
            if agent.not_primary:  # up, but ours to write only when primary: say so
                raise P4RuntimeError(
                    "PERMISSION_DENIED", f"switch {name}: not primary: {agent.not_primary}"
                )
        ov = self.overlay if overlay is None else overlay
        if wanted is None:
            wanted = {s: self.desired(s, plans, ov) for s in self.agents}
            for entries in wanted.values():
                check_capacity(self.p4info, entries)
        done: list[tuple[SwitchSync, Any]] = []
        t0 = time.perf_counter()
        try:
            for name, agent in self.agents.items():
                steps = agent.apply(wanted[name], deltas.get(name) if deltas else None)
                if steps:
                    done.append((agent, steps))
        except BaseException:
            for agent, steps in reversed(done):
                agent.undo(steps)
            raise
        self.last_write_s = time.perf_counter() - t0
        self._plans = plans
        self.overlay = ov
        self._wanted = wanted
        return sum(len(steps) for _, steps in done)

    # ------------------------------------------------------------ progress (online)

    def _track(self, rec: JobRecord) -> None:
        """Tell the progress tracker the job's groups: who receives them, planned t_ref."""
        parsed = self._job(rec)
        groups = {}
        for gid in rec.groups:
            mine, _ = parsed.of_group(gid.group)
            receivers = frozenset(f.dst for ef in mine for f in ef.flows)
            groups[gid.group] = (receivers, min(ef.t_ref for ef in mine))
        self.progress.add_job(rec.job_id, groups, parsed.opening)

    def report(self, body: Any, wait: bool = False, timeout: float = 5.0) -> dict[str, Any]:
        """One progress snapshot (:mod:`controlplane.inflight`). Online, a report that
        changes what is in flight wakes the re-planner; ``wait`` returns only after
        the re-plan covering it was written (for benchmarks and tests)."""
        received = time.monotonic()
        changed = self.progress.ingest(parse_report(body, self.topo.hosts))
        out: dict[str, Any] = {"changed": changed, "replan": self.replan}
        if changed and self.online is not None:
            ticket = self.online.kick(received)
            if wait:
                out.update(self.online.wait(ticket, timeout))
        return out

    def registered(self) -> list[tuple[ParsedJob, tuple[GroupIds, ...]]]:
        """Every registered job with its group IDs (caller holds the lock)."""
        return [(self._job(r), r.groups) for r in self._records]

    def apply_overlay(self, plans: list[GroupPlan]) -> int:
        """Install online plans for the groups in flight (caller holds the lock);
        every other group keeps what it has. Returns the updates written."""
        current = {(p.job, p.group): p for p in self.effective()}
        changed = [p for p in plans if current.get((p.job, p.group)) != p]
        if not changed:  # the usual case for a finish: nothing to write
            return 0
        ov = dict(self.overlay)
        for p in changed:
            ov[(p.job, p.group)] = p
        # Only the changed groups' entries differ (each group's entries carry its own
        # echelon ID and class): O(changed), not O(every registered group).
        gone: set[TableEntry] = set()
        new: set[TableEntry] = set()
        for p in changed:
            gone |= self._group_entries(current[(p.job, p.group)])
            new |= self._group_entries(p)
        wanted = {}
        deltas: dict[str, Delta] = {}
        for s in self.agents:
            base = self._wanted.get(s) if self._wanted else None
            if base is None:
                wanted[s] = self.desired(s, None, ov)
            else:
                wanted[s] = (base - gone) | new
                deltas[s] = (base, gone, new)
        grow = count_by_table(new)
        for t, n in count_by_table(gone).items():
            grow[t] = grow.get(t, 0) - n
        if any(n > 0 for n in grow.values()):
            for entries in wanted.values():
                check_capacity(self.p4info, entries)
        return self._transition(self._plans, ov, wanted, deltas)

    def _commit(self, old_plans: list[GroupPlan], token: object) -> None:
        """Commit the registry; if that fails, bring the planner (``token``) and the
        switches back to ``old_plans`` (what the registry still says) and re-raise."""
        try:
            self.registry.commit()
        except RegistryError:
            self.planner.restore(token)
            try:
                self._transition(old_plans)
            except Exception:
                self._plans = old_plans
                for agent in self.agents.values():
                    agent.resync("registry commit failed")
            raise

    # ------------------------------------------------------------ changes

    def register(self, desc: Any) -> dict[str, Any]:
        """Register one job (paradigm description or explicit EchelonFlow spec).

        Limits are checked and the description parsed before the lock is taken:
        parsing is pure, and a large job must not stall every other request."""
        check_description(desc)
        parsed = parse_job(desc, self.topo)
        check_parsed(len(parsed.groups), sum(len(ef.flows) for ef in parsed.echelons))
        check_flows(parsed.echelons)
        with self.lock:
            old = self._plans
            token = self.planner.snapshot()
            self.registry.begin()
            try:
                rec = self.registry.add_job(parsed.job_id, dict(desc), list(parsed.groups))
                self._parsed[rec.job_id] = parsed
                records = [*self._records, rec]
                self._apply_changes(self.planner.add(parsed, rec.groups))
            except BaseException:
                self.planner.restore(token)
                self._plans = old
                self._parsed.pop(parsed.job_id, None)
                self.registry.rollback()
                raise
            try:
                self._commit(old, token)
            except RegistryError:
                self._parsed.pop(parsed.job_id, None)
                raise
            self._records = records
            self._track(rec)
            self._settled()
            out = self.show(rec.job_id)
            out["warnings"] = list(parsed.warnings)
            return out

    def remove(self, job_id: str) -> None:
        with self.lock:
            old = self._plans
            token = self.planner.snapshot()
            self.registry.begin()
            try:
                self.registry.remove_job(job_id)
                records = [r for r in self._records if r.job_id != job_id]
                overlay = {k: p for k, p in self.overlay.items() if k[0] != job_id}
                changes = self.planner.remove(job_id) if job_id in self.planner else []
                self._apply_changes(changes, overlay)
            except BaseException:
                self.planner.restore(token)
                self._plans = old
                self.registry.rollback()
                raise
            self._commit(old, token)
            self._records = records
            self._parsed.pop(job_id, None)
            self.orphans.pop(job_id, None)
            self.progress.remove_job(job_id)
            self._settled()

    def set_policy(self, name: str) -> None:
        check_policy(name)
        with self.lock:
            old = self._plans
            token = self.planner.snapshot()
            self.registry.begin()
            try:
                self.registry.set_setting("policy", name)
                self._apply_changes(self.planner.set_policy(name), {})
            except BaseException:
                self.planner.restore(token)
                self._plans = old
                self.registry.rollback()
                raise
            self._commit(old, token)
            self.policy = name
            self._settled()
        if self.online is not None:  # what is in flight is re-planned under the new policy
            self.online.kick(time.monotonic())

    # ------------------------------------------------------------ views

    def jobs(self) -> list[dict[str, Any]]:
        with self.lock:
            return [self._summary(r) for r in self.registry.jobs(specs=False)]  # specs unused

    def _summary(self, rec: JobRecord) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job": rec.job_id,
            "seq": rec.seq,
            "groups": [
                {"group": g.group, "echelon_id": g.echelon_id, "class_id": g.class_id}
                for g in rec.groups
            ],
        }
        if rec.job_id in self.orphans:
            out["orphaned"] = self.orphans[rec.job_id]
        return out

    def show(self, job_id: str) -> dict[str, Any]:
        with self.lock:
            rec = self.registry.job(job_id)
            if job_id in self.orphans:  # nothing planned: the registered record only
                out = self._summary(rec)
                out["spec"] = rec.spec
                out["installed"] = {n: False for n in self.agents}
                return out
            parsed = self._job(rec)
            plans = {}
            for gid in rec.groups:  # the static plan, or the group's online plan
                key = (job_id, gid.group)
                plans[gid.group] = self.overlay.get(key) or self.planner.plan(*key)
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

    def progress_view(self) -> dict[str, Any]:
        """``GET /progress``: mode, what is in flight per job, re-plan measurements."""
        out: dict[str, Any] = {
            "replan": self.replan,
            "reports": self.progress.reports,
            "ignored": self.progress.ignored,
            "jobs": self.progress.view(),
        }
        if self.online is not None:
            out["online"] = self.online.stats()
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
                "last_reconcile_updates": st.last_reconcile_updates,
                "last_reconcile_s": st.last_reconcile_s,
                "last_error": st.last_error,
                "entries": a.entry_counts() if st.in_sync else {},
                **a.status_view(),
            }
        with self.lock:
            n_jobs = len(self._records) + len(self.orphans)
            orphans = dict(self.orphans)
        reg = self.registry
        registry = {
            "path": reg.path,
            "integrity_ok": reg.integrity_error is None,
            "integrity_checks": reg.integrity_checks,
            "integrity_error": reg.integrity_error,
        }
        return {
            "policy": self.policy,
            "replan": self.replan,
            "jobs": n_jobs,
            "orphaned_jobs": orphans,
            "registry": registry,
            "switches": switches,
        }

    def stats(self) -> dict[str, Any]:
        """Per-group packets/bytes summed over switches, plus unprioritized packets by reason
        (:func:`controlplane.counters.read_stats`)."""
        with self.lock:
            plans = list(self._plans)
        return read_stats(self.agents, plans)


__all__ = ["Controller", "UnknownJobError"]
