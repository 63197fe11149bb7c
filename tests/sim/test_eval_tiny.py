"""``python -m sim.eval --tiny`` end to end: the report and figures are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.eval.__main__ import main


@pytest.mark.slow
def test_tiny_eval_writes_report_and_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, figs, rows = tmp_path / "evaluation.md", tmp_path / "figures", tmp_path / "rows.json"
    rc = main(["--tiny", "--workers", "1", "--doc", str(doc), "--figures", str(figs),
               "--rows", str(rows)])  # fmt: skip
    assert rc == 0
    # Progress on stderr: every stage named, in order, and a line per grid run (no TTY).
    err = capsys.readouterr().err
    at = [err.index(f"[eval {i}/6] ") for i in range(1, 7)]
    assert at == sorted(at), err
    n_rows = len(json.loads(rows.read_text()))
    assert f"[{n_rows}/{n_rows}] point " in err
    text = doc.read_text()
    for section in ("## Summary", "## 1. The paper's case studies", "## 3. EchelonFlow vs",
                    "## 4. Network-bound regime", "## 6. The cost of 8 queues",
                    "## 7. Where EchelonFlow is not ahead", "## 8. The Coflow special case",
                    "## 9. Against the exact optimum", "## 10. Simulator speed",
                    "## 3b. Ablation", "every policy on 8 queues",
                    "## 3c. Held-out seeds"):  # fmt: skip
        assert section in text, section
    assert "identical: **True**" in text
    assert "| echelon-noslack |" in text and "| **echelon** |" in text
    assert "target -5%" in text
    # the held-out seeds' seed-level table (sim.eval.seeds), in the summary and in 3c
    assert text.count("echelon vs it [95% CI]") >= 4 and "largest mean gap" in text
    assert "The (mean, p99) plane on the held-out seeds" in text
    assert "Why the box is missed." in text
    # the tiny profile sweeps 100 and 10 Gbit/s: both columns must reach the report
    assert "mean @100G (s)" in text and "mean @10G (s)" in text
    assert "| hybrid | 10 | K=8 |" in text and "`hybrid @ 10 Gbit/s`" in text
    for png in ("case1.png", "case2.png", "policies_batch.png", "scale.png", "bandwidth.png"):
        assert (figs / png).stat().st_size > 1000
    assert rows.stat().st_size > 0
