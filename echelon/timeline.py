"""ASCII rendering of an iteration's ideal timeline and its EchelonFlows.

docs/paradigms.md shows every paradigm's timeline; drawing them by hand invites
mistakes, so they are generated from the same plan the switch is programmed
from (``echelon timeline JOB.yaml``). One character is ``scale`` seconds.
A host row shows its tasks; an EchelonFlow row marks each flow's ideal finish
``t_ref + A(j)`` with the flow index (``*`` where several coincide).
"""

from __future__ import annotations

import math

from echelon.model import IterationPlan
from echelon.paradigms.plan import ideal_timeline

_SHORT = {
    "fwd": "f",
    "bwd": "b",
    "gate": "g",
    "expert": "x",
    "gate_bwd": "G",
    "expert_bwd": "X",
    "update": "upd",
    "opt": "opt",
    "loss": "L",
}


def nice_scale(span: float, columns: int = 80) -> float:
    """A round number of seconds per character (1, 2, 2.5 or 5 x 10^k) fitting ``span``."""
    raw = span / columns if span > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


def label(plan: IterationPlan, task_id: str) -> str:
    """``gpipe-demo/0/F3/s1`` -> ``F3``; ``ps/0/fwd/l2@h1`` -> ``f2``."""
    name = task_id.removeprefix(f"{plan.job}/{plan.iteration}/").split("@")[0]
    head, _, rest = name.partition("/")
    if head in _SHORT:
        return _SHORT[head] + rest.lstrip("l").split("/")[0]
    return head


def render(plan: IterationPlan, scale: float, t0: float = 0.0) -> str:
    """The plan's hosts and EchelonFlows on one time axis (``t0`` = plan start)."""
    times = ideal_timeline(plan)
    end = max((e for _, e in times.values()), default=0.0)
    for ef in plan.echelons:
        end = max(end, ef.t_ref - t0 + ef.span)
    width = round(end / scale) + 1
    hosts = list(dict.fromkeys(t.host for t in plan.tasks))
    names = hosts + [ef.group for ef in plan.echelons]
    pad = max(len(n) for n in names) + 1
    lines = [" " * pad + _axis(width, scale)]
    for h in hosts:
        row = [" "] * width
        for t in plan.tasks:
            if t.host != h:
                continue
            a, b = times[t.id]
            lo, hi = round(a / scale), round(b / scale)
            if hi <= lo:
                continue
            row[lo:hi] = list(_cell(label(plan, t.id), hi - lo))
        lines.append(h.ljust(pad) + "".join(row).rstrip())
    for ef in plan.echelons:
        row = [" "] * width
        for f in ef.flows:
            x = round((ef.ideal_finish(f.index) - t0) / scale)
            mark = str(f.index % 10)
            row[x] = mark if row[x] in (" ", mark) else "*"
        lines.append(ef.group.ljust(pad) + "".join(row).rstrip())
    return "\n".join(lines)


def _cell(text: str, width: int) -> str:
    """``[F0====]`` when the label fits between brackets, else the label cut to fit."""
    if width >= len(text) + 2:
        return "[" + text.ljust(width - 2, "=") + "]"
    return text.ljust(width, "-")[:width]


def _axis(width: int, scale: float) -> str:
    """Tick every 10 characters, labelled with the time in seconds."""
    out = [" "] * (width + 12)
    for x in range(0, width, 10):
        text = f"|{x * scale:g}"
        out[x : x + len(text)] = list(text)
    return "".join(out).rstrip()
