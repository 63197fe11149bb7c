"""Progress reports to the controller: the library call and the host agent's hook.

A training process (or the host agent) tells the controller when this host
starts sending a group and when a group's flows to this host have all arrived::

    from hostagent.progress import ProgressReporter

    rep = ProgressReporter("http://127.0.0.1:8080", job="dp", host="h4")
    rep.entered(iteration=0)                    # about to start: before any byte leaves
    rep.released(iteration=3, group="push")     # before the first byte of push leaves
    rep.finished(iteration=3, group="pull")     # the last layer of pull arrived
    rep.sending(iteration=3, group="push", sent={0: 65536, 1: 8192})  # bytes so far
    rep.close()                                 # flushes the last snapshot

``api`` may also be ``unix:/path/to/socket``: the controller's ``--progress-socket``
(datagrams, no answer), for hosts in another network namespace.

Calls never block the caller on the network: a background thread sends the
*latest snapshot* (everything this host saw of the current iteration, with a
sequence number and a per-process session), so snapshots queued while one is in
flight collapse into one, and a report lost to a timeout or a controller restart
is repaired by the next. Errors are counted (``errors``), never raised into
training. Sent with the standard library (``http.client``); the body is the core's
:class:`echelon.progress.ReportBody`, the schema the controller validates.

Why snapshots and not events: see :mod:`controlplane.inflight` (idempotent,
loss-tolerant, rebuilt after restarts).

Bytes sent: a snapshot also carries, per group, the payload bytes this host has sent
of each of its flows (``sent``). The host agent's :class:`HostProgress` samples them
every ``period`` while it sends (:data:`echelon.progress.REPORT_PERIOD_S`, which the
packet model plays too; 20 small reports a second per sending job cost the controller
little, and an unchanged figure sends none) and at each release.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import urlsplit

from echelon.progress import REPORT_PERIOD_S, ReportBody
from hostagent.scenario import FlowSpec, Scenario

log = logging.getLogger(__name__)

#: Per group name: flow index -> payload bytes this host has sent of that flow.
GroupBytes = Mapping[str, Mapping[int, int]]


class ProgressReporter:
    """Progress of one (job, host), sent to ``POST {api}/progress``."""

    def __init__(
        self,
        api: str,
        job: str,
        host: str,
        token: str | None = None,
        timeout: float = 2.0,
        wait: bool = False,
        run: int = 0,
        ca: str | None = None,
    ) -> None:
        """``ca``: the PEM CA an ``https`` controller's certificate chains to (default:
        the system's roots)."""
        #: ``unix:PATH``: datagrams to the controller's --progress-socket (no answer)
        self._unix = api[len("unix:") :] if api.startswith("unix:") else None
        u = urlsplit(api if self._unix is None else "http://unix")
        if u.scheme not in ("http", "https") or not u.hostname or self._unix == "":
            raise ValueError(f"api: expected http(s)://host:port or unix:PATH, got {api!r}")
        #: https: verified against ``ca`` (read once, here: a bad file is the caller's error)
        self._tls = ssl.create_default_context(cafile=ca) if u.scheme == "https" else None
        self._addr = (u.hostname, u.port or (443 if self._tls else 80))
        self._path = (u.path.rstrip("/") or "") + "/progress" + ("?wait=true" if wait else "")
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self.job, self.host = job, host
        self.session = uuid.uuid4().hex[:12]
        #: which start of the job this process reports (higher: restarted from scratch)
        self.run = run
        self.seq = 0
        self.iteration = -1
        self._released: set[str] = set()
        self._finished: set[str] = set()
        #: group -> flow index -> payload bytes sent, in ``iteration``
        self._sent: dict[str, dict[int, int]] = {}
        self._cond = threading.Condition()
        self._latest: ReportBody | None = None
        self._busy = False
        self._closed = False
        self.sent = 0
        self.errors = 0
        self._conn: http.client.HTTPConnection | None = None
        self._thread = threading.Thread(target=self._run, name=f"progress-{job}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ the calls

    def entered(self, iteration: int) -> None:
        """This host is starting ``iteration`` (nothing sent or received of it yet).

        The controller then plans the job's *opening* groups, those every iteration
        sends after compute alone (or none), before their first packet: call it ahead of the first
        byte (the host agent does, for iteration 0, before it reports ready)."""
        self._mark(iteration, None, finished=False)

    def released(self, iteration: int, group: str, sent: GroupBytes | None = None) -> None:
        """This host started sending ``group`` in ``iteration``; ``sent``: the bytes
        sent so far of its flows of ``iteration`` (as :meth:`sending_groups`), in the
        same snapshot."""
        self._mark(iteration, group, finished=False, sent=sent)

    def finished(self, iteration: int, group: str) -> None:
        """Every flow of ``group`` in ``iteration`` addressed to this host has arrived."""
        self._mark(iteration, group, finished=True)

    def sending(self, iteration: int, group: str, sent: Mapping[int, int]) -> None:
        """This host has sent ``sent[index]`` payload bytes of its flow ``index`` of
        ``group`` in ``iteration`` so far.

        Why: the controller ranks the flows in flight by the bytes they have left (as
        the simulator does); events alone would leave those figures as old as the last
        release, so the host agent calls this every progress period while it sends
        (:class:`HostProgress`). Rules, as for the events: an older ``iteration`` is
        ignored, a newer one starts afresh (as :meth:`entered`). Figures merge into the
        iteration's: an index not given keeps its figure, and a figure never goes down
        (bytes sent only grow; a lower one was sampled earlier). Nothing changed: no
        snapshot. A flow stays listed, fully sent at its size, for the rest of the
        iteration -- the controller counts a flow it has no figure for as whole, so
        leaving out what this host finished sending would make it look unsent.
        """
        self._mark(iteration, None, finished=False, sent={group: sent})

    def sending_groups(self, iteration: int, sent: GroupBytes) -> None:
        """:meth:`sending` for several groups of ``iteration`` at once: one snapshot."""
        self._mark(iteration, None, finished=False, sent=sent)

    def _merge(self, group: str, sent: Mapping[int, int]) -> bool:
        """Merge ``sent`` into ``group``'s figures (each only grows); ``True`` if any did."""
        have = self._sent.get(group, {})
        grown = {int(i): int(b) for i, b in sent.items() if b > have.get(i, -1)}
        if grown:
            self._sent[group] = {**have, **grown}
        return bool(grown)

    def _mark(
        self, iteration: int, group: str | None, finished: bool, sent: GroupBytes | None = None
    ) -> None:
        with self._cond:
            if iteration < self.iteration:
                return  # a late call about an iteration this host has left
            changed = iteration > self.iteration
            if changed:
                self.iteration = iteration
                self._released, self._finished, self._sent = set(), set(), {}
            into = self._finished if finished else self._released
            if group is not None and group not in into:
                into.add(group)
                changed = True
            for g, flows in (sent or {}).items():
                changed = self._merge(g, flows) or changed
            if not changed:
                return  # nothing this host has not reported already
            self.seq += 1
            # unvalidated: the controller validates, and training never sees an error
            self._latest = ReportBody.model_construct(
                job=self.job,
                host=self.host,
                iteration=self.iteration,
                session=self.session,
                seq=self.seq,
                run=self.run,
                released=tuple(sorted(self._released)),
                finished=tuple(sorted(self._finished)),
                sent={g: tuple(sorted(v.items())) for g, v in sorted(self._sent.items())},
                at=time.time(),
            )
            self._cond.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until the latest snapshot was sent (or failed); ``True`` if idle."""
        with self._cond:
            return self._cond.wait_for(lambda: self._latest is None and not self._busy, timeout)

    def close(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

    # ------------------------------------------------------------ the sender thread

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._latest is not None or self._closed)
                if self._latest is None:
                    break
                body, self._latest = self._latest, None
                self._busy = True
            ok = self._post(body)
            with self._cond:
                self._busy = False
                self.sent += ok
                self.errors += not ok
                self._cond.notify_all()
        if self._conn is not None:
            self._conn.close()

    def _post(self, body: ReportBody) -> bool:
        data = json.dumps(body.model_dump()).encode()
        if self._unix is not None:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                    s.sendto(data, self._unix)
                return True
            except OSError as exc:
                log.info("progress datagram not sent (%s); the next one repairs it", exc)
                return False
        for attempt in (1, 2):  # one retry on a stale keep-alive connection
            try:
                if self._conn is None and self._tls is not None:
                    self._conn = http.client.HTTPSConnection(
                        *self._addr, timeout=self.timeout, context=self._tls
                    )
                elif self._conn is None:
                    self._conn = http.client.HTTPConnection(*self._addr, timeout=self.timeout)
                self._conn.request("POST", self._path, data, self._headers)
                resp = self._conn.getresponse()
                payload = resp.read()
                if resp.status == 200:
                    return True
                log.warning("progress report refused: %s %s", resp.status, payload[:200])
                return False
            except (OSError, http.client.HTTPException) as exc:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if attempt == 2:
                    log.info("progress report not sent (%s); the next one repairs it", exc)
        return False


class PayloadSource(Protocol):
    """What :meth:`HostProgress.watch` reads: a :class:`hostagent.sender.Sender`."""

    def payload_sent(self) -> Mapping[str, int]:
        """Payload bytes sent of each flow (by uid) released and not fully sent; a
        flow is listed before its release is reported, so a released flow missing
        here was fully sent."""
        ...


class HostProgress:
    """The host agent's hook: reports from what the agent sees (scenario flows).

    ``released(uid)``: the agent released a flow it sends -> its group is released
    (the :class:`hostagent.sender.Sender`'s ``on_release``).
    ``arrived(uid)``: a flow to this host completed -> once every flow of that group
    instance addressed to this host has, the group is finished here (a
    :class:`hostagent.receiver.Receiver` listener).
    ``watch(sender, start_at)``: from then on, the bytes sent of this host's released
    flows go into the reports (:meth:`ProgressReporter.sending`): at each release, and
    every ``period`` seconds after ``start_at`` from a daemon thread (``period <= 0``:
    only at releases).
    """

    def __init__(self, sc: Scenario, host: str, api: str, period: float = REPORT_PERIOD_S) -> None:
        # the scenario's start instant numbers this run of its jobs: a scenario played
        # again (a later start) is a restart, and the controller forgets the old progress
        run = round(sc.start_at * 1000)
        self.period = period
        self.reporters: dict[str, ProgressReporter] = {}
        self._of: dict[str, tuple[str, int, str]] = {}
        self._left: dict[tuple[str, int, str], int] = {}
        #: the flows this host sends, by uid
        self._sends: dict[str, FlowSpec] = {}
        for e in sc.echelons:
            for f in e.flows:
                if host in (f.src, f.dst):
                    self._of[e.uid(f)] = (e.job, e.iteration, e.group)
                if f.src == host:
                    self._sends[e.uid(f)] = f
                if f.dst == host:
                    key = (e.job, e.iteration, e.group)
                    self._left[key] = self._left.get(key, 0) + 1
                if host in (f.src, f.dst) and e.job not in self.reporters:
                    self.reporters[e.job] = ProgressReporter(api, e.job, host, run=run)
        self._lock = threading.Lock()
        self._source: PayloadSource | None = None
        #: released flows this host sends not yet seen fully sent (an ordered set)
        self._watched: dict[str, None] = {}
        self._stop = threading.Event()
        #: the sampling thread (``None``: not watching, or ``period <= 0``)
        self.sampler: threading.Thread | None = None

    def watch(self, source: PayloadSource, start_at: float | None = None) -> None:
        """Report the bytes ``source`` (the sender) says it has sent; starts sampling at
        ``start_at + k * period`` (Unix seconds, k >= 1; ``None``: from now).

        Why on the scenario's clock: every host then samples at the same instants, one
        period after the start first, as the packet model's hosts report
        (:mod:`sim.packet`). Sampled from whenever the agent got ready, a host's first
        figures came a few ms into the run, and a re-plan then ranked a group by a few
        packets its host happened to have sent: two pulls that tie but for those
        packets changed places from one run to the next (docs/measurements/demo.md)."""
        self._source = source
        if self.period > 0 and self.sampler is None:
            origin = time.time() if start_at is None else start_at
            self.sampler = threading.Thread(target=self._sample_every, args=(origin,),
                                            name="progress-sampler", daemon=True)  # fmt: skip
            self.sampler.start()

    def entered(self, iteration: int) -> None:
        """This host is about to start ``iteration`` of every job it takes part in."""
        for r in self.reporters.values():
            r.entered(iteration)

    def flush(self, timeout: float = 5.0) -> bool:
        """Every reporter's latest snapshot sent (or failed); ``True`` if all idle."""
        return all([r.flush(timeout) for r in self.reporters.values()])

    def released(self, uid: str) -> None:
        job, it, group = self._of[uid]
        if uid in self._sends:
            with self._lock:
                self._watched[uid] = None
        sent = self._bytes((job, it)).get(job, {}).get(it)
        self.reporters[job].released(it, group, sent=sent)

    def arrived(self, uid: str, t: float = 0.0) -> None:
        """A flow to this host completed (at ``t``: a :class:`Receiver` listener)."""
        job, it, group = self._of[uid]
        with self._lock:
            self._left[(job, it, group)] -= 1
            done = self._left[(job, it, group)] == 0
        if done:
            self.reporters[job].finished(it, group)

    def sample(self) -> None:
        """Give each reporter the bytes sent of every flow released and not yet seen
        fully sent (one call per job and iteration; unchanged figures send nothing)."""
        for job, by_it in self._bytes().items():
            for it, groups in sorted(by_it.items()):
                self.reporters[job].sending_groups(it, groups)

    def _bytes(
        self, only: tuple[str, int] | None = None
    ) -> dict[str, dict[int, dict[str, dict[int, int]]]]:
        """job -> iteration -> group -> flow index -> payload bytes sent, of the watched
        flows (``only``: of that (job, iteration)). A watched flow the source no longer
        lists was fully sent: its size, and it is watched no more."""
        out: dict[str, dict[int, dict[str, dict[int, int]]]] = {}
        if self._source is None:
            return out
        # under the lock: a flow released after the source was read is not watched yet
        # (the sender lists a flow before it reports its release), so "missing" is sure
        with self._lock:
            live = self._source.payload_sent()
            for uid in list(self._watched):
                job, it, group = self._of[uid]
                if only is not None and (job, it) != only:
                    continue
                f = self._sends[uid]
                nbytes = live.get(uid)
                if nbytes is None:
                    nbytes = f.size
                    del self._watched[uid]
                out.setdefault(job, {}).setdefault(it, {}).setdefault(group, {})[f.index] = nbytes
        return out

    def _sample_every(self, origin: float) -> None:
        # Event.wait is the period's timer (and wakes at once on close); the ticks are
        # origin + k * period, a late wake-up skipping to the next one
        k = 1
        while not self._stop.wait(max(0.0, origin + k * self.period - time.time())):
            try:
                self.sample()
            except Exception:  # never let a bad sample end the reports
                log.exception("progress sample failed")
            k = max(k + 1, math.floor((time.time() - origin) / self.period) + 1)

    def close(self) -> None:
        """Stop sampling, report the last figures (what the sender finished since the
        last sample) and flush every reporter."""
        self._stop.set()
        if self.sampler is not None:
            self.sampler.join(5.0)
        try:
            self.sample()
        except Exception:
            log.exception("progress sample failed")
        for r in self.reporters.values():
            r.close()
