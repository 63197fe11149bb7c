"""Tensor (intra-layer) parallelism, Megatron style.

Every host holds a slice of every layer; after each layer's forward the partial
outputs are all-reduced and the next layer cannot start before; the backward
pass all-reduces the input gradients the same way. The all-reduces of one pass
form one EchelonFlow (``allreduce/fwd``, ``allreduce/bwd``): layer l's is needed
when layer l+1 (forward) or l-1 (backward) starts, so ``A`` steps by the compute
time of the layers in between.
"""

from __future__ import annotations

from echelon.paradigms.base import ComputeTimes, Paradigm, at_least_two_hosts
from echelon.paradigms.collectives import ring_allreduce
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Bytes, Records, Seconds, SpecModel


class TensorLayer(ComputeTimes):
    allreduce_bytes: Bytes


class TensorParams(SpecModel):
    layers: Records[TensorLayer]
    optimizer_s: Seconds = 0.0


def build(b: PlanBuilder, hosts: tuple[str, ...], p: TensorParams) -> None:
    n = len(p.layers)
    incoming: dict[str, list[int]] = {h: [] for h in hosts}
    passes = [("fwd", i) for i in range(n)] + [("bwd", i) for i in reversed(range(n))]
    for kind, i in passes:
        ly = p.layers[i]
        dur = ly.fwd_s if kind == "fwd" else ly.bwd_s
        for h in hosts:
            b.task(f"{kind}/l{i}@{h}", h, dur, after_flows=incoming[h])
        ready = {h: b.tid(f"{kind}/l{i}@{h}") for h in hosts}
        incoming = ring_allreduce(b, f"allreduce/{kind}", hosts, ly.allreduce_bytes, ready)
    for h in hosts:
        if incoming[h] or p.optimizer_s > 0:
            b.task(f"opt@{h}", h, p.optimizer_s, after_flows=incoming[h])


PARADIGM = Paradigm(
    "tensor",
    "tensor parallel, all-reduce after every layer (Megatron)",
    TensorParams,
    at_least_two_hosts("tensor parallelism"),
    build,
)
