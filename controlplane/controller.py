"""The controller: registrations in, minimal entry updates out, to every switch.

The path of a registration: :func:`echelon.jobs.load_description` (outside the
lock) -> the registry allocates IDs -> :class:`~controlplane.planning.Planner`
returns the groups whose plan changed -> :meth:`Controller._change`, the one
write path, turns (old plan, new plan) pairs into the entries that go and come
(:func:`~controlplane.entries.group_entries`), checks every table's size and has
each switch's :class:`~controlplane.switchsync.SwitchSync` write that delta ->
the registry commits. A change is acknowledged only once every switch took it: a
switch that is down, not primary, not yet in sync or whose agent failed refuses
the change (:class:`~controlplane.syncstatus.SwitchUnavailableError`, HTTP 503
naming the switch and why) and the switches already written are undone.
Removals, policy switches and online re-plans (:mod:`controlplane.online`) take
the same path with their own pairs.

One lock serialises every change and every switch's reconciliation. Any refusal
(bad spec, duplicate, IDs exhausted, a full table on any switch) rolls back the
switches already written and the transaction, so nothing is half-applied; after
``commit`` the registration is on disk (see :mod:`controlplane.registry`) before
the API answers.

Each switch's desired entry set is kept, not rebuilt: its routes, then changed
only by the deltas of :meth:`Controller._change`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from controlplane.counters import read_stats
from controlplane.entries import (
    GroupPlan,
    TableFullError,
    count_by_table,
    default_entries,
    forwarding_entries,
    group_entries,
)
from controlplane.inflight import DEFAULT_TIMEOUT_S, ProgressTracker, parse_report
from controlplane.limits import FlowBudget, check_description, check_flows, check_parsed
from controlplane.online import OnlinePlanner, Written, check_mode, freeze_heap
from controlplane.planning import PlanChange, Planner, check_policy
from controlplane.registry import GroupIds, JobRecord, Registry, RegistryError
from controlplane.switchsync import SwitchSync
from controlplane.syncstatus import SwitchUnavailableError
from controlplane.views import echelonflow_view, switch_view
from echelon.errors import SpecError
from echelon.jobs import Description, load_description
from echelon.topology import Topology, TopologyNetwork
from p4client.codec import encoded
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import P4RuntimeError
from p4client.tls import TlsFiles

log = logging.getLogger(__name__)

GroupKey = tuple[str, str]
#: a group's effective plan before and after a change (``None``: not registered)
Pair = tuple[GroupPlan | None, GroupPlan | None]
#: how to take a change back: the reversed pairs, the static plans and the overlay before
Undo = tuple[list[Pair], list[GroupPlan], dict[GroupKey, GroupPlan]]
#: every switch's desired entries and their count per table
Sets = tuple[dict[str, set[TableEntry]], dict[str, dict[str, int]]]
#: per switch, the entries a change removes (or adds)
Delta = dict[str, set[TableEntry]]


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
        tls: TlsFiles | None = None,
    ) -> None:
        """``tls``: the PEM files every switch connection uses (``None``: plaintext)."""
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
        #: the static plans, kept incrementally (:class:`controlplane.planning.Planner`),
        #: and the one copy of every installed job's parsed description and group IDs
        self.planner = Planner(self.policy, self.network)
        self._plans: list[GroupPlan] = []
        #: online mode: the latest plan of every group that has been in flight, over
        #: the static plan (``_plans``); see :mod:`controlplane.online`
        self.overlay: dict[GroupKey, GroupPlan] = {}
        self.replan = replan
        self.progress = ProgressTracker(time.monotonic, progress_timeout)
        self.online = (
            OnlinePlanner(self, replan_interval, idle_level) if replan == "online" else None
        )
        self._group_entries = lru_cache(maxsize=65536)(self._entries_of)
        #: the default entries the controller owns (kept at the program's defaults by
        #: every switch's sync, outside the desired sets the changes diff)
        self.defaults = frozenset(default_entries(p4info, device_config))
        self.agents = {
            name: SwitchSync(
                sw,
                p4info,
                device_config,
                election_id,
                self.desired,
                self.lock,
                role,
                defaults=self.defaults,
                tls=tls,
            )
            for name, sw in topo.switches.items()
        }
        #: jobs whose description no longer fits the topology (a host left it):
        #: kept in the registry with their IDs, planned nothing, shown and removable
        self.orphans: dict[str, str] = {}
        with self.lock:
            loaded = []
            for rec in self.registry.jobs():
                try:
                    loaded.append((load_description(rec.spec, topo.hosts), rec.groups))
                except SpecError as exc:
                    self.orphans[rec.job_id] = str(exc)
                    log.warning("job %s kept but not installed: %s", rec.job_id, exc)
            self.planner.add_many(loaded)
            self._plans = self.planner.plans()
            for parsed, ids in loaded:
                self._track(parsed, ids)
            # every switch's desired set: its routes, then the registered groups as one
            # delta (built and encoded now, not while a switch waits to be reconciled)
            self._wanted = {s: set(forwarding_entries(p4info, topo, s)) for s in topo.switches}
            self._tally = {s: count_by_table(w) for s, w in self._wanted.items()}
            self._wanted, self._tally = self._next_sets(
                *self._entry_delta([(None, p) for p in self._plans]), check=False
            )
            for want in self._wanted.values():
                for e in want:
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

    def _entries_of(self, plan: GroupPlan) -> Mapping[str, frozenset[TableEntry]]:
        return group_entries(self.p4info, self.topo, plan)

    def desired(self, switch: str) -> set[TableEntry]:
        """Everything ``switch`` must hold now (never mutated: a change replaces it)."""
        return self._wanted[switch]

    def effective(self) -> list[GroupPlan]:
        """The static plans with every group's online plan (if any) in its place."""
        ov = self.overlay
        return [ov.get((p.job, p.group), p) for p in self._plans] if ov else list(self._plans)

    def _pairs(self, changes: list[PlanChange], overlay: dict[GroupKey, GroupPlan]) -> list[Pair]:
        """The (before, after) *effective* plans of a static change (the planner's,
        already applied to it) under the new ``overlay``: an online plan hides a
        static change, and an online plan dropped (a removal, a policy switch) gives
        its group back its static plan."""
        old = self.overlay
        pairs: list[Pair] = [
            (old.get(c.key, c.old), overlay.get(c.key, c.new) if c.new is not None else None)
            for c in changes
        ]
        keys = {c.key for c in changes}
        for key, p in old.items():
            if key not in overlay and key not in keys:
                pairs.append((p, self._static(key)))
        return pairs

    def _static(self, key: GroupKey) -> GroupPlan | None:
        try:
            return self.planner.plan(*key)
        except KeyError:
            return None

    def _entry_delta(self, pairs: list[Pair]) -> tuple[Delta, Delta]:
        """Per switch, the entries that go and come with ``pairs``: only those of the
        groups whose plan moved (each group's entries carry its own echelon ID and
        class), so O(changed groups), not O(every registered group)."""
        gone: Delta = {s: set() for s in self._wanted}
        new: Delta = {s: set() for s in self._wanted}
        for before, after in pairs:
            if before == after:
                continue
            if before is not None:
                for s, entries in self._group_entries(before).items():
                    gone[s] |= entries
            if after is not None:
                for s, entries in self._group_entries(after).items():
                    new[s] |= entries
        return gone, new

    def _next_sets(self, gone: Delta, new: Delta, check: bool = True) -> Sets:
        """Every switch's desired set and per-table counts with its ``gone`` and ``new``
        applied; ``check``: raise :class:`TableFullError` for a table over its size."""
        wanted, tallies = {}, {}
        for s, base in self._wanted.items():
            tally = dict(self._tally[s])  # counted from the change, not by walking 5,000 entries
            for e in gone[s]:
                if e in base:
                    tally[e.table] -= 1
            for e in new[s]:
                if e not in base or e in gone[s]:
                    tally[e.table] = tally.get(e.table, 0) + 1
            if check:
                for t, n in sorted(tally.items()):
                    size = self.p4info.table(t).size
                    if size and n > size:
                        raise TableFullError(t, n, size)
            wanted[s] = (base - gone[s]) | new[s]
            tallies[s] = tally
        return wanted, tallies

    def _change(
        self, pairs: list[Pair], plans: list[GroupPlan], overlay: dict[GroupKey, GroupPlan]
    ) -> Written:
        """The one write path: ``pairs`` (before, after) of the groups that change,
        ``plans`` and ``overlay`` the static and online plans once it is done. Checks
        sizes, writes each switch its delta; on refusal undoes the switches already
        written and re-raises. A switch the change does not touch (no group of it
        crosses the switch) is neither written nor required to be up: its desired set
        stays what it was. Returns the updates written (all switches) and the seconds
        the writes took."""
        gone, new = self._entry_delta(pairs)
        touched = [(n, sync) for n, sync in self.agents.items() if gone[n] or new[n]]
        for name, sync in touched:
            if sync.not_primary:  # up, but ours to write only when primary: say so
                raise P4RuntimeError(
                    "PERMISSION_DENIED", f"switch {name}: not primary: {sync.not_primary}"
                )
            why = sync.unavailable()
            if why is not None:  # acknowledged means installed on every switch it needs
                raise SwitchUnavailableError(name, why)
        wanted, tallies = self._next_sets(gone, new)
        done: list[tuple[SwitchSync, Any]] = []
        t0 = time.perf_counter()
        try:
            for name, sync in touched:
                # raises if not installed; the counts are of the set the delta starts from
                steps = sync.apply(wanted[name], gone[name], new[name], self._tally[name])
                if steps:
                    done.append((sync, steps))
        except BaseException:
            for sync, steps in reversed(done):
                sync.undo(steps)
            raise
        seconds = time.perf_counter() - t0
        self._plans, self.overlay = plans, overlay
        self._wanted, self._tally = wanted, tallies
        return Written(sum(len(steps) for _, steps in done), seconds)

    # ------------------------------------------------------------ progress (online)

    def _track(self, parsed: Description, ids: tuple[GroupIds, ...]) -> None:
        """Tell the progress tracker the job's groups: who receives them, planned t_ref."""
        groups = {}
        for gid in ids:
            mine, _ = parsed.of_group(gid.group)
            receivers = frozenset(f.dst for ef in mine for f in ef.flows)
            groups[gid.group] = (receivers, min(ef.t_ref for ef in mine))
        self.progress.add_job(parsed.job_id, groups, parsed.opening)

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

    def registered(self) -> list[tuple[Description, tuple[GroupIds, ...]]]:
        """Every installed job with its group IDs (caller holds the lock)."""
        return self.planner.jobs()

    def apply_overlay(self, plans: list[GroupPlan]) -> Written:
        """Install online plans for the groups in flight (caller holds the lock);
        every other group keeps what it has."""
        current = {(p.job, p.group): p for p in self.effective()}
        pairs: list[Pair] = [(current[(p.job, p.group)], p) for p in plans]
        pairs = [(a, b) for a, b in pairs if a != b]
        if not pairs:  # the usual case for a finish: nothing to write
            return Written(0, 0.0)
        ov = dict(self.overlay)
        for _, p in pairs:
            assert p is not None
            ov[(p.job, p.group)] = p
        return self._change(pairs, self._plans, ov)

    def _apply(self, changes: list[PlanChange], overlay: dict[GroupKey, GroupPlan]) -> Undo:
        """Write a static change; what :meth:`_commit` needs to take it back."""
        before = (self._plans, self.overlay)
        pairs = self._pairs(changes, overlay)
        self._change(pairs, self.planner.plans(), overlay)
        return [(b, a) for a, b in reversed(pairs)], *before

    def _commit(self, token: object, undo: Undo) -> None:
        """Commit the registry; if that fails, bring the planner (``token``) and the
        switches back (``undo``: what the registry still says) and re-raise."""
        try:
            self.registry.commit()
        except RegistryError:
            self.planner.restore(token)
            pairs, plans, overlay = undo
            try:
                self._change(pairs, plans, overlay)
            except Exception:
                self._wanted, self._tally = self._next_sets(*self._entry_delta(pairs), check=False)
                self._plans, self.overlay = plans, overlay
                for sync in self.agents.values():
                    sync.resync("registry commit failed")
            raise

    # ------------------------------------------------------------ changes

    def register(self, desc: Any) -> dict[str, Any]:
        """Register one job (paradigm description or explicit EchelonFlow spec).

        Limits are checked and the description parsed before the lock is taken:
        parsing is pure, and a large job must not stall every other request."""
        parsed = self._parse(desc)
        with self.lock:
            with self._transaction() as token:
                rec, changes = self._stage(desc, parsed)
                undo = self._apply(changes, self.overlay)
            self._commit(token, undo)
            self._track(parsed, rec.groups)
            self._settled()
            out = self.show(rec.job_id)
            out["warnings"] = [str(w) for w in parsed.warnings]
            return out

    def _parse(self, desc: Any) -> Description:
        """``desc`` checked against the limits and parsed (pure: outside the lock)."""
        check_description(desc)
        parsed = load_description(desc, self.topo.hosts, builder=FlowBudget)
        check_parsed(len(parsed.groups))
        check_flows(parsed.echelons)
        return parsed

    def _begin(self) -> object:
        """Snapshot the planner and open a registry transaction; the token undoes the
        planner (:meth:`Planner.restore`), ``registry.rollback()`` the rest."""
        token = self.planner.snapshot()
        self.registry.begin()
        return token

    @contextmanager
    def _transaction(self) -> Iterator[object]:
        """:meth:`_begin` around a change (caller holds the lock): any error inside
        restores the planner, rolls the registry back and re-raises. The caller ends it
        with :meth:`_commit` once the switches took the change."""
        token = self._begin()
        try:
            yield token
        except BaseException:
            self.planner.restore(token)
            self.registry.rollback()
            raise

    def _stage(self, desc: Any, parsed: Description) -> tuple[JobRecord, list[PlanChange]]:
        """A registration's own steps, inside the caller's registry transaction and
        planner snapshot (both undone by the caller on failure, or for a dry run): the
        job's IDs from the registry, then the planner's changes with the job added."""
        rec = self.registry.add_job(parsed.job_id, dict(desc), list(parsed.groups))
        return rec, self.planner.add(parsed, rec.groups)

    def plan_registration(self, desc: Any) -> dict[str, Any]:
        """What :meth:`register` of ``desc`` would install now, changing nothing.

        Why here and not in ``echelon show``: the levels of a job depend on every job
        registered (one global order, one cut of all ranks into the switch's levels),
        and only the controller knows them. The same steps as a registration -- IDs
        from the registry, :meth:`Planner.add` -- inside a transaction and a planner
        snapshot that are both undone, so the answer is the plan a registration at
        this moment installs. ``moves``: the registered groups whose plan it changes."""
        parsed = self._parse(desc)
        with self.lock:
            token = self._begin()
            try:
                rec, changes = self._stage(desc, parsed)
                out = self.show(rec.job_id)
            finally:
                self.planner.restore(token)
                self.registry.rollback()
        out["installed"] = {n: False for n in self.agents}
        out["warnings"] = [str(w) for w in parsed.warnings]
        out["moves"] = [
            {
                "job": c.key[0],
                "group": c.key[1],
                "priority_before": c.old.priority,
                "priority_after": c.new.priority,
                "ranges_before": len(c.old.ranges),
                "ranges_after": len(c.new.ranges),
            }
            for c in changes
            if c.old is not None and c.new is not None and c.key not in self.overlay
        ]
        return out

    def remove(self, job_id: str) -> None:
        with self.lock:
            with self._transaction() as token:
                self.registry.remove_job(job_id)
                overlay = {k: p for k, p in self.overlay.items() if k[0] != job_id}
                changes = self.planner.remove(job_id) if job_id in self.planner else []
                undo = self._apply(changes, overlay)
            self._commit(token, undo)
            self.orphans.pop(job_id, None)
            self.progress.remove_job(job_id)
            self._settled()

    def set_policy(self, name: str) -> None:
        check_policy(name)
        with self.lock:
            with self._transaction() as token:
                self.registry.set_setting("policy", name)
                undo = self._apply(self.planner.set_policy(name), {})
            self._commit(token, undo)
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
            parsed = self.planner.job(job_id)
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
                g["switches"] = sorted(self._group_entries(p))
                g["priority"] = p.priority
                g["ranges"] = [
                    {"lo_us": r.lo_us, "hi_us": r.hi_us, "priority": r.priority} for r in p.ranges
                ]
            out["echelonflows"] = [echelonflow_view(ef) for ef in parsed.echelons]
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
        switches = {name: switch_view(a, self._tally[name]) for name, a in self.agents.items()}
        with self.lock:
            n_jobs = len(self.planner) + len(self.orphans)
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
