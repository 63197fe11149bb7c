"""Online re-planning on the wire: a registered flow never loses its priority.

The daemon runs with ``--replan online`` and no re-plan interval. A reporter
thread drives progress reports that move a job's group up and down (alone in
flight it gets the top level, with a smaller job in flight it goes below it)
while the test sends that group's frames back to back through the switch and
checks every forwarded frame: exactly the input frame at *some* level >= 1
(DSCP CS1..CS7), never best effort (CS0) -- also for frames that cross the switch
while a re-plan's writes are in progress -- and over the run at least two
different levels, so the re-plans really changed what the switch does.
"""

from __future__ import annotations

import threading
from typing import Any

from controlplane.client import ApiClient, plain
from echelon.errors import EchelonError
from ptf_tests import controller_driven
from ptf_tests import packets as pk

OUT = 4
FRAMES = 120
OFFSETS_US = (0, 1000, 2000)
JOBS = [
    {
        "job": "big",
        "echelonflows": [
            {
                "group": "g",
                "flows": [
                    {"src": "h1", "dst": "h4", "size": 4_000_000, "offset": o / 1e6}
                    for o in OFFSETS_US
                ],
            }
        ],
    },
    {
        "job": "small",
        "echelonflows": [
            {"group": "g", "flows": [{"src": "h2", "dst": "h4", "size": 10_000, "offset": 0.0}]}
        ],
    },
]


class OnlineReplanKeepsPriority(controller_driven.ControllerDrivenOrdering):
    """Frames of a registered group keep a level >= 1 across online re-plans."""

    daemon_args = ("--replan", "online", "--replan-interval-ms", "0")

    def drive(self, api: str) -> None:
        with ApiClient(api, timeout=10) as client:
            for job in JOBS:
                client.register(job)
            eid = client.show("big").groups[0].echelon_id
        stop = threading.Event()
        errors: list[str] = []
        replans = [0]

        def reporter() -> None:
            seq = 0
            http = ApiClient(api, timeout=10)

            def report(job: str, host: str, it: int, rel: list[str], fin: list[str]) -> None:
                nonlocal seq
                seq += 1
                body = {"job": job, "host": host, "iteration": it, "session": "ptf",
                        "seq": seq, "released": rel, "finished": fin}  # fmt: skip
                try:
                    out = plain(http.report(body, wait=True))
                except EchelonError as exc:
                    errors.append(str(exc))
                    return
                if out.get("error"):
                    errors.append(str(out))
                elif out.get("covered"):
                    replans[0] += 1

            it = 0
            try:
                while not stop.is_set():
                    report("big", "h1", it, ["g"], [])  # big alone: top level
                    report("small", "h2", it, ["g"], [])  # small joins: above big
                    report("small", "h4", it, [], ["g"])  # small done: big alone again
                    report("big", "h4", it, [], ["g"])
                    it += 1
            finally:
                http.close()

        thread = threading.Thread(target=reporter, daemon=True)
        thread.start()
        seen: dict[int, int] = {}
        try:
            for i in range(FRAMES):
                frame = pk.echelon(1, OUT, eid, OFFSETS_US[i % len(OFFSETS_US)], seq=i)
                self.send(1, frame)
                got, _ = self.receive(OUT)
                level = got[pk._TOS_OFF] >> 5  # DSCP = level << 3
                self.assertGreaterEqual(level, 1, f"frame {i} left best-effort: {pk.describe(got)}")
                self.assertEqual(got, pk.forwarded(frame, OUT, level), f"frame {i}")
                seen[level] = seen.get(level, 0) + 1
        finally:
            stop.set()
            thread.join(30)
        self.assertEqual(errors, [], "re-plans failed")
        self.assertGreaterEqual(replans[0], 8, "too few re-plans happened during the frames")
        self.assertGreaterEqual(len(seen), 2, f"the group's level never changed: {seen}")
        with ApiClient(api, timeout=5) as client:
            view: dict[str, Any] = plain(client.progress())
        self.assertEqual(view["online"]["failures"], 0)
        self.expect_nothing_else()
