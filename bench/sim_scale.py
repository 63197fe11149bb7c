"""``python -m bench.sim_scale [--quick]``: simulator runtime vs number of flows.

Runs closed batches of the ``mixed`` mix sized to about 1k, 10k and 100k flows
(``--quick``: 1k and 10k) in one process and prints a Markdown table; the
numbers in docs/measurements/simulator.md come from this command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sim.eval.experiments import PROFILES, run_scale
from sim.eval.report import scale_table


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.sim_scale", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="only the 1k and 10k points")
    args = ap.parse_args(argv)
    profile = PROFILES["quick" if args.quick else "full"]
    print(scale_table(run_scale(profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
