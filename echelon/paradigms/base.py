"""What a paradigm module provides: a parser for its fields and a plan builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echelon.errors import SpecError
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Seconds, SpecModel

Parser = Callable[[Any, tuple[str, ...]], Any]
"""``parse(fields, hosts) -> params``: ``fields`` is an instance of the paradigm's
``model`` (already typed); ``parse`` checks what spans fields and hosts (SpecError)."""

Builder = Callable[[PlanBuilder, tuple[str, ...], Any], None]
"""``build(builder, hosts, params)``: add the iteration's tasks and flows."""


class ComputeTimes(SpecModel):
    """Forward and backward seconds of one layer (or pipeline stage) on one host: what
    every paradigm's layer record starts with; each adds the bytes it moves."""

    fwd_s: Seconds
    bwd_s: Seconds


@dataclass(frozen=True)
class Paradigm:
    """A training paradigm: its name, the typed model of its job fields, and how to plan it."""

    name: str
    summary: str
    model: type[SpecModel]
    parse: Parser
    build: Builder

    @property
    def fields(self) -> frozenset[str]:
        """The paradigm-specific keys a job description may carry."""
        return frozenset(self.model.model_fields)


def at_least_two_hosts(what: str) -> Parser:
    """The parser of a paradigm whose fields are all typed (its model checks them) and
    that only needs two hosts or more: ``what`` names the pattern in the error."""

    def parse(fields: Any, hosts: tuple[str, ...]) -> Any:
        if len(hosts) < 2:
            raise SpecError("hosts", f"{what} needs at least two hosts")
        return fields

    return parse
