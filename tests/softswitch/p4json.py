"""The BMv2 JSON of the project's program, for tests that need what simple_switch_CLI loads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "p4src" / "build" / "echelon.json"
_compiled: list[Path] = []  # one compile per test session (pytest keeps tmp dirs until exit)


def bmv2_json(tmp_path: Path) -> Path:
    """``p4src/build/echelon.json`` if built, else compiled with p4c into ``tmp_path``;
    skips the test when neither exists (p4c is an optional tool, see docs/bmv2.md)."""
    if COMMITTED.exists():
        return COMMITTED
    if _compiled:
        return _compiled[0]
    p4c = shutil.which("p4c-bm2-ss")
    if p4c is None:
        pytest.skip("no p4src/build/echelon.json and no p4c-bm2-ss to build it")
    out = tmp_path / "echelon.json"
    subprocess.run(
        [p4c, "--arch", "v1model", "-o", str(out), str(ROOT / "p4src" / "echelon.p4")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    _compiled.append(out)
    return out
