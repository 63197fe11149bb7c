"""BMv2 and the soft switch, same program, same entries, same hypothesis-generated
frames: egress ports and bytes and every counter must be identical.

CI runs a few hundred frames per program (``DIFF_FRAMES`` to change it); the full
run (>= 10,000 per program) is ``sudo .venv/bin/python -m tests.p4.differential``.
Skips, saying why, without root or without BMv2.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.p4.differential.catalog import PROGRAMS
from tests.p4.differential.compare import compare

pytestmark = [pytest.mark.root, pytest.mark.slow]
FRAMES = int(os.environ.get("DIFF_FRAMES", "400"))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_bmv2_and_soft_switch_agree(program: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (veth interfaces, raw sockets)")
    if shutil.which("simple_switch_grpc") is None:
        pytest.skip("BMv2 (simple_switch_grpc) is not installed: no reference to compare with")
    prog, _frames = PROGRAMS[program]
    if not prog.json.exists():
        pytest.skip(f"{prog.json} is absent: run tests/p4/programs/public/fetch.py (network, p4c)")
    res = compare(program, FRAMES, tmp_path)
    assert res.differences == []
    assert res.frames >= FRAMES * 0.9, f"hypothesis generated only {res.frames} frames"
    assert res.outputs > 0 and res.dropped > 0, "frames must exercise forwarding and drops"
