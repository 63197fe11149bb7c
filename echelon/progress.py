"""The progress report's one schema: the host agent builds it (:mod:`hostagent.progress`),
the controller validates it (``POST /progress``, ``--progress-socket``;
:mod:`controlplane.inflight` says why snapshots). In the core because both sides
import it and neither may import the other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field

from echelon.model import EchelonFlow, FlowKey
from echelon.specs import Index, Name, SpecModel, Text

#: Bound on groups one report may list (a registration has far fewer).
MAX_GROUPS_PER_REPORT = 4096
#: Bound on flows of one group a report may give bytes for.
MAX_FLOWS_PER_GROUP = 65536

#: How often a host refreshes its bytes sent while it sends (seconds). Why 50 ms: the
#: controller re-plans at group events, so between two of them a flow's figure is at
#: most this old; on the emulation's links a group takes hundreds of ms, and the
#: packet model (:mod:`sim.packet`) finds the same result from 20 ms to 200 ms.
REPORT_PERIOD_S = 0.05

#: Longest transit a report's ``at`` may take off its arrival time (seconds). Why a bound:
#: ``at`` is read on the host's clock, and a host whose clock runs behind the
#: controller's must not date a release long before it happened.
MAX_REPORT_AGE_S = 0.1

#: ``(flow index in its group, payload bytes of that flow this host has sent)``.
SentBytes = tuple[Index, Index]


class ReportBody(SpecModel):
    """``POST /progress``: one host's progress snapshot in one iteration of a job.

    ``sent`` is how far this host's flows of each released, unfinished group of
    ``iteration`` have got: per group, (flow index, payload bytes sent so far). Why:
    the policy ranks a flow by the bytes it has left, as the simulator does; without
    them every flow in flight counts whole and a group half sent loses its place to
    one just released. A host leaves out what it has not started; a flow it finished
    sending stays listed at its size for the rest of the iteration (left out, it would
    count whole again).

    ``at`` is when the host took the snapshot (Unix seconds, its own clock): the instant
    of the release or arrival it reports. Why: the controller dates an iteration's
    start by its groups' releases, and a report's transit (2-6 ms on the emulation,
    varying between hosts) would otherwise shift one job's deadlines against another's
    and flip the order of groups that need the same port (docs/measurements/demo.md).
    Without it (or on a clock ahead of the controller's) the arrival counts.
    """

    job: Name
    host: Name
    iteration: Index
    session: Text = ""
    seq: Index
    #: which start of the job this is; higher = restarted from the beginning
    run: Index = 0
    released: Annotated[tuple[Name, ...], Field(max_length=MAX_GROUPS_PER_REPORT)] = ()
    finished: Annotated[tuple[Name, ...], Field(max_length=MAX_GROUPS_PER_REPORT)] = ()
    sent: Annotated[
        dict[Name, Annotated[tuple[SentBytes, ...], Field(max_length=MAX_FLOWS_PER_GROUP)]],
        Field(max_length=MAX_GROUPS_PER_REPORT),
    ] = Field(default_factory=dict)
    at: Annotated[float, Field(ge=0)] | None = None


def bytes_left(ef: EchelonFlow, sent: Mapping[int, int]) -> dict[FlowKey, int]:
    """What the policy is told of ``ef``'s flows a host reported sending (``sent``: flow
    index -> payload bytes): size less sent, at least 1 (a flow whose last bytes left
    the host may still be queued on the way, and a policy drops a flow with nothing
    left); flows not reported are left out (they count whole). The controller's re-plan
    and the packet model both tell the policy this."""
    return {(ef.name, f.index): max(1, f.size - sent[f.index]) for f in ef.flows if f.index in sent}
