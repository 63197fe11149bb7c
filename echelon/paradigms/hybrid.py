"""3D parallelism: ``dp`` pipeline replicas of ``S`` stages, each stage split over ``tp`` hosts.

Composes the other builders' patterns: pipeline activations/gradients between
stages (GPipe or 1F1B order), a tensor-parallel all-reduce inside every forward
and backward task, and a data-parallel ring all-reduce of each stage's
parameters across replicas before the optimizer step.
"""

from __future__ import annotations

from echelon.paradigms.base import Paradigm
from echelon.paradigms.pipeline import (
    HybridFields,
    PipelineParams,
    build_pipeline,
    parse_pipeline,
)
from echelon.paradigms.plan import PlanBuilder


def parse(f: HybridFields, hosts: tuple[str, ...]) -> PipelineParams:
    return parse_pipeline(f, hosts, schedule=None)


def build(b: PlanBuilder, hosts: tuple[str, ...], params: PipelineParams) -> None:
    build_pipeline(b, hosts, params)


PARADIGM = Paradigm(
    "hybrid",
    "3D: data x pipeline x tensor parallel",
    HybridFields,
    parse,
    build,
)
