"""GPipe: a pipeline of stages, one host each; all forwards, then all backwards.

Activations of micro-batch m leave stage s when its forward ends and are needed
when stage s+1 can start forward m, i.e. after its forward of m-1: in steady
state the arrangement of ``fwd/s<s>-s<s+1>`` is spaced by the *consuming*
stage's forward time. See docs/paradigms.md for the timeline.
"""

from __future__ import annotations

from echelon.paradigms.base import Paradigm
from echelon.paradigms.pipeline import (
    PipelineFields,
    PipelineParams,
    build_pipeline,
    parse_pipeline,
)
from echelon.paradigms.plan import PlanBuilder


def parse(f: PipelineFields, hosts: tuple[str, ...]) -> PipelineParams:
    return parse_pipeline(f, hosts, schedule="gpipe")


def build(b: PlanBuilder, hosts: tuple[str, ...], params: PipelineParams) -> None:
    build_pipeline(b, hosts, params)


PARADIGM = Paradigm(
    "gpipe",
    "pipeline parallel, all forwards then all backwards (GPipe)",
    PipelineFields,
    parse,
    build,
)
