"""``python -m controlplane.openapi [FILE]``: write the API's OpenAPI schema.

The committed copy (``docs/api-openapi.json``) is what clients read without
running the controller; a test fails when it is out of date.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from controlplane.api import make_app

DEFAULT = Path(__file__).resolve().parents[1] / "docs" / "api-openapi.json"


def schema() -> dict[str, Any]:
    return make_app(None).openapi()


def render() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else DEFAULT
    out.write_text(render())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
