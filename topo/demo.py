"""The two contending demo jobs of ``make run``, as iteration plans on the star topology.

* ``pipe`` — a GPipe-style two-stage pipeline: stage 0 on h1 computes
  ``MICRO`` micro-batches one after the other (``FWD0_S`` each) and sends each
  one's activations to stage 1 on h4, which consumes them one per ``FWD1_S``.
  The activations of one iteration form an EchelonFlow with
  ``A(j) = j * FWD1_S``: a staggered formation, the case EchelonFlow is about.
* ``dp`` — data parallel with a parameter server on h4: workers h2 and h3
  push their gradients at the same time and the update needs all of them, a
  Coflow (``A == 0``).

Both end at h4, so every byte crosses the 10 Mbit/s bottleneck into h4. Sizes
are chosen so that the Python soft switch (~20 kpps) is never the bottleneck
and a run of all policies takes well under a minute. Ideal times assume the
bottleneck rate (``BOTTLENECK_BYTES_S``), as a contention-free schedule would.
"""

from __future__ import annotations

from typing import Any

from echelon.model import ComputeTask, EchelonFlow, Flow, FlowKey, IterationPlan

BOTTLENECK_BYTES_S = 10e6 / 8
MICRO = 6
ACT_BYTES = 60_000
#: Stage 0 produces a micro-batch every FWD0_S; stage 1 consumes one every FWD1_S.
#: Producing faster than consuming releases several flows at once that are
#: needed one after the other: what the arrangement A(j) = j * FWD1_S encodes
#: and what a Coflow (all flows equal) cannot express.
FWD0_S = 0.01
FWD1_S = 0.06
GRAD_BYTES = 300_000
BACKWARD_S = 0.05
UPDATE_S = 0.05


def pipe_plan(it: int) -> IterationPlan:
    name = f"pipe/{it}/act"
    flows = tuple(Flow(j, "h1", "h4", ACT_BYTES, round(j * FWD1_S, 6)) for j in range(MICRO))
    t_ref = FWD0_S + ACT_BYTES / BOTTLENECK_BYTES_S  # first micro-batch computed and sent
    ef = EchelonFlow(name, "pipe", "act", flows, t_ref=t_ref)
    tasks: list[ComputeTask] = []
    producer: dict[FlowKey, str] = {}
    for j in range(MICRO):
        tasks.append(ComputeTask(f"fwd0/{j}", "h1", FWD0_S))
        producer[(name, j)] = f"fwd0/{j}"
    tasks += [
        ComputeTask(f"fwd1/{j}", "h4", FWD1_S, after_flows=((name, j),)) for j in range(MICRO)
    ]
    return IterationPlan("pipe", it, (ef,), tuple(tasks), producer)


def dp_plan(it: int) -> IterationPlan:
    name = f"dp/{it}/grad"
    workers = ("h2", "h3")
    flows = tuple(Flow(j, w, "h4", GRAD_BYTES, 0.0) for j, w in enumerate(workers))
    t_ref = BACKWARD_S + len(workers) * GRAD_BYTES / BOTTLENECK_BYTES_S
    ef = EchelonFlow(name, "dp", "grad", flows, t_ref=t_ref)
    tasks = [ComputeTask(f"bwd/{w}", w, BACKWARD_S) for w in workers]
    tasks.append(
        ComputeTask("update", "h4", UPDATE_S, after_flows=tuple((name, j) for j in range(2)))
    )
    producer = {(name, j): f"bwd/{w}" for j, w in enumerate(workers)}
    return IterationPlan("dp", it, (ef,), tuple(tasks), producer)


def plans(iterations: int) -> list[IterationPlan]:
    return [p for it in range(iterations) for p in (pipe_plan(it), dp_plan(it))]


def registration(plan: IterationPlan) -> dict[str, Any]:
    """The controller's explicit EchelonFlow registration for a job (its groups' formations)."""
    return {
        "job": plan.job,
        "echelonflows": [
            {
                "group": ef.group,
                "t_ref": ef.t_ref,
                "flows": [
                    {"src": f.src, "dst": f.dst, "size": f.size, "offset": f.offset}
                    for f in ef.flows
                ],
            }
            for ef in plan.echelons
        ],
    }
