"""Download the public v1model programs listed in SOURCES.md and compile them with p4c.

    .venv/bin/python tests/p4/programs/public/fetch.py [--force]

Each program is fetched from GitHub at its pinned commit into this folder
(``NAME.p4``) and compiled into ``build/NAME.json`` + ``build/NAME.p4info.txtpb``,
the paths ``tests/p4/differential/public.py`` reads. Exit 2 with ``error: ...``
when a download or the compiler fails.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: name -> (repository, commit, path)
SOURCES = {
    "load_balance": ("p4lang/tutorials", "7a4d64a5bdb440b4103b8d846327ceda17847b36",
                     "exercises/load_balance/solution/load_balance.p4"),
    "calc": ("zxc308/P4-tutorials", "658c6743ac7efa05c05e1acda1af7b4efc157f26",
             "exercises/calc/solution/calc.p4"),
    "source_routing": ("zxc308/P4-tutorials", "658c6743ac7efa05c05e1acda1af7b4efc157f26",
                       "exercises/source_routing/solution/source_routing.p4"),
    "basic_tunnel": ("zxc308/P4-tutorials", "658c6743ac7efa05c05e1acda1af7b4efc157f26",
                     "exercises/basic_tunnel/solution/basic_tunnel.p4"),
}  # fmt: skip


def fetch(name: str, force: bool) -> Path:
    repo, commit, path = SOURCES[name]
    dst = HERE / f"{name}.p4"
    if dst.exists() and not force:
        return dst
    url = f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        dst.write_bytes(resp.read())
    return dst


def compile_program(src: Path) -> None:
    p4c = shutil.which("p4c-bm2-ss")
    if p4c is None:
        raise RuntimeError("p4c-bm2-ss is not installed")
    out = HERE / "build" / src.stem
    out.parent.mkdir(exist_ok=True)
    res = subprocess.run(
        [p4c, "--arch", "v1model", "--std", "p4-16", "--p4runtime-files",
         f"{out}.p4info.txtpb", "-o", f"{out}.json", str(src)],
        capture_output=True, text=True,
    )  # fmt: skip
    if res.returncode != 0:
        raise RuntimeError(f"{src.name}: p4c failed: {res.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--force", action="store_true", help="download again")
    args = ap.parse_args(argv)
    for name in SOURCES:
        try:
            compile_program(fetch(name, args.force))
        except (OSError, RuntimeError) as exc:
            print(f"error: {name}: {exc}", file=sys.stderr)
            return 2
        print(f"{name}: {HERE / 'build' / name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
