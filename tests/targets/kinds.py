"""The switch targets a test runs on: the soft switch always, BMv2 when installed."""

from __future__ import annotations

import shutil

import pytest

KINDS = [
    pytest.param("soft", id="soft"),
    pytest.param(
        "bmv2",
        id="bmv2",
        marks=pytest.mark.skipif(
            shutil.which("simple_switch_grpc") is None, reason="BMv2 is not installed"
        ),
    ),
]
