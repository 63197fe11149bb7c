"""What a paradigm module provides: a parser for its fields and a plan builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echelon.paradigms.plan import PlanBuilder
from echelon.specs import SpecModel

Parser = Callable[[Any, tuple[str, ...]], Any]
"""``parse(fields, hosts) -> params``: ``fields`` is an instance of the paradigm's
``model`` (already typed); ``parse`` checks what spans fields and hosts (SpecError)."""

Builder = Callable[[PlanBuilder, tuple[str, ...], Any], None]
"""``build(builder, hosts, params)``: add the iteration's tasks and flows."""


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
