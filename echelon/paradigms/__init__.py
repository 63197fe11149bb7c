"""Training paradigms: each turns a job description into an IterationPlan.

``PARADIGMS`` maps the ``paradigm:`` field of a job description to its module's
:class:`~echelon.paradigms.base.Paradigm`. The arrangement of every EchelonFlow
is derived in one place, :class:`~echelon.paradigms.plan.PlanBuilder`, from the
contention-free timeline of the computation each paradigm describes.
"""

from __future__ import annotations

from echelon.errors import SpecError
from echelon.paradigms import (
    dag,
    dp_allreduce,
    dp_ps,
    fsdp,
    gpipe,
    hybrid,
    moe,
    pipedream_1f1b,
    tensor,
)
from echelon.paradigms.base import Paradigm
from echelon.paradigms.plan import PlanBuilder, ideal_timeline

PARADIGMS: dict[str, Paradigm] = {
    m.PARADIGM.name: m.PARADIGM
    for m in (dp_ps, dp_allreduce, gpipe, pipedream_1f1b, tensor, fsdp, moe, hybrid, dag)
}


def get_paradigm(name: str) -> Paradigm:
    try:
        return PARADIGMS[name]
    except KeyError:
        raise SpecError(
            "paradigm", f"unknown paradigm {name!r} (known: {sorted(PARADIGMS)})"
        ) from None


__all__ = ["PARADIGMS", "Paradigm", "PlanBuilder", "get_paradigm", "ideal_timeline"]
