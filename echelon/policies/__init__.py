"""Scheduling policies: ours (``echelon``), the baselines it is compared with, and plug-ins.

``get_policy(name)`` returns an object implementing :class:`echelon.schedule.Policy`.
``name`` is one of :data:`POLICIES`, an ablation of the echelon policy, a policy a
package registers in the ``echelon.policies`` entry-point group, or
``package.module:Class`` (any importable class or zero-argument factory). Every
tool that takes a policy name (``sim run``/``sweep``, ``sim.eval --policy``,
``echelonctl policy``, ``topo.run --policies``, the controller's online re-planner)
resolves it here, so a policy written outside the project works in all of them
(docs/policies.md).

Group policies (echelon, echelon-v1, coflow, varys, sebf-edf, sincronia) fill
``Schedule.echelon_order``; per-flow ones (fair, fifo, srpt, edf) leave it empty.
A policy whose ranks cannot be expressed on the switch's strict-priority queues
says why in a ``not_installable`` class attribute (:func:`not_installable`).
See docs/model.md for why the echelon policy is built the way it is.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

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
#: The built-in policies' names, in the order ``echelon list`` shows them.
POLICIES: tuple[str, ...] = tuple(_CLASSES)

#: The entry-point group a package lists its policies in (``name = "module:Class"``).
ENTRY_POINT_GROUP = "echelon.policies"


def plugin_names() -> list[str]:
    """Names of the policies installed packages register in :data:`ENTRY_POINT_GROUP`."""
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def known_policies() -> list[str]:
    """Every name :func:`get_policy` accepts without a ``module:Class`` reference."""
    return [*POLICIES, *ABLATIONS, *(n for n in plugin_names() if n not in _CLASSES)]


def _instantiate(ref: str, obj: Any) -> Policy:
    made = obj() if callable(obj) else obj
    if not callable(getattr(made, "schedule", None)):
        raise SpecError("policy", f"{ref!r} is not a policy: it has no schedule() method")
    if not isinstance(getattr(made, "name", None), str) or not made.name:
        made.name = ref
    policy: Policy = made
    return policy


def _from_reference(ref: str) -> Policy:
    """``package.module:Class`` (or ``module:factory``), imported and called."""
    module, _, attr = ref.partition(":")
    if not module or not attr:
        raise SpecError("policy", f"{ref!r}: expected package.module:Class")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise SpecError(
            "policy", f"{ref!r}: cannot import {module!r} ({exc}); is its folder on PYTHONPATH?"
        ) from None
    obj: Any = mod
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SpecError("policy", f"{ref!r}: module {module!r} has no {attr!r}") from None
    policy = _instantiate(ref, obj)
    policy.name = ref  # results, reports and the controller name it as the user did
    return policy


def get_policy(name: str) -> Policy:
    """The policy called ``name`` (see the module docstring for the forms it takes)."""
    if name in ABLATIONS:
        policy = ABLATIONS[name]()
        policy.name = name
        return policy
    if name in _CLASSES:
        return _CLASSES[name]()
    if ":" in name:
        return _from_reference(name)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            made = _instantiate(name, ep.load())
            made.name = name
            return made
    raise SpecError(
        "policy",
        f"unknown policy {name!r} (known: {known_policies()}; "
        "or give your own as package.module:Class)",
    )


def not_installable(policy: Policy) -> str | None:
    """Why ``policy`` cannot be installed on the switch's strict-priority queues, or
    ``None`` when it can (the policy's ``not_installable`` attribute, if any)."""
    why = getattr(policy, "not_installable", None)
    return why if isinstance(why, str) and why else None


__all__ = [
    "ABLATIONS",
    "ENTRY_POINT_GROUP",
    "POLICIES",
    "get_policy",
    "known_policies",
    "not_installable",
    "plugin_names",
]
