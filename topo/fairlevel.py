"""``fair`` in the emulation: every flow on one level, what a network without a
scheduler does.

Why a plug-in and not the core's ``fair``: the controller refuses per-flow max-min
fair sharing (:class:`echelon.policies.baselines.FairPolicy` says why: one level is
served FIFO, by arrival, not fairly). The interleaving scenarios still need the
unscheduled baseline beside the policies, and there it is close to fair: each job
has one paced sender into the shared port (each host paces at its link's rate and
shares its NIC round-robin between flows), so a FIFO fed by equal paced senders
alternates their packets. ``topo.run --scenario`` plays this class for ``fair``
(``topo.fairlevel:OneLevelFair``) and its report says so.
"""

from __future__ import annotations

from echelon.policies.baselines import FairPolicy


class OneLevelFair(FairPolicy):
    """Fair's ranks (all 0): every flow on one level of the switch."""

    not_installable = None  # type: ignore[assignment]
