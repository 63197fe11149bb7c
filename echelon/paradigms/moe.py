"""Mixture of experts with expert parallelism: all-to-all around every expert layer.

Per layer, forward runs the gate/attention part (``fwd_s``), dispatches tokens
to their experts (all-to-all), runs the experts (``expert_fwd_s``) and combines
the results back (all-to-all) before the next layer. Backward mirrors it. The
all-to-alls of one pass form one EchelonFlow (``alltoall/fwd``,
``alltoall/bwd``): each is needed as soon as the compute it feeds can start.
``a2a_bytes`` is what each host sends to each other host per all-to-all.
"""

from __future__ import annotations

from echelon.paradigms.base import ComputeTimes, Paradigm, at_least_two_hosts
from echelon.paradigms.collectives import all_to_all
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Bytes, Records, Seconds, SpecModel


class MoeLayer(ComputeTimes):
    expert_fwd_s: Seconds
    expert_bwd_s: Seconds
    a2a_bytes: Bytes


class MoeParams(SpecModel):
    layers: Records[MoeLayer]
    loss_s: Seconds = 0.0
    optimizer_s: Seconds = 0.0


def build(b: PlanBuilder, hosts: tuple[str, ...], p: MoeParams) -> None:
    # (task name, duration, a2a group released after it or None); a task waits
    # on the all-to-all released by the task before it.
    steps: list[tuple[str, float, str | None]] = []
    n = len(p.layers)
    for i, ly in enumerate(p.layers):
        steps += [(f"gate/l{i}", ly.fwd_s, "fwd"), (f"expert/l{i}", ly.expert_fwd_s, "fwd")]
    steps.append(("loss", p.loss_s, "bwd"))
    for i in reversed(range(n)):
        last = i == 0
        steps += [
            (f"expert_bwd/l{i}", p.layers[i].expert_bwd_s, "bwd"),
            (f"gate_bwd/l{i}", p.layers[i].bwd_s, None if last else "bwd"),
        ]
    layer_of = [int(name.rsplit("/l", 1)[1]) if "/l" in name else n - 1 for name, _, _ in steps]
    incoming: list[dict[str, list[int]]] = [{h: [] for h in hosts}]
    for k, (name, _, kind) in enumerate(steps):
        ready = {h: b.tid(f"{name}@{h}") for h in hosts}
        # sized by the layer of the step that consumes it
        size = p.layers[layer_of[k + 1]].a2a_bytes if kind else 0
        incoming.append(all_to_all(b, f"alltoall/{kind}", hosts, size, ready))
    for h in hosts:
        for k, (name, dur, _) in enumerate(steps):
            b.task(f"{name}@{h}", h, dur, after_flows=incoming[k][h])
        if p.optimizer_s > 0:
            b.task(f"opt@{h}", h, p.optimizer_s)


PARADIGM = Paradigm(
    "moe",
    "mixture of experts, all-to-all dispatch and combine around every expert layer",
    MoeParams,
    at_least_two_hosts("expert parallelism"),
    build,
)
