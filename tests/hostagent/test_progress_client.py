"""The progress library: snapshots, sequence numbers, loss tolerance, never raising.

A stdlib HTTP server stands in for the controller's ``POST /progress`` (the
controller side is tested in tests/controlplane/test_progress.py and
test_online_inproc.py); it records every body it accepts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from echelon.progress import ReportBody
from echelon.specs import validate
from echelon.waiting import wait_until
from hostagent.progress import ProgressReporter
from targets.process import free_port

from .test_agent import play
from .test_closedloop import chain


class Sink:
    def __init__(self, port: int) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.refuse = False
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                code = 503 if sink.refuse else 200
                if code == 200:
                    sink.bodies.append(body)
                out = json.dumps({"changed": True}).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        # a short poll interval: shutdown() waits for the loop's next poll (0.5 s by default)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink(free_port())
    yield s
    s.stop()


def test_snapshots_carry_the_whole_iteration(sink: Sink) -> None:
    port = sink.server.server_address[1]
    rep = ProgressReporter(f"http://127.0.0.1:{port}", job="dp", host="h4")
    rep.released(0, "push")
    assert rep.flush()
    rep.finished(0, "pull")
    rep.finished(0, "pull")  # repeated call: no new snapshot
    assert rep.flush()
    rep.released(1, "push")  # next iteration: the sets start afresh
    rep.finished(0, "late")  # about an iteration this host has left: ignored
    rep.close()
    got = [(b["iteration"], b["seq"], b["released"], b["finished"]) for b in sink.bodies]
    assert got == [(0, 1, ["push"], []), (0, 2, ["push"], ["pull"]), (1, 3, ["push"], [])]
    assert {b["session"] for b in sink.bodies} == {rep.session}
    assert {(b["job"], b["host"]) for b in sink.bodies} == {("dp", "h4")}
    assert rep.errors == 0 and rep.sent == 3
    # every body is what the controller's schema accepts, its fields in the schema's order
    assert [validate(ReportBody, b).model_dump(mode="json") for b in sink.bodies] == sink.bodies
    assert [list(b) for b in sink.bodies] == [list(ReportBody.model_fields)] * 3


def test_a_snapshot_is_dated_when_it_was_taken_not_when_it_left(sink: Sink) -> None:
    """``at`` is read as the event happens: a snapshot that waits in the reporter (here
    behind a controller that is not listening yet) keeps its time."""
    port = sink.server.server_address[1]
    rep = ProgressReporter(f"http://127.0.0.1:{port}", job="dp", host="h4")
    before = time.time()
    rep.released(0, "push")
    after = time.time()
    assert rep.flush()
    rep.close()
    (body,) = sink.bodies
    assert before <= body["at"] <= after


def test_entering_an_iteration_sends_an_empty_snapshot_once(sink: Sink) -> None:
    port = sink.server.server_address[1]
    rep = ProgressReporter(f"http://127.0.0.1:{port}", job="dp", host="h4")
    rep.entered(0)
    assert rep.flush()
    rep.entered(0)  # again: nothing new
    rep.released(0, "push")
    rep.entered(0)  # after a release of that iteration: nothing new, the release stays
    assert rep.flush()
    rep.entered(1)
    rep.close()
    got = [(b["iteration"], b["seq"], b["released"], b["finished"]) for b in sink.bodies]
    assert got == [(0, 1, [], []), (0, 2, ["push"], []), (1, 3, [], [])]


def test_lost_reports_are_repaired_by_the_next_and_never_raise(sink: Sink) -> None:
    port = sink.server.server_address[1]
    rep = ProgressReporter(f"http://127.0.0.1:{port}", job="dp", host="h4", timeout=1.0)
    sink.refuse = True
    rep.released(0, "push")
    assert rep.flush()
    assert rep.errors == 1 and sink.bodies == []
    sink.refuse = False
    rep.finished(0, "pull")
    rep.close()
    assert sink.bodies[-1]["released"] == ["push"], "the lost release is in the next snapshot"
    assert sink.bodies[-1]["finished"] == ["pull"]


def test_controller_down_costs_nothing_but_a_count() -> None:
    rep = ProgressReporter(f"http://127.0.0.1:{free_port()}", job="j", host="h1", timeout=0.5)
    rep.released(0, "g")
    wait_until(lambda: rep.errors == 1, 20.0, "the failed send to be counted")
    rep.close()
    assert rep.sent == 0


def test_bad_api_address() -> None:
    with pytest.raises(ValueError, match="api"):
        ProgressReporter("ftp://x", job="j", host="h1")


@pytest.mark.slow
def test_agent_reports_releases_and_finishes(sink: Sink, tmp_path: Path) -> None:
    """Two real agents (closed loop, 2 iterations; h1 sends pull and a, h2 sends b)
    report to the controller address they are given: each host's last snapshot of
    each iteration lists what it sent as released and what it received as finished,
    and the bytes sent of its flows (3,000 each), all of them by the very last."""
    api = f"http://127.0.0.1:{sink.server.server_address[1]}"
    records = play(tmp_path, chain(iterations=2), ["h1", "h2"],
                   ("--controller", api, "--progress-period", "0.005"))  # fmt: skip
    assert all(r["complete"] for r in records)
    assert all(r["progress_reports"]["j"]["errors"] == 0 for r in records)
    last: dict[tuple[str, int], dict[str, Any]] = {}
    for b in sink.bodies:
        assert b["job"] == "j"
        key = (b["host"], b["iteration"])
        if key not in last or b["seq"] > last[key]["seq"]:
            last[key] = b
    for it in (0, 1):
        assert last[("h1", it)]["released"] == ["a", "pull"]
        assert last[("h1", it)]["finished"] == ["b"]
        assert last[("h2", it)]["released"] == ["b"]
        assert last[("h2", it)]["finished"] == ["a", "pull"]
        for host in ("h1", "h2"):
            sent = last[(host, it)]["sent"]
            assert set(sent) <= set(last[(host, it)]["released"])
            assert all(i == 0 and 0 <= n <= 3000 for g in sent.values() for i, n in g)
    assert last[("h1", 1)]["sent"] == {"a": [[0, 3000]], "pull": [[0, 3000]]}
    assert last[("h2", 1)]["sent"] == {"b": [[0, 3000]]}
    for b in sink.bodies:
        validate(ReportBody, b)
    for host in ("h1", "h2"):
        seqs = [b["seq"] for b in sink.bodies if b["host"] == host]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
