"""Data parallel with a parameter server.

Every worker pulls each layer's parameters from the PS, runs forward layer by
layer, backward in reverse, and pushes each layer's gradient to the PS, which
updates once it has all of them.

* ``pull``: the PS -> worker flows. Layer l's parameters are needed when the
  worker starts forward of layer l, so ``A(l) = sum(fwd_s[:l])``: a true echelon.
* ``push``: worker -> PS gradients, all consumed by the single update: a Coflow
  (``A == 0``), ``t_ref`` = the end of the backward pass.
"""

from __future__ import annotations

from echelon.errors import SpecError
from echelon.paradigms.base import ComputeTimes, Paradigm
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Bytes, Name, Records, Seconds, SpecModel


class PsLayer(ComputeTimes):
    param_bytes: Bytes


class PsParams(SpecModel):
    ps: Name
    layers: Records[PsLayer]
    update_s: Seconds = 0.0


def parse(p: PsParams, hosts: tuple[str, ...]) -> PsParams:
    """Checks that span fields: the fields themselves are typed (:class:`PsParams`)."""
    if p.ps not in hosts:
        raise SpecError("ps", f"host {p.ps!r} is not one of the job's hosts {sorted(hosts)}")
    if len(hosts) < 2:
        raise SpecError("hosts", "needs the parameter server and at least one worker")
    return p


def build(b: PlanBuilder, hosts: tuple[str, ...], p: PsParams) -> None:
    workers = [h for h in hosts if h != p.ps]
    pull = {
        (w, i): b.flow("pull", p.ps, w, ly.param_bytes, None)
        for i, ly in enumerate(p.layers)
        for w in workers
    }
    push = []
    for w in workers:
        for i, ly in enumerate(p.layers):
            b.task(f"fwd/l{i}@{w}", w, ly.fwd_s, after_flows=[pull[(w, i)]])
        for i in reversed(range(len(p.layers))):
            tid = b.task(f"bwd/l{i}@{w}", w, p.layers[i].bwd_s)
            push.append(b.flow("push", w, p.ps, p.layers[i].param_bytes, tid))
    b.task(f"update@{p.ps}", p.ps, p.update_s, after_flows=push)


PARADIGM = Paradigm(
    "dp_ps",
    "data parallel with a parameter server (push = coflow, pull = echelon)",
    PsParams,
    parse,
    build,
)
