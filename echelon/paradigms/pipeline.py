"""Pipeline parallelism, optionally replicated (data parallel) and tensor-split.

One builder serves three paradigms (:data:`GPIPE`, :data:`PIPEDREAM_1F1B`,
:data:`HYBRID`): they differ only in the per-stage order of forward (F) and backward
(B) micro-batch tasks and in the degrees ``dp``/``tp``. Host of (replica r, stage s,
tensor rank t) is ``hosts[(r * S + s) * tp + t]``.

* ``gpipe``: a pipeline of stages, one host each; all forwards, then all backwards.
  Activations of micro-batch m leave stage s when its forward ends and are needed
  when stage s+1 can start forward m, i.e. after its forward of m-1: in steady
  state the arrangement of ``fwd/s<s>-s<s+1>`` is spaced by the *consuming*
  stage's forward time. See docs/paradigms.md for the timeline.
* ``pipedream_1f1b`` (PipeDream-Flush): stage s runs ``S - s - 1`` warm-up forwards,
  then alternates F and B, then drains its backwards. Compared with GPipe the
  backward flows start early and interleave with forward flows on the same links,
  which is where intra-group ordering by ideal finish matters.
* ``hybrid`` (3D parallelism): ``dp`` pipeline replicas of ``S`` stages, each stage
  split over ``tp`` hosts. Composes the other builders' patterns: pipeline
  activations/gradients between stages (GPipe or 1F1B order, the ``schedule``
  field), a tensor-parallel all-reduce inside every forward and backward task, and
  a data-parallel ring all-reduce of each stage's parameters across replicas before
  the optimizer step.

Flows per micro-batch m: the activation of stage s goes to s+1 (group
``fwd/s<s>-s<s+1>``), the gradient w.r.t. it comes back (``bwd/s<s+1>-s<s>``),
same size. With ``tp > 1`` each F/B task is split in two halves around a
tensor-parallel all-reduce (``allreduce/tp/s<s>``) and each rank sends
``1/tp`` of the activation. With ``dp > 1`` each (stage, tensor rank) all-reduces
its gradients across replicas after its last B (``allreduce/dp/s<s>``), which
the optimizer step consumes.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from echelon.errors import SpecError
from echelon.paradigms.base import ComputeTimes, Paradigm
from echelon.paradigms.collectives import ring_allreduce
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Bytes, Count, Records, Seconds, SpecModel, field_path


class Stage(ComputeTimes):
    activation_bytes: Bytes = 0
    param_bytes: Bytes = 0
    tp_allreduce_bytes: Bytes = 0


class PipelineFields(SpecModel):
    """What a user writes for ``gpipe`` and ``pipedream_1f1b`` (one host per stage)."""

    stages: Records[Stage]
    micro_batches: Count = 1
    optimizer_s: Seconds = 0.0


class HybridFields(PipelineFields):
    """``hybrid``: the pipeline's fields plus the schedule and the dp/tp degrees."""

    schedule: Literal["gpipe", "1f1b"] = "gpipe"
    dp: Count = 1
    tp: Count = 1


def task_order(schedule: str, stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    """Per-stage order of ("F"|"B", micro-batch).

    GPipe: all forwards, then all backwards, newest micro-batch first (its
    activations are the freshest). 1F1B (PipeDream-Flush): ``S - s - 1`` warm-up
    forwards, then alternate one forward and one backward, then cool down with
    the remaining backwards, oldest first.
    """
    if schedule == "gpipe":
        return [("F", m) for m in range(micro)] + [("B", m) for m in reversed(range(micro))]
    warm = min(stages - stage - 1, micro)
    order = [("F", m) for m in range(warm)]
    for i in range(micro - warm):
        order += [("F", warm + i), ("B", i)]
    return order + [("B", m) for m in range(micro - warm, micro)]


def parse_pipeline(
    f: PipelineFields, hosts: tuple[str, ...], *, schedule: str | None
) -> HybridFields:
    """Checks across fields; ``schedule`` fixes the order (None: the hybrid
    paradigm reads it from the ``schedule`` field). What the builder reads is the
    hybrid's fields: a plain pipeline is the hybrid with ``dp = tp = 1``."""
    hybrid = schedule is None
    dp = tp = 1
    if isinstance(f, HybridFields):
        schedule, dp, tp = f.schedule, f.dp, f.tp
    assert schedule is not None
    stages = f.stages
    need = len(stages) * dp * tp
    if len(hosts) != need:
        what = "stages x dp x tp" if hybrid else "stages (one host per stage)"
        raise SpecError("hosts", f"needs {need} hosts = {what}, got {len(hosts)}")
    for s, st in enumerate(stages[:-1]):
        if st.activation_bytes <= 0:
            raise SpecError(
                field_path(("stages", s, "activation_bytes")),
                "must be positive: the stage sends its output to the next stage",
            )
    if not hybrid:
        for s, st in enumerate(stages):
            for name in ("param_bytes", "tp_allreduce_bytes"):
                if getattr(st, name):
                    raise SpecError(
                        field_path(("stages", s, name)), "only the hybrid paradigm uses it"
                    )
    if isinstance(f, HybridFields):
        return f
    return HybridFields.model_construct(
        stages=stages, micro_batches=f.micro_batches, optimizer_s=f.optimizer_s, schedule=schedule
    )


def build_pipeline(b: PlanBuilder, hosts: tuple[str, ...], p: HybridFields) -> None:
    n_st, tp = len(p.stages), p.tp

    def host(r: int, s: int, t: int) -> str:
        return hosts[(r * n_st + s) * tp + t]

    def name(kind: str, m: int, r: int, s: int, t: int, part: str = "") -> str:
        where = f"s{s}" + (f"/r{r}" if p.dp > 1 else "") + (f"/t{t}" if tp > 1 else "")
        return f"{kind}{m}{part}/{where}"

    def last(kind: str, m: int, r: int, s: int, t: int) -> str:
        return b.tid(name(kind, m, r, s, t, "b" if tp > 1 else ""))

    act: dict[tuple[int, int, int, int], int] = {}  # (r, s+1, t, m) -> flow arriving at s+1
    grad: dict[tuple[int, int, int, int], int] = {}  # (r, s, t, m) -> flow arriving at s
    for r in range(p.dp):
        for s in range(n_st - 1):
            size = -(-p.stages[s].activation_bytes // tp)
            for t in range(tp):
                src, dst = host(r, s, t), host(r, s + 1, t)
                for m in range(p.micro_batches):
                    act[(r, s + 1, t, m)] = b.flow(
                        f"fwd/s{s}-s{s + 1}", src, dst, size, last("F", m, r, s, t)
                    )
                    grad[(r, s, t, m)] = b.flow(
                        f"bwd/s{s + 1}-s{s}", dst, src, size, last("B", m, r, s + 1, t)
                    )

    for r in range(p.dp):
        for s, st in enumerate(p.stages):
            order = task_order(p.schedule, s, n_st, p.micro_batches)
            tp_in: dict[tuple[str, int, int], list[int]] = {}
            if tp > 1:
                for kind, m in order:
                    prods = {host(r, s, t): b.tid(name(kind, m, r, s, t, "a")) for t in range(tp)}
                    group_hosts = [host(r, s, t) for t in range(tp)]
                    got = ring_allreduce(
                        b, f"allreduce/tp/s{s}", group_hosts, st.tp_allreduce_bytes, prods
                    )
                    for t in range(tp):
                        tp_in[(kind, m, t)] = got[host(r, s, t)]
            for t in range(tp):
                h = host(r, s, t)
                for kind, m in order:
                    dur = st.fwd_s if kind == "F" else st.bwd_s
                    inflow = act.get((r, s, t, m)) if kind == "F" else grad.get((r, s, t, m))
                    deps = [inflow] if inflow is not None else []
                    if tp == 1:
                        b.task(name(kind, m, r, s, t), h, dur, after_flows=deps)
                    else:
                        b.task(name(kind, m, r, s, t, "a"), h, dur / 2, after_flows=deps)
                        b.task(
                            name(kind, m, r, s, t, "b"), h, dur / 2, after_flows=tp_in[(kind, m, t)]
                        )

    for s, st in enumerate(p.stages):
        for t in range(tp):
            ring_hosts = [host(r, s, t) for r in range(p.dp)]
            final = task_order(p.schedule, s, n_st, p.micro_batches)[-1][1]
            prods = {host(r, s, t): last("B", final, r, s, t) for r in range(p.dp)}
            got = ring_allreduce(b, f"allreduce/dp/s{s}", ring_hosts, st.param_bytes // tp, prods)
            for r in range(p.dp):
                h = host(r, s, t)
                if got[h] or p.optimizer_s > 0:
                    b.task(f"opt/{h}", h, p.optimizer_s, after_flows=got[h])


GPIPE = Paradigm(
    "gpipe",
    "pipeline parallel, all forwards then all backwards (GPipe)",
    PipelineFields,
    partial(parse_pipeline, schedule="gpipe"),
    build_pipeline,
)
PIPEDREAM_1F1B = Paradigm(
    "pipedream_1f1b",
    "pipeline parallel, one-forward-one-backward (PipeDream-Flush)",
    PipelineFields,
    partial(parse_pipeline, schedule="1f1b"),
    build_pipeline,
)
#: ``schedule=None``: the order comes from the job's ``schedule`` field.
HYBRID = Paradigm(
    "hybrid",
    "3D: data x pipeline x tensor parallel",
    HybridFields,
    partial(parse_pipeline, schedule=None),
    build_pipeline,
)
