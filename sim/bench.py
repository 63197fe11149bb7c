"""``python -m sim.bench [--quick]``: simulator runtime vs number of flows.

Runs closed batches of the ``mixed`` mix sized to about 1k, 10k and 100k flows
(``--quick``: 1k and 10k) in one process and prints a Markdown table; the
numbers in docs/simulator.md come from this command. ``--compare-allocators``
instead runs each point twice in this process, with the numpy allocator
(:mod:`sim.alloc`) and the compiled one (:mod:`sim.fastalloc`, the default), and
prints CPU seconds of each, so the ratio is measured under the same load.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from sim.eval.experiments import PROFILES, Profile, run_scale
from sim.eval.report import scale_table


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the 1k and 10k points")
    ap.add_argument(
        "--compare-allocators", action="store_true", help="CPU time: numpy vs compiled allocator"
    )
    args = ap.parse_args(argv)
    profile = PROFILES["quick" if args.quick else "full"]
    if args.compare_allocators:
        print(compare_allocators(profile))
        return 0
    print(scale_table(run_scale(profile)))
    return 0


def compare_allocators(profile: Profile) -> str:
    """CPU seconds of each scale point with either allocator (same process, same load)."""
    import sim.engine
    from sim import alloc, fastalloc
    from sim.eval.experiments import scale_points
    from sim.sweep import run_point

    rows = [
        "| policy | flows | events | CPU numpy alloc (s) | CPU compiled alloc (s) | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for _target, point in scale_points(profile):
        cpu = {}
        for name, fn in (("numpy", alloc.allocate), ("compiled", fastalloc.allocate)):
            setattr(sim.engine, "allocate", fn)  # noqa: B010 - swap the engine's allocator
            t = time.process_time()
            row = run_point(point)
            cpu[name] = time.process_time() - t
        setattr(sim.engine, "allocate", fastalloc.allocate)  # noqa: B010
        rows.append(
            f"| {point.policy} | {row['flows']} | {row['events']} | {cpu['numpy']:.2f} | "
            f"{cpu['compiled']:.2f} | {cpu['numpy'] / cpu['compiled']:.1f} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
