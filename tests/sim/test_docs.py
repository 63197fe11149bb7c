"""What docs/simulator.md tells a user to fetch and run exists outside this machine."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"


def _coflow_section() -> str:
    return DOC.read_text().split("## Coflow-benchmark traces", 1)[1].split("\n## ", 1)[0]


def test_facebook_trace_says_where_it_is_published_and_how_to_fetch_it() -> None:
    text = _coflow_section()
    # a user's clone has no sibling folders: no path outside the repository
    assert "../shared" not in text and "shared/traces" not in text
    assert "https://github.com/coflow/coflow-benchmark" in text
    (fetch,) = re.findall(r"`(curl -LO \S+)`", text)
    assert fetch.endswith("/coflow/coflow-benchmark/HEAD/FB2010-1Hr-150-0.txt")
    assert fetch.split()[-1].startswith("https://raw.githubusercontent.com/")
    assert "--coflow-trace FB2010-1Hr-150-0.txt" in text
