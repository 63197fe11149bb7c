"""A job file with mistakes: every wrong field named at once, a typo's likely meaning."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from echelon.errors import SpecError
from echelon.jobs import load_job

ROOT = Path(__file__).resolve().parents[2]


def _pipe() -> dict[str, object]:
    data: dict[str, object] = yaml.safe_load((ROOT / "topo/jobs/pipe.yaml").read_text())
    return data


def test_a_typo_says_did_you_mean() -> None:
    desc = _pipe()
    stages = desc["stages"]
    assert isinstance(stages, list)
    stages[0]["fwd_secs"] = stages[0].pop("fwd_s")
    with pytest.raises(SpecError) as exc:
        load_job(desc)
    assert exc.value.field == "stages[0].fwd_secs"
    assert "did you mean 'fwd_s'?" in exc.value.message


def test_every_wrong_field_is_named() -> None:
    desc = _pipe()
    stages = desc["stages"]
    assert isinstance(stages, list)
    stages[0]["fwd_s"] = "soon"
    stages[1]["bwd_s"] = "later"
    desc["micro_batches"] = "many"
    with pytest.raises(SpecError) as exc:
        load_job(desc)
    fields = {exc.value.field, *exc.value.message.split("also wrong: ")[1].rstrip(")").split(", ")}
    assert fields == {"stages[0].fwd_s", "stages[1].bwd_s", "micro_batches"}, str(exc.value)
