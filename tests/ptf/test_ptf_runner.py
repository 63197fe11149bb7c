"""The runner's pure parts and its refusals (no root, no switch needed)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from ptf_tests import run


def _ptf_params(argv: list[str]) -> dict[str, object]:
    """Parse ``--test-params`` exactly the way the ``ptf`` script does (exec in a class)."""
    text = argv[argv.index("--test-params") + 1]
    namespace: dict[str, object] = {}
    exec("class _TestParams:\n    " + text, namespace)
    return {k: v for k, v in vars(namespace["_TestParams"]).items() if not k.startswith("__")}


def test_ptf_command_carries_ports_and_params(tmp_path: Path) -> None:
    pairs = {1: ("ptfs1", "ptfh1"), 2: ("ptfs2", "ptfh2")}
    argv = run.ptf_argv("soft", pairs, "127.0.0.1:5555", 6666, 4242, tmp_path, ["ordering"])
    assert argv[-1] == "ordering"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--interface"] == [
        "1@ptfh1",
        "2@ptfh2",
    ]
    params = _ptf_params(argv)
    assert params["grpc_addr"] == "127.0.0.1:5555"
    assert (params["thrift_port"], params["switch_pid"], params["target"]) == (6666, 4242, "soft")
    assert Path(str(params["p4info"])).is_file()
    # PTF deletes its log directory on start: it must be a sub-directory, not ours.
    assert argv[argv.index("--log-dir") + 1] == str(tmp_path / "ptf")
    assert shlex.split(shlex.join(argv)) == argv


def test_not_root_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("ptf_tests.run.os.geteuid", lambda: 1000)
    assert run.main(["--target", "soft"]) == 2
    assert capsys.readouterr().err.startswith("error: root is needed")


def test_bmv2_without_simple_switch_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("ptf_tests.run.os.geteuid", lambda: 0)
    monkeypatch.setattr("targets.switch.shutil.which", lambda _name: None)
    assert run.main(["--target", "bmv2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "simple_switch_grpc" in err


def test_unknown_target_is_rejected_by_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run.main(["--target", "tofino"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
