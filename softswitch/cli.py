"""``python -m softswitch.cli --thrift-port 9090``: simple_switch_CLI's stand-in.

Reads simple_switch_CLI commands on stdin (one per line) and prints what
simple_switch_CLI would print: a ``RuntimeCmd: `` prompt before each command's
output, ``Error: ...`` for a bad command. Exits 0 after the last line, 2 with
``error: ...`` if the switch cannot be reached.
"""

from __future__ import annotations

import argparse
import sys

from softswitch.runtime import send_commands


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m softswitch.cli", description=__doc__)
    ap.add_argument("--thrift-port", type=int, default=9090)
    ap.add_argument("--thrift-ip", default="127.0.0.1")
    args = ap.parse_args(argv)
    lines = [ln for ln in sys.stdin.read().splitlines() if ln.strip() and not ln.startswith("#")]
    try:
        results = send_commands(args.thrift_port, lines, host=args.thrift_ip)
    except OSError as exc:
        print(
            f"error: thrift-port: cannot talk to {args.thrift_ip}:{args.thrift_port}: {exc}",
            file=sys.stderr,
        )
        return 2
    print("Control utility for runtime P4 table manipulation")
    for out in results:
        sys.stdout.write("RuntimeCmd: " + "".join(f"{o}\n" for o in out))
    sys.stdout.write("RuntimeCmd: \n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
