"""Every program the differential test runs, by name: (Program, frame strategy)."""

from __future__ import annotations

from typing import Any

from tests.p4.differential.programs import PROGRAMS as OWN
from tests.p4.differential.public import PUBLIC_PROGRAMS
from tests.p4.differential.rig import Program
from tests.p4.differential.v1programs import V1PROGRAMS

PROGRAMS: dict[str, tuple[Program, Any]] = {**OWN, **V1PROGRAMS, **PUBLIC_PROGRAMS}
