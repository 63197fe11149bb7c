"""``targets.process.pythonpath``: a child Python imports this source tree first and
keeps the parent's own path after it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from targets.process import SOURCE_TREE, pythonpath


def test_a_child_imports_this_tree_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert pythonpath() == os.pathsep.join([str(SOURCE_TREE), str(tmp_path)])
    # a child started elsewhere finds this tree's packages, not another checkout's
    (tmp_path / "targets").mkdir()
    (tmp_path / "targets" / "__init__.py").write_text("raise ImportError('wrong tree')\n")
    code = "import targets.process as p; print(p.__file__)"
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True, check=True
    )
    assert Path(out.stdout.strip()) == SOURCE_TREE / "targets" / "process.py"


def test_without_a_parent_path_it_is_the_tree_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert pythonpath("/some/tree") == "/some/tree"
