"""The import graph obeys the layering that docs/architecture.md writes down.

The doc's "Allowed imports" table is the single statement of which top-level package may
import which; this test reads that table, so changing the layering means changing the doc.
Function-local imports count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\|\s*`(\w+)/`\s*\|\s*(.*?)\s*\|")


def allowed_arrows() -> dict[str, set[str]]:
    """Package -> the packages it may import, from the doc's table (``—`` means none)."""
    text = DOC.read_text()
    start = text.index("## Allowed imports")
    table: dict[str, set[str]] = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        m = ROW.match(line)
        if m:
            table[m.group(1)] = set(re.findall(r"`(\w+)`", m.group(2)))
    return table


def imports_of(package: str, known: set[str]) -> dict[str, set[str]]:
    """Top-level packages of ``known`` that modules of ``package`` import -> where."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in known and top != package:
                    found.setdefault(top, set()).add(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_table_names_every_python_package() -> None:
    table = allowed_arrows()
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - {"tests"} == set(table), "docs/architecture.md's table and the tree differ"


def test_every_import_between_packages_is_an_allowed_arrow() -> None:
    table = allowed_arrows()
    known = set(table)
    bad = []
    for package, allowed in sorted(table.items()):
        for target, where in sorted(imports_of(package, known).items()):
            if target not in allowed:
                bad.append(f"{package} -> {target} ({', '.join(sorted(where)[:3])})")
    assert not bad, "imports the layering does not allow:\n" + "\n".join(bad)


def test_the_allowed_arrows_form_no_cycle() -> None:
    table = allowed_arrows()
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(table.get(node, ())):
            assert state.get(nxt) != 1, "cycle in the allowed arrows: " + " -> ".join(
                [*trail, node, nxt]
            )
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for package in sorted(table):
        if package not in state:
            visit(package, [])
