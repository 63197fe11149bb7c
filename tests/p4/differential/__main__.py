"""``python -m tests.p4.differential``: BMv2 vs the soft switch over generated frames.

    sudo .venv/bin/python -m tests.p4.differential [--program echelon|l3acl|all] [--frames N]

Needs root (veths, raw sockets) and BMv2 (simple_switch_grpc). Prints, per
program, the frames sent, the frames that came out, the drops, the counter
cells compared and every difference; exits 1 if there was any difference.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from tests.p4.differential.catalog import PROGRAMS
from tests.p4.differential.compare import compare

ROOT = Path(__file__).resolve().parents[3]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.p4.differential", description=__doc__)
    ap.add_argument("--program", choices=[*PROGRAMS, "all"], default="all")
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--log-dir", type=Path, default=ROOT / "run" / "differential")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("error: root: veth interfaces and raw sockets need root", file=sys.stderr)
        return 2
    if shutil.which("simple_switch_grpc") is None:
        print("error: bmv2: simple_switch_grpc is not installed", file=sys.stderr)
        return 2
    failed = False
    names = list(PROGRAMS) if args.program == "all" else [args.program]
    print("| program | frames | egress frames | dropped | counter cells | digests | differences "
          "| time |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        if not PROGRAMS[name][0].json.exists():
            print(f"| {name} | skipped: no {PROGRAMS[name][0].json.name} (run "
                  "tests/p4/programs/public/fetch.py) | | | | | | |")  # fmt: skip
            continue
        t0 = time.monotonic()
        r = compare(name, args.frames, args.log_dir)
        dt = time.monotonic() - t0
        print(
            f"| {name} | {r.frames} | {r.outputs} | {r.dropped} | {r.counter_cells} "
            f"| {r.digests} | {len(r.differences)} | {dt:.0f} s |",
            flush=True,
        )
        for d in r.differences:
            print(d)
        for cname, cells in r.counted.items():
            print(f"  {cname}: packets per non-zero cell {cells}")
        failed |= bool(r.differences)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
