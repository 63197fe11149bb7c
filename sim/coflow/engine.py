"""Event-driven simulation of a coflow trace: every coflow one EchelonFlow.

Same model as :mod:`sim.core.engine` (fluid flows, strict priority across a policy's
ranks, max-min fair inside a rank, the policy asked again at group events, i.e.
when a coflow arrives or completes), specialised to what a coflow trace is: no
compute, no iterations, all of a coflow's flows released at its arrival, every
flow crossing its mapper port's uplink and its reducer port's downlink.

Why a loop of its own: the trace has 700k flows and ~50k of them in flight, and
the general engine keeps per-flow Python state (task graphs, dicts of remaining
bytes per policy call). Here per-flow state lives in numpy arrays, the active
flows are kept sorted by rank between policy calls (so an allocation needs no
sort), bandwidth comes from the compiled kernel of :mod:`sim.core.alloc`, and a
policy that is a :class:`echelon.policies.table.TablePolicy` gets its
:class:`~echelon.policies.table.FlowTable` assembled from these arrays (its
public ``decide``) instead of walking EchelonFlow objects; any other
:class:`echelon.schedule.Policy` is called through ``schedule()`` as usual.

Arrangements (``model``): ``coflow`` -- ``A == 0``, ``t_ref`` = arrival (what
Varys and Sincronia assume); ``reducers-in-order`` -- the reducers of a coflow
consume one after another, in trace order, each for as long as its input takes
through one port: the flows into reducer ``k`` have ``A = sum_{i<k} S_i / B`` and
``t_ref = arrival + S_0 / B``.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow, FlowKey
from echelon.policies.baselines import FifoPolicy
from echelon.policies.table import FlowTable, TablePolicy
from echelon.schedule import Policy, Schedule
from sim.coflow.trace import FlowArrays
from sim.core.alloc import advance_and_mark, allocate_live, time_to_next
from sim.core.config import SimError, resolve_policy
from sim.core.heads import advance_heads, allocate_heads, build_heads, time_to_next_moving

MODELS = ("coflow", "reducers-in-order")

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

_TIME_EPS = 1e-9
_NONE = np.iinfo(np.int64).max


class PortFabric:
    """A non-blocking switch of ``ports`` ports (``r0`` ... ``r<ports-1>``).

    Unlike :class:`echelon.network.BigSwitch`, a flow from a port to itself still
    crosses that port's up- and downlink: ports are racks, and the trace's
    rack-to-rack flows include a rack's own (coflowsim counts them the same way).
    """

    def __init__(self, ports: int, bytes_per_s: float) -> None:
        if not bytes_per_s > 0:
            raise SpecError("port-gbit", f"must be positive, got {bytes_per_s}")
        self.ports = ports
        links = {f"up:r{p}": bytes_per_s for p in range(ports)}
        links.update({f"down:r{p}": bytes_per_s for p in range(ports)})
        self._links = MappingProxyType(links)

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        return (f"up:{src}", f"down:{dst}")


@dataclass
class CoflowResult:
    """Per-coflow arrival and finish (seconds) and run statistics."""

    policy: str
    model: str
    names: list[str]
    arrival: Floats
    finish: Floats
    n_flows: int
    n_events: int = 0
    n_reranks: int = 0
    wall_s: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def cct(self) -> Floats:
        return self.finish - self.arrival

    def summary(self) -> dict[str, Any]:
        cct = self.cct * 1000.0
        return {
            "policy": self.policy,
            "model": self.model,
            "coflows": len(self.names),
            "flows": self.n_flows,
            "avg_cct_ms": round(float(cct.mean()), 3) if len(cct) else 0.0,
            "p50_cct_ms": round(float(np.percentile(cct, 50)), 3) if len(cct) else 0.0,
            "p95_cct_ms": round(float(np.percentile(cct, 95)), 3) if len(cct) else 0.0,
            "makespan_s": round(float(self.finish.max()), 3) if len(cct) else 0.0,
            "events": self.n_events,
            "policy_calls": self.n_reranks,
            "wall_s": round(self.wall_s, 3),
            **self.options,
        }

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"coflow": n, "arrival_s": float(a), "finish_s": float(f), "cct_ms": float(f - a) * 1e3}
            for n, a, f in zip(self.names, self.arrival, self.finish, strict=True)
        ]


def arrangement(fa: FlowArrays, model: str, bytes_per_s: float) -> tuple[Floats, Floats]:
    """``(t_ref per coflow, offset per flow)`` of an arrangement model."""
    if model not in MODELS:
        raise SpecError("arrangement", f"unknown model {model!r} (known: {list(MODELS)})")
    offset = np.zeros(fa.n_flows, dtype=np.float64)
    t_ref = fa.arrival.copy()
    if model == "coflow":
        return t_ref, offset
    for c in range(len(fa.names)):
        lo, hi = int(fa.first[c]), int(fa.first[c] + fa.count[c])
        red = fa.reducer[lo:hi]
        per_red = np.bincount(red, weights=fa.size[lo:hi]) / bytes_per_s
        before = np.concatenate(([0.0], np.cumsum(per_red)[:-1]))
        offset[lo:hi] = before[red]
        t_ref[c] += per_red[0]
    return t_ref, offset


class CoflowSimulator:
    """``CoflowSimulator(flows, policy, port_bytes_per_s).run() -> CoflowResult``.

    ``use_table=False`` calls table policies through ``schedule()``, and
    ``pair_heads=False`` keeps distinct-rank policies on the general allocator;
    both exist so that tests can check the fast paths give the same finish times.
    """

    def __init__(
        self,
        fa: FlowArrays,
        policy: str | Policy,
        port_bytes_per_s: float,
        model: str = "coflow",
        levels: int | None = None,
        rerank: str = "group",
        use_table: bool = True,
        pair_heads: bool = True,
    ) -> None:
        self.fa = fa
        self.policy = resolve_policy(policy)
        self.model = model
        self.levels = levels
        self.rerank_flows = rerank == "flow"
        self.net = PortFabric(fa.ports, port_bytes_per_s)
        self.cap = np.full(2 * fa.ports, float(port_bytes_per_s))
        self.t_ref, self.offset = arrangement(fa, model, port_bytes_per_s)
        n = fa.n_flows
        self.coflow_of = np.repeat(np.arange(len(fa.names), dtype=np.int64), fa.count)
        self.index = np.arange(n, dtype=np.int64) - fa.first[self.coflow_of]
        self.g_rem = fa.size.copy()
        self.g_rank = np.zeros(n, dtype=np.int64)
        self.left = fa.count.copy()
        self.finish = np.full(len(fa.names), math.nan)
        self.alive: dict[int, None] = {}
        self.use_table = use_table and isinstance(self.policy, TablePolicy) and levels is None
        # the per-flow baselines' decide() is a dict of their rank(): take the array
        # itself (building and reading back a dict of every flow in flight cost ~15 s
        # of fifo's run on FB2010)
        self._rank: Callable[[FlowTable], Ints] | None = None
        if self.use_table and getattr(type(self.policy), "decide", None) is FifoPolicy.decide:
            self._rank = self.policy.rank  # type: ignore[attr-defined]
        self._keys: dict[int, list[FlowKey]] = {}
        self._echelons: dict[int, EchelonFlow] = {}
        # active flows, kept sorted by (rank, flow id) between policy calls
        self.gid: Ints = np.zeros(0, dtype=np.int64)
        self.rem: Floats = np.zeros(0)
        self.rate: Floats = np.zeros(0)
        self.paths: Ints = np.zeros((0, 2), dtype=np.int64)
        self.key: Ints = np.zeros(0, dtype=np.int64)
        self.dead: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self.n_dead = 0  # finished flows still in the arrays (compacted lazily)
        # distinct ranks (per-flow FIFO, EDF ...): only pair heads can get a rate
        # (sim.core.heads); ``heads`` says whether the current ranks are distinct
        self.heads = False
        self._heads_ok = pair_heads and (fa.n_flows == 0 or float(fa.size.min()) > 1e-6)
        self._tail: Ints = np.zeros(0, dtype=np.int64)  # scratch, ports^2 (on first use)
        self._nxt: Ints = np.zeros(0, dtype=np.int64)
        self._hpos: Ints = np.zeros(0, dtype=np.int64)  # pair heads in rank order
        self._hu: Ints = np.zeros(0, dtype=np.int64)
        self._hd: Ints = np.zeros(0, dtype=np.int64)
        self._h = np.zeros(1, dtype=np.int64)  # number of heads
        self._moving: Ints = np.zeros(2 * fa.ports + 1, dtype=np.int64)
        self._n_moving = 0
        self._out = np.zeros(1)
        self.n_reranks = 0

    # ------------------------------------------------------------------ loop

    def run(
        self,
        max_events: int | None = None,
        progress: Callable[[int, int, float], None] | None = None,
    ) -> CoflowResult:
        """Simulate to the end. ``progress(coflows finished, coflows, simulated time)``
        is called every 2,048 events and at the end (a CLI's progress bar; it only reads)."""
        wall = time.perf_counter()
        fa = self.fa
        arrival = fa.arrival
        n_cf = len(fa.names)
        now = 0.0
        ai = 0
        events = 0
        t_fin = math.inf  # absolute time of the next finish at the current rates
        while True:
            t_arr = float(arrival[ai]) if ai < n_cf else math.inf
            t = min(t_arr, t_fin)
            if t == math.inf:
                if len(self.gid) > self.n_dead:
                    raise SimError("flows are active but none can make progress")
                break
            changed, group = self._advance(t - now, t)
            now = t
            while ai < n_cf and arrival[ai] <= now:
                self._arrive(ai)
                ai += 1
                group = changed = True
            if group or (self.rerank_flows and changed):
                self._rerank(now)
            if changed and self.heads:
                self._compact(force=False)
                self._n_moving = allocate_heads(
                    self._hpos,
                    self._hu,
                    self._hd,
                    int(self._h[0]),
                    self.cap,
                    self.rate,
                    self.rem,
                    self._moving,
                    self._n_moving,
                    self._out,
                )
                t_rel = float(self._out[0])
            elif changed:
                self._compact(force=False)
                t_rel = allocate_live(
                    self.paths, self.key, self.cap, self.dead, self.rem, self.rate
                )
            else:  # rounding left the due flow a hair short: ask again
                t_rel = self._time_to_next()
            t_fin = now + t_rel
            events += 1
            if progress is not None and not events % 2048:
                progress(int(np.count_nonzero(~np.isnan(self.finish))), n_cf, now)
            if max_events is not None and events > max_events:
                raise SimError(f"more than {max_events} events")
        if progress is not None:
            progress(int(np.count_nonzero(~np.isnan(self.finish))), n_cf, now)
        return CoflowResult(
            policy=str(getattr(self.policy, "name", "?")),
            model=self.model,
            names=list(fa.names),
            arrival=arrival.copy(),
            finish=self.finish,
            n_flows=fa.n_flows,
            n_events=events,
            n_reranks=self.n_reranks,
            wall_s=time.perf_counter() - wall,
        )

    def _time_to_next(self) -> float:
        if self.heads:
            return float(time_to_next_moving(self.rem, self.rate, self._moving, self._n_moving))
        return float(time_to_next(self.rem, self.rate)) if len(self.gid) else math.inf

    def _build_heads(self) -> None:
        """Pair heads of the current (rank-sorted) arrays; no flow moves yet."""
        n = len(self.gid)
        if not len(self._tail):
            self._tail = np.full(self.fa.ports**2, -1, dtype=np.int64)
        self._nxt = np.empty(n, dtype=np.int64)
        self._hpos = np.empty(n, dtype=np.int64)
        self._hu = np.empty(n, dtype=np.int64)
        self._hd = np.empty(n, dtype=np.int64)
        self._h[0] = build_heads(
            self.paths,
            self.dead,
            self.fa.ports,
            self._nxt,
            self._hpos,
            self._hu,
            self._hd,
            self._tail,
        )
        self.rate[:] = 0.0
        self._n_moving = 0

    def _compact(self, force: bool) -> None:
        """Drop dead flows from the arrays once they are many (or when ``force``)."""
        if not self.n_dead or (not force and self.n_dead * 4 < max(len(self.gid), 16384)):
            return
        keep = ~self.dead
        self.gid, self.rem, self.rate = self.gid[keep], self.rem[keep], self.rate[keep]
        self.paths, self.key, self.dead = self.paths[keep], self.key[keep], self.dead[keep]
        self.n_dead = 0
        if self.heads:  # positions moved
            self._build_heads()

    def _advance(self, dt: float, now: float) -> tuple[bool, bool]:
        """Advance the fluid by ``dt``, drop finished flows, record completed coflows.

        Returns (any flow finished, any coflow completed).
        """
        n = len(self.gid)
        if n == self.n_dead:
            return False, False
        if self.heads:
            done = np.empty(self._n_moving, dtype=np.int64)
            nd = advance_heads(
                self.gid,
                self.rem,
                self.rate,
                self.dead,
                self.paths,
                self._nxt,
                self._hpos,
                self._hu,
                self._hd,
                self._h,
                self._moving,
                self._n_moving,
                dt,
                _TIME_EPS,
                done,
            )
        else:
            done = np.empty(n, dtype=np.int64)
            nd = advance_and_mark(self.gid, self.rem, self.rate, self.dead, dt, _TIME_EPS, done)
        if not nd:
            return False, False
        self.n_dead += nd
        dg = done[:nd]
        self.g_rem[dg] = 0.0
        ended = False
        left, finish = self.left, self.finish
        for c in self.coflow_of[dg].tolist():
            left[c] -= 1
            if left[c] == 0:
                finish[c] = now
                self.alive.pop(c, None)
                ended = True
        return True, ended

    def _arrive(self, c: int) -> None:
        lo = int(self.fa.first[c])
        hi = lo + int(self.fa.count[c])
        g = np.arange(lo, hi, dtype=np.int64)
        self.alive[c] = None
        self.gid = np.concatenate((self.gid, g))
        self.rem = np.concatenate((self.rem, self.fa.size[lo:hi]))
        self.rate = np.concatenate((self.rate, np.zeros(hi - lo)))
        rows = np.stack((self.fa.src[lo:hi], self.fa.ports + self.fa.dst[lo:hi]), axis=1)
        self.paths = np.concatenate((self.paths, rows))
        self.key = np.concatenate((self.key, np.zeros(hi - lo, dtype=np.int64)))
        self.dead = np.concatenate((self.dead, np.zeros(hi - lo, dtype=np.bool_)))

    # ------------------------------------------------------------ policies

    def _flow_keys(self, c: int) -> list[FlowKey]:
        keys = self._keys.get(c)
        if keys is None:
            name = self.fa.names[c]
            keys = [(name, j) for j in range(int(self.fa.count[c]))]
            self._keys[c] = keys
        return keys

    def echelon(self, c: int) -> EchelonFlow:
        """Coflow ``c`` as an EchelonFlow (sizes rounded up to whole bytes)."""
        ef = self._echelons.get(c)
        if ef is None:
            fa = self.fa
            lo, hi = int(fa.first[c]), int(fa.first[c] + fa.count[c])
            flows = tuple(
                Flow(j, f"r{s}", f"r{d}", max(1, math.ceil(z)), o)
                for j, (s, d, z, o) in enumerate(
                    zip(
                        fa.src[lo:hi].tolist(),
                        fa.dst[lo:hi].tolist(),
                        fa.size[lo:hi].tolist(),
                        self.offset[lo:hi].tolist(),
                        strict=True,
                    )
                )
            )
            name = fa.names[c]
            ef = EchelonFlow(name, name, name, flows, float(self.t_ref[c]))
            self._echelons[c] = ef
        return ef

    def _remaining(self, gids: Ints) -> Floats:
        rem = self.g_rem[gids]
        return np.where(rem > 0, np.maximum(np.ceil(rem), 1.0), 0.0)

    def table(self, alive: list[int]) -> tuple[FlowTable, Ints]:
        """The policies' FlowTable of the alive coflows, built from the arrays."""
        fa = self.fa
        counts = fa.count[alive]
        gids = np.concatenate([np.arange(fa.first[c], fa.first[c] + fa.count[c]) for c in alive])
        names = [fa.names[c] for c in alive]
        name_rank = np.empty(len(names), dtype=np.int64)
        name_rank[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names))
        n = len(gids)
        keys = list(itertools.chain.from_iterable(self._flow_keys(c) for c in alive))
        t = FlowTable(
            keys=keys,
            names=names,
            weight=np.ones(len(alive), dtype=np.float64),
            t_ref=self.t_ref[alive],
            name_rank=name_rank,
            ech=np.repeat(np.arange(len(alive), dtype=np.int64), counts),
            index=self.index[gids],
            offset=self.offset[gids],
            slack=np.zeros(n, dtype=np.float64),  # trace coflows carry no DAG
            remaining=self._remaining(gids),
            inc_flow=np.repeat(np.arange(n, dtype=np.int64), 2),
            inc_link=np.stack((fa.src[gids], fa.ports + fa.dst[gids]), axis=1).ravel(),
            cap=self.cap.copy(),
            job=np.arange(len(alive), dtype=np.int64),  # a trace coflow is its own job
        )
        return t, gids

    def _rerank(self, now: float) -> None:
        self._compact(force=True)
        if not self.alive:
            return
        self.g_rem[self.gid] = self.rem
        alive = list(self.alive)
        if self.use_table:
            assert isinstance(self.policy, TablePolicy)
            t, gids = self.table(alive)
            if self._rank is not None:
                ranks = self._rank(t)
            else:
                ranks = _ranks_in_order(self.policy.decide(t, now), t.keys)
        else:
            gids = np.concatenate(
                [np.arange(self.fa.first[c], self.fa.first[c] + self.fa.count[c]) for c in alive]
            )
            echelons = [self.echelon(c) for c in alive]
            keys = [k for c in alive for k in self._flow_keys(c)]
            rem = self._remaining(gids).astype(np.int64).tolist()
            remaining = dict(zip(keys, rem, strict=True))
            sched = self.policy.schedule(echelons, self.net, remaining, now)
            if self.levels is None:
                ranks = _ranks_in_order(sched, keys)
            else:
                from echelon.quantize import flow_levels

                lv = flow_levels(sched, echelons, tuple(range(1, self.levels)))
                ranks = np.array([-lv[k] if k in lv else _NONE for k in keys], dtype=np.int64)
        self.g_rank[gids] = ranks
        self.key = self.g_rank[self.gid]
        order = np.lexsort((self.gid, self.key))
        self.gid, self.rem, self.rate = self.gid[order], self.rem[order], self.rate[order]
        self.paths, self.key, self.dead = self.paths[order], self.key[order], self.dead[order]
        self.heads = self._heads_ok and bool(np.all(self.key[1:] != self.key[:-1]))
        if self.heads:
            self._build_heads()
        self.n_reranks += 1


def _ranks_in_order(sched: Schedule, keys: list[FlowKey]) -> Ints:
    """The schedule's ranks for ``keys``, in that order (missing flows: served last).

    Policies built on FlowTable return ranks in the table's key order; that is
    checked (cheaply: same key objects) before the fast read, else keys are looked up.
    """
    fr = sched.flow_rank
    if isinstance(fr, dict) and len(fr) == len(keys) and list(fr) == keys:
        return np.fromiter(fr.values(), dtype=np.int64, count=len(keys))
    return np.array([fr.get(k, _NONE) for k in keys], dtype=np.int64)
