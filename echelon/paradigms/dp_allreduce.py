"""Data parallel with ring all-reduce of gradient buckets (PyTorch DDP).

Gradients are bucketed in backward order (a bucket closes once it holds
``bucket_bytes``; 0 means one bucket per layer) and each bucket is all-reduced
over the ring of all hosts as soon as backward has produced it. The optimizer
step waits for every bucket, so each ``allreduce/b<k>`` is a Coflow whose
``t_ref`` is the end of the backward pass: early buckets have slack, the last
one has none.
"""

from __future__ import annotations

from echelon.paradigms.base import ComputeTimes, Paradigm, at_least_two_hosts
from echelon.paradigms.collectives import ring_allreduce
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Bytes, Records, Seconds, SpecModel


class AllreduceLayer(ComputeTimes):
    grad_bytes: Bytes


class AllreduceParams(SpecModel):
    layers: Records[AllreduceLayer]
    bucket_bytes: Bytes = 0
    optimizer_s: Seconds = 0.0


def buckets(p: AllreduceParams) -> list[list[int]]:
    """Layer indices of each bucket, in the order backward fills them."""
    out: list[list[int]] = [[]]
    filled = 0
    for i in reversed(range(len(p.layers))):
        out[-1].append(i)
        filled += p.layers[i].grad_bytes
        if filled >= p.bucket_bytes:
            out.append([])
            filled = 0
    return [bk for bk in out if bk]


def build(b: PlanBuilder, hosts: tuple[str, ...], p: AllreduceParams) -> None:
    incoming: dict[str, list[int]] = {h: [] for h in hosts}
    for k, layer_ids in enumerate(buckets(p)):
        size = sum(p.layers[i].grad_bytes for i in layer_ids)
        ready = {h: b.tid(f"bwd/l{layer_ids[-1]}@{h}") for h in hosts}
        for h, got in ring_allreduce(b, f"allreduce/b{k}", hosts, size, ready).items():
            incoming[h] += got
    for h in hosts:
        for i, ly in enumerate(p.layers):
            b.task(f"fwd/l{i}@{h}", h, ly.fwd_s)
        for i in reversed(range(len(p.layers))):
            b.task(f"bwd/l{i}@{h}", h, p.layers[i].bwd_s)
        b.task(f"opt@{h}", h, p.optimizer_s, after_flows=incoming[h])


PARADIGM = Paradigm(
    "dp_allreduce",
    "data parallel with ring all-reduce per gradient bucket (DDP)",
    AllreduceParams,
    at_least_two_hosts("a ring all-reduce"),
    build,
)
