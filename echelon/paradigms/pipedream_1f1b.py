"""PipeDream-Flush / 1F1B: warm-up forwards, one-forward-one-backward, cool-down.

Stage s runs ``S - s - 1`` warm-up forwards, then alternates F and B, then drains
its backwards. Compared with GPipe the backward flows start early and interleave
with forward flows on the same links, which is where intra-group ordering by
ideal finish matters.
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
    return parse_pipeline(f, hosts, schedule="1f1b")


def build(b: PlanBuilder, hosts: tuple[str, ...], params: PipelineParams) -> None:
    build_pipeline(b, hosts, params)


PARADIGM = Paradigm(
    "pipedream_1f1b",
    "pipeline parallel, one-forward-one-backward (PipeDream-Flush)",
    PipelineFields,
    parse,
    build,
)
