"""Limits on what one request may ask of the controller, checked before any work.

Why: without them a 252-byte gpipe description with ``micro_batches: 50000`` held
the controller lock for 17 s, a 50 MB body blocked the API for 27 s, and a 50 MB
``description`` was stored and slowed every ``GET /jobs``. Each limit
is checked on the raw description (so nothing big is built first); a paradigm
description's flows as it expands (:class:`FlowBudget`), its groups once parsed.
A violation is a :class:`LimitError` (HTTP 422) or, for sizes, :class:`TooLargeError`
(HTTP 413); both name the field and the limit. docs/controller.md lists them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from echelon.errors import SpecError
from echelon.model import EchelonFlow
from echelon.paradigms.plan import PlanBuilder

#: Request body of any endpoint, bytes (HTTP 413 beyond).
MAX_BODY_BYTES = 1 << 20
#: Job name: letters, digits, ``.``, ``_``, ``-``; starts with a letter or digit.
JOB_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_JOB_NAME = 64
#: Group names of explicit specs: printable, no spaces or control characters (an ESC
#: or CR reached ``echelonctl``'s terminal raw), at most 128 characters.
GROUP_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+=-]{0,127}")
#: ``description`` text, characters (HTTP 413 beyond).
MAX_DESCRIPTION_CHARS = 4096
#: Whole job description as compact JSON, bytes (HTTP 413 beyond): what is stored.
MAX_SPEC_BYTES = 512 << 10
#: Paradigm descriptions.
MAX_MICRO_BATCHES = 256
MAX_LIST_ITEMS = 256  # stages, layers, hosts
#: Explicit specs and the parsed job alike.
MAX_GROUPS_PER_JOB = 1024
MAX_FLOWS_PER_JOB = 4096


class LimitError(SpecError):
    """A request exceeds a documented limit (HTTP 422); ``field`` names what."""


class TooLargeError(LimitError):
    """A request or one of its texts is too large (HTTP 413)."""


def check_description(desc: Any) -> None:
    """Raise :class:`LimitError` if the raw description exceeds a limit.

    Only fields that exist are checked; their *types* are left to the parser,
    which names the field when they are wrong.
    """
    if not isinstance(desc, Mapping):
        return
    job = desc.get("job")
    if isinstance(job, str) and not JOB_NAME_RE.fullmatch(job):
        raise LimitError(
            "job",
            f"must match {JOB_NAME_RE.pattern} (letters, digits, '.', '_', '-'; "
            f"at most {MAX_JOB_NAME} characters), got {job[:80]!r}",
        )
    text = desc.get("description")
    if isinstance(text, str) and len(text) > MAX_DESCRIPTION_CHARS:
        raise TooLargeError(
            "description",
            f"{len(text)} characters exceed the limit of {MAX_DESCRIPTION_CHARS}",
        )
    size = len(json.dumps(desc, separators=(",", ":"), default=str))
    if size > MAX_SPEC_BYTES:
        raise TooLargeError(
            "job", f"description of {size} bytes exceeds the limit of {MAX_SPEC_BYTES}"
        )
    mb = desc.get("micro_batches")
    if isinstance(mb, int) and not isinstance(mb, bool) and mb > MAX_MICRO_BATCHES:
        raise LimitError("micro_batches", f"{mb} exceeds the limit of {MAX_MICRO_BATCHES}")
    for key in ("stages", "layers", "hosts"):
        items = desc.get(key)
        if isinstance(items, list) and len(items) > MAX_LIST_ITEMS:
            raise LimitError(key, f"{len(items)} items exceed the limit of {MAX_LIST_ITEMS}")
    efs = desc.get("echelonflows")
    if isinstance(efs, list):
        if len(efs) > MAX_GROUPS_PER_JOB:
            raise LimitError(
                "echelonflows", f"{len(efs)} groups exceed the limit of {MAX_GROUPS_PER_JOB}"
            )
        for i, ef in enumerate(efs):
            group = ef.get("group") if isinstance(ef, Mapping) else None
            if isinstance(group, str) and not GROUP_NAME_RE.fullmatch(group):
                raise LimitError(
                    f"echelonflows[{i}].group",
                    f"must match {GROUP_NAME_RE.pattern} (at most 128 characters, no spaces "
                    f"or control characters), got {group[:40]!r}"
                    + (f" ({len(group)} characters)" if len(group) > 40 else ""),
                )
        total = sum(
            len(ef["flows"])
            for ef in efs
            if isinstance(ef, Mapping) and isinstance(ef.get("flows"), list)
        )
        if total > MAX_FLOWS_PER_JOB:
            raise LimitError(
                "echelonflows", f"{total} flows exceed the limit of {MAX_FLOWS_PER_JOB} per job"
            )


class FlowBudget(PlanBuilder):
    """A plan builder that stops once the job has more flows than allowed: the
    expansion is refused at the limit, not after building all of it (the controller
    parses with it: ``load_description(..., builder=FlowBudget)``). Why: a 25 KB MoE
    job (16 hosts x 256 layers, flows growing with hosts squared) used to be refused
    only after 5.9 s and +170 MB of expansion, holding a worker."""

    def flow(self, group: str, src: str, dst: str, size: int, producer: str | None) -> int:
        if len(self._flows) >= MAX_FLOWS_PER_JOB:
            raise LimitError(
                "job",
                f"its flows exceed the limit of {MAX_FLOWS_PER_JOB} per job (expansion "
                "stopped there): use fewer hosts, layers or micro-batches",
            )
        return super().flow(group, src, dst, size, producer)


def check_flows(echelons: Sequence[EchelonFlow]) -> None:
    """A flow from a host to itself never crosses a switch: refuse it (HTTP 400)."""
    for ef in echelons:
        for pos, f in enumerate(ef.flows):
            if f.src == f.dst:
                raise SpecError(
                    f"{ef.group}.flows[{pos}].dst", f"same host as src ({f.src!r}): a self-flow"
                )


def check_parsed(groups: int) -> None:
    """The group limit on what a (paradigm) description expanded to (its flows were
    counted as it expanded, :class:`FlowBudget`; an explicit spec's on the raw text)."""
    if groups > MAX_GROUPS_PER_JOB:
        raise LimitError("job", f"{groups} groups exceed the limit of {MAX_GROUPS_PER_JOB}")
