"""``python -m sim.eval --tiny`` end to end: the report's structure and its numbers.

The report's wording may change freely; what is checked is what a reader relies on:
every numbered section is there, in order, with its tables; each table has one row
per policy (or per mix and policy) and as many cells as its header; and the numbers
in the tables are the means of the per-run rows written with ``--rows``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from sim.eval import chakra
from sim.eval.__main__ import STAGES, main
from sim.eval.experiments import MIXES, NETWORK, POLICIES

# One tiny evaluation (about 30 s of CPU) serves every test here: not a unit test.
pytestmark = pytest.mark.slow

#: The numbered sections of the report, in order (the headings' first word).
SECTIONS = ["1.", "2.", "3.", "3b.", "3c.", "4.", "5.", "6.", "7.", "8.", "9.", "10."] + (
    ["11."] if chakra.TRACE.exists() else []  # the real job, when the shared traces are there
)
#: Sections whose content is a sentence, not a table.
WITHOUT_TABLE = {"7.", "8."}

Table = list[list[str]]


def sections(text: str) -> dict[str, str]:
    """Body of each ``## `` section, keyed by the heading's first word."""
    out: dict[str, str] = {}
    parts = re.split(r"^## ", text, flags=re.M)
    for part in parts[1:]:
        head, _, body = part.partition("\n")
        out[head.split()[0]] = body
    return out


def tables(body: str) -> list[Table]:
    """The Markdown tables of ``body``: header row first, the separator dropped."""
    found: list[Table] = []
    current: Table = []
    for line in [*body.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-"} and c for c in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def subsections(body: str) -> dict[str, str]:
    """Body of each ``### `` subsection, keyed by its first backquoted name."""
    out: dict[str, str] = {}
    for part in re.split(r"^### ", body, flags=re.M)[1:]:
        head, _, rest = part.partition("\n")
        name = re.search(r"`([^`]+)`", head)
        if name:
            out[name.group(1)] = rest
    return out


def shows(cell: str, value: float) -> bool:
    """True if ``cell`` is ``value`` rounded to the digits the cell shows."""
    text = cell.replace(",", "").replace("*", "")
    if math.isnan(value):
        return text == "–"
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text) - value) <= 0.5 * 10.0**-decimals * (1 + 1e-9) + 1e-12


def mean(rows: Sequence[Mapping[str, Any]], metric: str) -> float:
    vals = [float(r[metric]) for r in rows if not math.isnan(float(r[metric]))]
    return sum(vals) / len(vals) if vals else math.nan


def batch_rows(rows: Sequence[Mapping[str, Any]], mix: str, levels: str) -> list[Mapping[str, Any]]:
    """Closed-batch rows of the main grid: the main network, design seeds only."""
    main_gbit = float(str(NETWORK["gbit"]))
    at = [
        r
        for r in rows
        if r["mix"] == mix
        and r["load"] == "batch"
        and float(json.loads(r["network"])["gbit"]) == main_gbit
    ]
    design = {r["seed"] for r in at if r["levels"] == "ideal"}
    return [r for r in at if r["levels"] == levels and r["seed"] in design]


class Report(NamedTuple):
    text: str
    rows: list[dict[str, Any]]
    figures: Path
    stderr: str


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """One tiny evaluation for every test here (it takes a minute or two)."""
    out = tmp_path_factory.mktemp("eval")
    doc, figs, rows = out / "evaluation.md", out / "figures", out / "rows.json"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["--tiny", "--workers", "1", "--doc", str(doc), "--figures", str(figs),
                   "--rows", str(rows)])  # fmt: skip
    assert rc == 0
    return Report(doc.read_text(), json.loads(rows.read_text()), figs, err.getvalue())


def test_progress_names_every_stage_and_every_run(report: Report) -> None:
    at = [report.stderr.index(f"[eval {i}/{STAGES}] ") for i in range(1, STAGES + 1)]
    assert at == sorted(at), report.stderr
    n_rows = len(report.rows)
    assert n_rows and f"[{n_rows}/{n_rows}] point " in report.stderr


def test_sections_in_order_each_with_its_tables(
    report: Report,
) -> None:
    text, figs = report.text, report.figures
    heads = [h.split()[0] for h in re.findall(r"^## (.+)$", text, flags=re.M)]
    assert heads[0] == "Summary"
    assert [h for h in heads if h[0].isdigit()] == SECTIONS
    body = sections(text)
    for name in SECTIONS:
        found = tables(body[name])
        assert bool(found) == (name not in WITHOUT_TABLE), name
        for t in found:  # every row as wide as its header
            assert {len(r) for r in t} == {len(t[0])}, (name, t[0])
    for png in ("case1.png", "case2.png", "policies_batch.png", "scale.png", "bandwidth.png"):
        assert (figs / png).stat().st_size > 1000


def test_policy_tables_are_the_means_of_the_rows(
    report: Report,
) -> None:
    text, rows = report.text, report.rows
    per_mix = subsections(sections(text)["3."])
    assert set(per_mix) == set(MIXES)
    for mix, body in per_mix.items():
        (t,) = tables(body)
        head, body_rows = t[0], t[1:]
        runs = batch_rows(rows, mix, "ideal")
        assert [r[0].strip("*") for r in body_rows] == [
            p for p in POLICIES if any(x["policy"] == p for x in runs)
        ]
        col = {h: i for i, h in reversed(list(enumerate(head)))}  # first of repeated names
        base = mean([x for x in runs if x["policy"] == "echelon"], "iter_mean")
        for r in body_rows:
            mine = [x for x in runs if x["policy"] == r[0].strip("*")]
            assert shows(r[col["iter mean (s)"]], mean(mine, "iter_mean")), (mix, r)
            assert shows(r[col["iter p99 (s)"]], mean(mine, "iter_p99")), (mix, r)
            assert shows(r[col["JCT mean (s)"]], mean(mine, "jct_mean")), (mix, r)
            vs = float(r[col["vs echelon"]].rstrip("%"))
            assert vs == pytest.approx((mean(mine, "iter_mean") / base - 1) * 100, abs=0.051)


def test_queue_cost_table_is_the_means_of_the_rows(
    report: Report,
) -> None:
    text, rows = report.text, report.rows
    (t,) = tables(sections(text)["6."])
    head, body_rows = t[0], t[1:]
    assert head[:4] == ["mix", "policy", "mean ideal", "mean K=8"]
    expected = [
        (m, p)
        for m in MIXES
        for p in POLICIES
        if any(x["policy"] == p for x in batch_rows(rows, m, "ideal"))
        and any(x["policy"] == p for x in batch_rows(rows, m, "K=8"))
    ]
    assert [(r[0], r[1]) for r in body_rows] == expected
    for r in body_rows:
        for cell, levels in ((r[2], "ideal"), (r[3], "K=8")):
            mine = [x for x in batch_rows(rows, r[0], levels) if x["policy"] == r[1]]
            assert shows(cell, mean(mine, "iter_mean")), (r, levels)


def test_bandwidth_table_has_a_row_per_swept_bandwidth(
    report: Report,
) -> None:
    text, rows = report.text, report.rows
    body = sections(text)["4."]
    versus = tables(body)[0]
    gbits = {float(json.loads(r["network"])["gbit"]) for r in rows if r["load"] == "batch"}
    assert len(gbits) >= 2  # the tiny profile sweeps more than the main bandwidth
    shown = {(r[0], float(r[1]), r[2]) for r in versus[1:]}
    mixes = {r[0] for r in versus[1:]}
    assert shown == {(m, g, lv) for m in mixes for g in gbits for lv in ("ideal", "K=8")}


def test_coflow_special_case_is_identical(report: Report) -> None:
    text = report.text
    flags = re.findall(r"\*\*(True|False)\*\*", sections(text)["8."])
    assert flags == ["True"]
