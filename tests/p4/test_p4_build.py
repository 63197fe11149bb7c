"""The committed build outputs are exactly what p4c makes of the P4 sources.

p4src/build/ (and the test program's build/) are committed so that machines
without p4c still run the project; this test keeps them honest: change a
.p4 file without `make p4` and it fails. It needs p4c-bm2-ss (CI machines
have it) and skips, saying so, where it is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: (source, committed JSON, committed P4Info), paths relative to the repository root
#: because p4c records the source file names it was given in the JSON.
PROGRAMS = [
    ("p4src/echelon.p4", "p4src/build/echelon.json", "p4src/build/echelon.p4info.txtpb"),
    *(
        (
            str(src.relative_to(ROOT)),
            str((src.parent / "build" / f"{src.stem}.json").relative_to(ROOT)),
            str((src.parent / "build" / f"{src.stem}.p4info.txtpb").relative_to(ROOT)),
        )
        for src in sorted(ROOT.glob("tests/p4/programs/*.p4"))
    ),
]
P4C = shutil.which("p4c-bm2-ss")


def p4c_version() -> str:
    assert P4C is not None
    out = subprocess.run([P4C, "--version"], capture_output=True, text=True, check=True)
    line = next(ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("Version"))
    return line.split()[1]  # e.g. 1.2.4.8


@pytest.mark.slow  # runs the compiler: 2-8 s a program
@pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not installed: build outputs not checked")
@pytest.mark.parametrize(("source", "json_path", "p4info_path"), PROGRAMS)
def test_committed_outputs_are_what_p4c_makes(
    source: str, json_path: str, p4info_path: str, tmp_path: Path
) -> None:
    assert P4C is not None
    out_json, out_info = tmp_path / "out.json", tmp_path / "out.p4info.txtpb"
    cmd = [P4C, "--arch", "v1model", "--std", "p4-16", "--p4runtime-files", str(out_info)]
    res = subprocess.run(
        [*cmd, "-o", str(out_json), source], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert out_json.read_bytes() == (ROOT / json_path).read_bytes(), f"{json_path}: run make p4"
    assert out_info.read_bytes() == (ROOT / p4info_path).read_bytes(), f"{p4info_path}: make p4"


@pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not installed")
def test_readme_names_the_compiler_version() -> None:
    readme = (ROOT / "p4src" / "build" / "README").read_text()
    assert p4c_version() in readme
