"""``python -m sim.eval --tiny`` end to end: the report and figures are written."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.eval.__main__ import main


@pytest.mark.slow
def test_tiny_eval_writes_report_and_figures(tmp_path: Path) -> None:
    doc, figs, rows = tmp_path / "evaluation.md", tmp_path / "figures", tmp_path / "rows.json"
    rc = main(["--tiny", "--workers", "1", "--doc", str(doc), "--figures", str(figs),
               "--rows", str(rows)])  # fmt: skip
    assert rc == 0
    text = doc.read_text()
    for section in ("## Summary", "## 1. The paper's case studies", "## 3. EchelonFlow vs",
                    "## 5. The cost of 8 queues", "## 6. Where EchelonFlow is not ahead",
                    "## 7. The Coflow special case", "## 8. Simulator speed"):  # fmt: skip
        assert section in text, section
    assert "identical: **True**" in text
    for png in ("case1.png", "case2.png", "policies_batch.png", "scale.png"):
        assert (figs / png).stat().st_size > 1000
    assert rows.stat().st_size > 0
