"""The progress report's one schema: the host agent builds it (:mod:`hostagent.progress`),
the controller validates it (``POST /progress``, ``--progress-socket``;
:mod:`controlplane.inflight` says why snapshots). In the core because both sides
import it and neither may import the other."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from echelon.specs import Index, Name, SpecModel, Text

#: Bound on groups one report may list (a registration has far fewer).
MAX_GROUPS_PER_REPORT = 4096


class ReportBody(SpecModel):
    """``POST /progress``: one host's progress snapshot in one iteration of a job."""

    job: Name
    host: Name
    iteration: Index
    session: Text = ""
    seq: Index
    #: which start of the job this is; higher = restarted from the beginning
    run: Index = 0
    released: Annotated[tuple[Name, ...], Field(max_length=MAX_GROUPS_PER_REPORT)] = ()
    finished: Annotated[tuple[Name, ...], Field(max_length=MAX_GROUPS_PER_REPORT)] = ()
