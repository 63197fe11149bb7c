"""Training paradigms: each turns a job description into an IterationPlan.

``PARADIGMS`` maps the ``paradigm:`` field of a job description to its module's
:class:`~echelon.paradigms.base.Paradigm`. The arrangement of every EchelonFlow
is derived in one place, :class:`~echelon.paradigms.plan.PlanBuilder`, from the
contention-free timeline of the computation each paradigm describes.
"""

from __future__ import annotations

from echelon.errors import SpecError
from echelon.paradigms import dag, dp_allreduce, dp_ps, fsdp, moe, pipeline, tensor
from echelon.paradigms.base import Paradigm
from echelon.paradigms.plan import PlanBuilder, ideal_timeline

PARADIGMS: dict[str, Paradigm] = {
    p.name: p
    for p in (
        dp_ps.PARADIGM,
        dp_allreduce.PARADIGM,
        pipeline.GPIPE,
        pipeline.PIPEDREAM_1F1B,
        tensor.PARADIGM,
        fsdp.PARADIGM,
        moe.PARADIGM,
        pipeline.HYBRID,
        dag.PARADIGM,
    )
}


def get_paradigm(name: str) -> Paradigm:
    try:
        return PARADIGMS[name]
    except KeyError:
        raise SpecError(
            "paradigm", f"unknown paradigm {name!r} (known: {sorted(PARADIGMS)})"
        ) from None


__all__ = ["PARADIGMS", "Paradigm", "PlanBuilder", "get_paradigm", "ideal_timeline"]
