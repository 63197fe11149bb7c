"""Fully sharded data parallel (FSDP / ZeRO-3).

Each host keeps 1/N of every layer's parameters. Before a layer runs, its
parameters are all-gathered; after backward, its gradients are reduce-scattered.

* ``allgather/fwd``: shards are ready at the iteration start, layer l is needed
  when forward reaches it: ``A(l) = sum(fwd_s[:l])`` -- the same echelon as a
  PS pull, with prefetching left to the network schedule.
* ``allgather/bwd``: parameters were freed after forward and are re-gathered
  once backward begins; layer l is needed when backward reaches it.
* ``reducescatter``: gradients, consumed together by the optimizer step: a Coflow.
"""

from __future__ import annotations

from echelon.paradigms.base import ComputeTimes, Paradigm, at_least_two_hosts
from echelon.paradigms.collectives import ring_allgather
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Bytes, Records, Seconds, SpecModel


class FsdpLayer(ComputeTimes):
    param_bytes: Bytes


class FsdpParams(SpecModel):
    layers: Records[FsdpLayer]
    optimizer_s: Seconds = 0.0


def build(b: PlanBuilder, hosts: tuple[str, ...], p: FsdpParams) -> None:
    n = len(p.layers)
    at_start: dict[str, str | None] = dict.fromkeys(hosts)
    bwd_start = {h: b.tid(f"fwd/l{n - 1}@{h}") for h in hosts}
    ag_f = [ring_allgather(b, "allgather/fwd", hosts, ly.param_bytes, at_start) for ly in p.layers]
    ag_b = [ring_allgather(b, "allgather/bwd", hosts, ly.param_bytes, bwd_start) for ly in p.layers]
    grads: dict[str, list[int]] = {h: [] for h in hosts}
    for i in reversed(range(n)):
        done = {h: b.tid(f"bwd/l{i}@{h}") for h in hosts}
        for h, got in ring_allgather(  # reduce-scatter: the same sends
            b, "reducescatter", hosts, p.layers[i].param_bytes, done
        ).items():
            grads[h] += got
    for h in hosts:
        for i, ly in enumerate(p.layers):
            b.task(f"fwd/l{i}@{h}", h, ly.fwd_s, after_flows=ag_f[i][h])
        for i in reversed(range(n)):
            b.task(f"bwd/l{i}@{h}", h, p.layers[i].bwd_s, after_flows=ag_b[i][h])
        b.task(f"opt@{h}", h, p.optimizer_s, after_flows=grads[h])


PARADIGM = Paradigm(
    "fsdp",
    "fully sharded data parallel: all-gather per layer, reduce-scatter of gradients",
    FsdpParams,
    at_least_two_hosts("sharding"),
    build,
)
