"""Scheduling policies: ours (``echelon``) and the baselines it is compared with.

``get_policy(name)`` returns an object implementing
:class:`echelon.schedule.Policy`. Group policies (echelon, coflow, varys,
sincronia) fill ``Schedule.echelon_order``; per-flow ones (fair, fifo, srpt,
edf) leave it empty. See docs/model.md for why the echelon policy is built the
way it is.
"""

from __future__ import annotations

from echelon.errors import SpecError
from echelon.policies.baselines import EdfPolicy, FairPolicy, FifoPolicy, SrptPolicy
from echelon.policies.group import CoflowPolicy, EchelonPolicy, SincroniaPolicy, VarysPolicy
from echelon.schedule import Policy

POLICIES: tuple[str, ...] = (
    "echelon",
    "fair",
    "fifo",
    "srpt",
    "edf",
    "varys",
    "sincronia",
    "coflow",
)

_CLASSES: dict[str, type[Policy]] = {
    "echelon": EchelonPolicy,
    "fair": FairPolicy,
    "fifo": FifoPolicy,
    "srpt": SrptPolicy,
    "edf": EdfPolicy,
    "varys": VarysPolicy,
    "sincronia": SincroniaPolicy,
    "coflow": CoflowPolicy,
}

#: Policies that order groups (and can be installed as echelon bands).
GROUP_POLICIES = frozenset({"echelon", "coflow", "varys", "sincronia"})


def get_policy(name: str) -> Policy:
    try:
        return _CLASSES[name]()
    except KeyError:
        raise SpecError("policy", f"unknown policy {name!r} (known: {list(POLICIES)})") from None


__all__ = ["GROUP_POLICIES", "POLICIES", "get_policy"]
