"""Scheduling policies: ours (``echelon``) and the baselines it is compared with.

``get_policy(name)`` returns an object implementing
:class:`echelon.schedule.Policy`. Group policies (echelon, echelon-v1, coflow,
varys, sebf-edf, sincronia) fill ``Schedule.echelon_order``; per-flow ones
(fair, fifo, srpt, edf) leave it empty. See docs/model.md for why the echelon
policy is built the way it is.
"""

from __future__ import annotations

from echelon.errors import SpecError
from echelon.policies.baselines import EdfPolicy, FairPolicy, FifoPolicy, SrptPolicy
from echelon.policies.echelon import ABLATIONS, EchelonPolicy
from echelon.policies.group import (
    CoflowPolicy,
    EchelonV1Policy,
    SebfEdfPolicy,
    SincroniaPolicy,
    VarysPolicy,
)
from echelon.schedule import Policy

POLICIES: tuple[str, ...] = (
    "echelon",
    "echelon-v1",
    "sebf-edf",
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
    "echelon-v1": EchelonV1Policy,
    "sebf-edf": SebfEdfPolicy,
    "fair": FairPolicy,
    "fifo": FifoPolicy,
    "srpt": SrptPolicy,
    "edf": EdfPolicy,
    "varys": VarysPolicy,
    "sincronia": SincroniaPolicy,
    "coflow": CoflowPolicy,
}

#: Policies that order groups (and can be installed as echelon bands).
GROUP_POLICIES = frozenset({"echelon", "echelon-v1", "coflow", "varys", "sebf-edf", "sincronia"})


def get_policy(name: str) -> Policy:
    """The policy called ``name``: one of :data:`POLICIES`, or an ablation of the
    echelon policy (:data:`echelon.policies.echelon.ABLATIONS`)."""
    if name in ABLATIONS:
        policy = ABLATIONS[name]()
        policy.name = name
        return policy
    try:
        return _CLASSES[name]()
    except KeyError:
        known = [*POLICIES, *ABLATIONS]
        raise SpecError("policy", f"unknown policy {name!r} (known: {known})") from None


__all__ = ["ABLATIONS", "GROUP_POLICIES", "POLICIES", "get_policy"]
