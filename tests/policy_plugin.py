"""The worked example of docs/policies.md, copied into a folder outside the repository.

Why a copy: the point of the tests that use it is that a policy the project has
never seen (not under its tree, not registered anywhere) is found by reference.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "smallest_first.py"
#: How every tool is told about it (the folder must be on PYTHONPATH).
REFERENCE = "smallest_first:SmallestFirst"


def install_outside(folder: Path) -> dict[str, str]:
    """Copy the example into ``folder`` (outside the repository); return an environment
    whose PYTHONPATH has the repository and ``folder``."""
    assert ROOT not in folder.resolve().parents, "the plug-in must live outside the repository"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE, folder / EXAMPLE.name)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(folder)])
    return env


def install_entry_point(folder: Path, name: str) -> dict[str, str]:
    """As :func:`install_outside`, and register it as ``name`` in the ``echelon.policies``
    entry-point group (the metadata ``pip install`` of a package would write)."""
    env = install_outside(folder)
    dist = folder / "smallest_first-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: smallest-first\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[echelon.policies]\n{name} = {REFERENCE}\n")
    return env
