"""Run the PTF suite against a freshly started switch: ``python -m ptf_tests.run``.

    python -m ptf_tests.run [--target soft|bmv2|auto] [--log-dir DIR] [-- extra ptf args]

Creates veth pairs (switch end ``ptfsN``, PTF end ``ptfhN``), starts the target
on the switch ends with :func:`targets.switch.start_target`, runs ``ptf`` on the
PTF ends and always cleans up (stops the switch by PID, deletes the veths), on
failure and on Ctrl-C too. The exit status is PTF's.

Why a lock: the veth names and the suite's state are machine-wide, so two runs
at once (``make test`` and ``make ptf`` in two terminals) would trample each
other; the second run waits for the first instead.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from controlplane.daemon import DEFAULT_JSON, DEFAULT_P4INFO
from echelon.errors import EchelonError
from ptf_tests.packets import PORTS
from targets.process import free_port, pythonpath
from targets.switch import TargetKind, resolve_kind, start_target

ROOT = Path(__file__).resolve().parent.parent
SUITE_DIR = Path(__file__).resolve().parent
LOCK_PATH = Path("/run/lock/echelon-ptf.lock")
SWITCH_PREFIX = "ptfs"  # switch ends: ptfs1..ptfs4
HOST_PREFIX = "ptfh"  # PTF ends: ptfh1..ptfh4
MTU = 9500


class RunError(EchelonError):
    """The suite could not be set up (not root, missing tool or file, bad option)."""


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise RunError(f"ip {' '.join(args)}: {res.stderr.strip()}")


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def delete_veths() -> None:
    """Remove this suite's veth pairs (deleting one end removes its peer)."""
    for port in PORTS:
        if _link_exists(f"{SWITCH_PREFIX}{port}"):
            subprocess.run(["ip", "link", "del", f"{SWITCH_PREFIX}{port}"], capture_output=True)


def create_veths() -> dict[int, tuple[str, str]]:
    """``{port: (switch end, PTF end)}``, up, IPv6 off (no stray router solicitations
    in an exact-sequence test), checksum/segmentation offloads off, jumbo MTU."""
    delete_veths()  # leftovers of a run that was killed with SIGKILL
    pairs = {}
    for port in PORTS:
        sw, host = f"{SWITCH_PREFIX}{port}", f"{HOST_PREFIX}{port}"
        _ip("link", "add", sw, "type", "veth", "peer", "name", host)
        pairs[port] = (sw, host)
        for dev in (sw, host):
            Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1\n")
            _ip("link", "set", "dev", dev, "mtu", str(MTU), "up")
            if shutil.which("ethtool"):
                for feature in ("rx", "tx", "sg", "tso", "gso", "gro"):
                    subprocess.run(
                        ["ethtool", "-K", dev, feature, "off"], capture_output=True, check=False
                    )
    return pairs


def ptf_argv(
    kind: str,
    pairs: dict[int, tuple[str, str]],
    grpc_addr: str,
    thrift_port: int,
    pid: int,
    log_dir: Path,
    extra: Sequence[str],
) -> list[str]:
    """The ``ptf`` command line; test parameters are Python literals (PTF exec()s them)."""
    params = {
        "grpc_addr": grpc_addr,
        "device_id": 0,
        "p4info": str(DEFAULT_P4INFO),
        "bmv2_json": str(DEFAULT_JSON),
        "target": kind,
        "thrift_port": thrift_port,
        "switch_pid": pid,
        "log_dir": str(log_dir),
    }
    ptf = shutil.which("ptf") or str(Path(sys.executable).parent / "ptf")
    argv = [sys.executable, ptf, "--test-dir", str(SUITE_DIR), "--pypath", str(ROOT)]
    for port, (_, host) in sorted(pairs.items()):
        argv += ["--interface", f"{port}@{host}"]
    argv += ["--log-dir", str(log_dir / "ptf"), "--test-case-timeout", "60"]
    argv += ["--test-params", ";".join(f"{k}={v!r}" for k, v in params.items())]
    return [*argv, *extra]


@contextmanager
def exclusive() -> Iterator[None]:
    """Hold the suite's machine-wide lock (one run at a time)."""
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_PATH.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # unwind through the finally blocks below


def run(kind: TargetKind, log_dir: Path, extra: Sequence[str]) -> int:
    if os.geteuid() != 0:
        raise RunError("root is needed for veth interfaces and raw sockets (try sudo)")
    real = resolve_kind(kind)
    if not DEFAULT_P4INFO.exists():
        raise RunError(f"no P4Info at {DEFAULT_P4INFO}")
    if real == "bmv2" and not DEFAULT_JSON.exists():
        raise RunError(f"BMv2 needs the compiled program {DEFAULT_JSON} (run make p4)")
    log_dir.mkdir(parents=True, exist_ok=True)
    # The soft switch, its CLI and the tests import this repository's packages.
    os.environ["PYTHONPATH"] = pythonpath()
    with exclusive():
        target = None
        try:
            pairs = create_veths()
            grpc_addr, thrift_port = f"127.0.0.1:{free_port()}", free_port()
            (log_dir / "switch.log").unlink(missing_ok=True)  # the target appends
            target = start_target(
                real,
                {p: sw for p, (sw, _) in pairs.items()},
                grpc_addr,
                thrift_port,
                log_path=log_dir / "switch.log",
            )
            argv = ptf_argv(real, pairs, grpc_addr, thrift_port, target.pid, log_dir, extra)
            print(f"ptf_tests: {real} switch pid {target.pid}; logs in {log_dir}", flush=True)
            (log_dir / "ptf-command.txt").write_text(" ".join(map(shlex.quote, argv)) + "\n")
            return subprocess.run(argv, cwd=log_dir).returncode
        finally:
            if target is not None:
                target.stop()
            delete_veths()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ptf_tests.run",
        description="Run the PTF suite against a freshly started switch target.",
    )
    parser.add_argument("--target", choices=("soft", "bmv2", "auto"), default="auto")
    parser.add_argument("--log-dir", type=Path, default=ROOT / "run" / "ptf")
    parser.add_argument("ptf_args", nargs="*", help="after --: passed to ptf (e.g. a test name)")
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        return run(args.target, args.log_dir.resolve(), args.ptf_args)
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; switch stopped and veths removed", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
