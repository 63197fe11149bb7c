"""Progress reports to the controller: the library call and the host agent's hook.

A training process (or the host agent) tells the controller when this host
starts sending a group and when a group's flows to this host have all arrived::

    from hostagent.progress import ProgressReporter

    rep = ProgressReporter("http://127.0.0.1:8080", job="dp", host="h4")
    rep.entered(iteration=0)                    # about to start: before any byte leaves
    rep.released(iteration=3, group="push")     # before the first byte of push leaves
    rep.finished(iteration=3, group="pull")     # the last layer of pull arrived
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
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import uuid
from urllib.parse import urlsplit

from echelon.progress import ReportBody
from hostagent.scenario import Scenario

log = logging.getLogger(__name__)


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
    ) -> None:
        #: ``unix:PATH``: datagrams to the controller's --progress-socket (no answer)
        self._unix = api[len("unix:") :] if api.startswith("unix:") else None
        u = urlsplit(api if self._unix is None else "http://unix")
        if u.scheme != "http" or not u.hostname or self._unix == "":
            raise ValueError(f"api: expected http://host:port or unix:PATH, got {api!r}")
        self._addr = (u.hostname, u.port or 80)
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
        starts by sending, before their first packet: call it ahead of the first
        byte (the host agent does, for iteration 0, before it reports ready)."""
        self._mark(iteration, None, finished=False)

    def released(self, iteration: int, group: str) -> None:
        """This host started sending ``group`` in ``iteration``."""
        self._mark(iteration, group, finished=False)

    def finished(self, iteration: int, group: str) -> None:
        """Every flow of ``group`` in ``iteration`` addressed to this host has arrived."""
        self._mark(iteration, group, finished=True)

    def _mark(self, iteration: int, group: str | None, finished: bool) -> None:
        with self._cond:
            if iteration < self.iteration:
                return  # a late call about an iteration this host has left
            if iteration > self.iteration:
                self.iteration = iteration
                self._released, self._finished = set(), set()
            elif group is None:
                return  # entering an iteration this host already reported
            into = self._finished if finished else self._released
            if group is not None:
                if group in into:
                    return
                into.add(group)
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
                if self._conn is None:
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


class HostProgress:
    """The host agent's hook: reports from what the agent sees (scenario flows).

    ``released(uid)``: the agent released a flow it sends -> its group is released
    (the :class:`hostagent.sender.Sender`'s ``on_release``).
    ``arrived(uid)``: a flow to this host completed -> once every flow of that group
    instance addressed to this host has, the group is finished here (a
    :class:`hostagent.receiver.Receiver` listener).
    """

    def __init__(self, sc: Scenario, host: str, api: str) -> None:
        # the scenario's start instant numbers this run of its jobs: a scenario played
        # again (a later start) is a restart, and the controller forgets the old progress
        run = round(sc.start_at * 1000)
        self.reporters: dict[str, ProgressReporter] = {}
        self._of: dict[str, tuple[str, int, str]] = {}
        self._left: dict[tuple[str, int, str], int] = {}
        for e in sc.echelons:
            for f in e.flows:
                if host in (f.src, f.dst):
                    self._of[e.uid(f)] = (e.job, e.iteration, e.group)
                if f.dst == host:
                    key = (e.job, e.iteration, e.group)
                    self._left[key] = self._left.get(key, 0) + 1
                if host in (f.src, f.dst) and e.job not in self.reporters:
                    self.reporters[e.job] = ProgressReporter(api, e.job, host, run=run)
        self._lock = threading.Lock()

    def entered(self, iteration: int) -> None:
        """This host is about to start ``iteration`` of every job it takes part in."""
        for r in self.reporters.values():
            r.entered(iteration)

    def flush(self, timeout: float = 5.0) -> bool:
        """Every reporter's latest snapshot sent (or failed); ``True`` if all idle."""
        return all([r.flush(timeout) for r in self.reporters.values()])

    def released(self, uid: str) -> None:
        job, it, group = self._of[uid]
        self.reporters[job].released(it, group)

    def arrived(self, uid: str, t: float = 0.0) -> None:
        """A flow to this host completed (at ``t``: a :class:`Receiver` listener)."""
        job, it, group = self._of[uid]
        with self._lock:
            self._left[(job, it, group)] -= 1
            done = self._left[(job, it, group)] == 0
        if done:
            self.reporters[job].finished(it, group)

    def close(self) -> None:
        for r in self.reporters.values():
            r.close()
