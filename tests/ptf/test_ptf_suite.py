"""Runs the whole PTF suite on the soft switch and, where BMv2 is installed, on
BMv2 too, as ``make test`` does (without simple_switch_grpc the BMv2 run is
skipped and pytest's ``-ra`` summary says so).

The suite itself asserts exact frames and counters; this wrapper asserts that
PTF passed and that every test PTF knows of actually ran (a module that fails
to import, or a test silently skipped, must not look like success).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptf_tests.run import SWITCH_PREFIX, exclusive

ROOT = Path(__file__).resolve().parents[2]
PTF = Path(sys.executable).parent / "ptf"

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _listed_tests(log_dir: Path) -> list[str]:
    """``module.Class`` of every test in ptf_tests/, as PTF itself enumerates them.

    (PTF deletes its ``--log-file`` before writing it: never point it at a shared path.)
    """
    argv = [sys.executable, str(PTF), "--test-dir", str(ROOT / "ptf_tests")]
    argv += ["--pypath", str(ROOT), "--log-file", str(log_dir / "list.log"), "--list-test-names"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=log_dir)
    assert res.returncode == 0, res.stderr
    return re.findall(r"^(\w+\.\w+)$", res.stdout, flags=re.M)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("target", ["soft", "bmv2"])
def test_suite_passes(target: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the PTF suite needs root (veth interfaces, raw sockets)")
    if target == "bmv2" and shutil.which("simple_switch_grpc") is None:
        pytest.skip("BMv2 (simple_switch_grpc) is not installed: PTF ran on the soft switch only")
    expected = _listed_tests(tmp_path)
    assert len(expected) >= 10, f"suite shrank: {expected}"
    argv = [sys.executable, "-m", "ptf_tests.run", "--target", target]
    argv += ["--log-dir", str(tmp_path / "run")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        raw, _ = proc.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the runner stops the switch and removes its veths
        raw, _ = proc.communicate(timeout=30)
        pytest.fail("PTF suite took over 200 s:\n" + raw.decode(errors="replace")[-3000:])
    out = raw.decode(errors="replace")
    assert proc.returncode == 0, out[-6000:]
    ran = re.search(r"^Ran (\d+) tests? in", out, flags=re.M)
    assert ran is not None, out[-3000:]
    assert int(ran.group(1)) == len(expected), out[-3000:]
    for name in expected:  # unittest's verbose line for each: "<module>.<Class> ... ok"
        assert re.search(rf"^{re.escape(name)} \.\.\. ok$", out, flags=re.M), f"{name} not ok"
    with exclusive():  # not while another run (holding the lock) has its veths up
        assert not list(Path("/sys/class/net").glob(f"{SWITCH_PREFIX}*")), "veths left behind"
