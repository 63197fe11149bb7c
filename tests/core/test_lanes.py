"""The closed loop's rules (echelon.lanes) under both drivers: the wall-clock one that
looks late (the host agent) and the event-driven one (the packet model) see the same
times."""

from __future__ import annotations

from echelon.lanes import Ended, Entered, Lanes, Started, Step
from echelon.model import ComputeTask

# One lane, two iterations: ``p`` (0.5 s), then ``c`` (0.2 s) once flow ``x`` arrived;
# each iteration's entry releases ``pull``.
P = ComputeTask("p", "h1", 0.5)
C = ComputeTask("c", "h1", 0.2, after_tasks=("p",), after_flows=(("x", 0),))
P1 = ComputeTask("p1", "h1", 0.5)
ARRIVES = 0.3  # x arrives while p still runs: c starts when p ends, not at 0.3


def lanes() -> Lanes[ComputeTask, str]:
    loop: Lanes[ComputeTask, str] = Lanes()
    lane = loop.lane("j", "h1", [0, 1])
    lane.tasks[0].extend([P, C])
    lane.tasks[1].append(P1)
    lane.fresh[0].append("pull0")
    lane.fresh[1].append("pull1")
    return loop


def timeline(steps: list[Step[ComputeTask, str]]) -> list[tuple[str, str, float]]:
    out = []
    for s in steps:
        if isinstance(s, Entered):
            out.append(("enter", ",".join(s.lane.fresh[s.iteration]), s.at))
        else:
            out.append(("start" if isinstance(s, Started) else "end", s.task.id, s.end))
    return out


WANT = [
    ("enter", "pull0", 0.0),
    ("start", "p", 0.5),
    ("end", "p", 0.5),
    ("start", "c", 0.7),
    ("end", "c", 0.7),
    ("enter", "pull1", 0.7),  # local barrier: iteration 1 only after c
    ("start", "p1", 1.2),
    ("end", "p1", 1.2),
]


def test_a_driver_that_looks_late_gets_the_instants_the_conditions_held() -> None:
    loop = lanes()
    assert timeline(loop.advance(0.0, end_by=0.0)) == WANT[:2]
    loop.arrived[("x", 0)] = ARRIVES
    steps = loop.advance(5.0, end_by=5.0)  # woke up long after everything
    assert timeline(steps) == WANT[2:]
    assert all(ln.done() for ln in loop.lanes.values())


def test_the_event_driver_ends_tasks_only_at_their_events() -> None:
    loop = lanes()
    got = loop.advance(0.0)
    loop.arrived[("x", 0)] = ARRIVES
    assert loop.advance(ARRIVES) == []  # p still runs: no end before its event
    lane = loop.lanes[("j", "h1")]
    for now in (0.5, 0.7, 1.2):
        end = loop.end(lane)
        assert isinstance(end, Ended) and end.end == now
        got += [end, *loop.advance(now)]
    assert timeline(got) == WANT
