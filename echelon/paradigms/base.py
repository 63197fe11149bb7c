"""What a paradigm module provides: a parser for its fields and a plan builder."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from echelon.paradigms.plan import PlanBuilder

Parser = Callable[[Mapping[str, Any], tuple[str, ...]], Any]
"""``parse(description, hosts) -> params`` (a frozen dataclass); raises SpecError."""

Builder = Callable[[PlanBuilder, tuple[str, ...], Any], None]
"""``build(builder, hosts, params)``: add the iteration's tasks and flows."""


@dataclass(frozen=True)
class Paradigm:
    """A training paradigm: its name, the job fields it accepts, and how to plan it."""

    name: str
    summary: str
    fields: frozenset[str]
    parse: Parser
    build: Builder
