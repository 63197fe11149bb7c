"""The scenario file goes through its typed model (hostagent/scenario.py):
unknown keys and wrong types are refused naming the field, like job files."""

from __future__ import annotations

from typing import Any

import pytest

from echelon.errors import SpecError
from hostagent.scenario import parse
from tests.hostagent.test_agent import scenario_dict


def field_of(d: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as e:
        parse(d)
    return e.value


def test_valid_scenario_parses() -> None:
    sc = parse(scenario_dict(0.0))
    assert [e.echelon_id for e in sc.echelons] == [7, 9] and sc.release == "open"


@pytest.mark.parametrize(
    ("mutate", "field", "needle"),
    [
        (lambda d: d.update(packet_byte=500), "packet_byte", "unknown field (allowed: ["),
        (lambda d: d["echelons"][0].update(tref=1), "echelons[0].tref", "'t_ref'"),
        (lambda d: d["echelons"][0]["flows"][0].update(size="20k"), "echelons[0].flows[0].size",
         "must be an integer"),
        (lambda d: d["echelons"][0]["flows"][0].update(sport=60416),
         "echelons[0].flows[0].sport", "not 60416"),
        (lambda d: d["echelons"][1].update(echelon_id=0), "echelons[1].echelon_id", ">= 1"),
        (lambda d: d.update(release="later"), "release", "'closed'"),
        (lambda d: d.update(packet_bytes=9000), "packet_bytes", "<= 8972"),
        (lambda d: d.update(start_at="now"), "start_at", "number"),
    ],
)  # fmt: skip
def test_scenario_errors_name_the_field(mutate: Any, field: str, needle: str) -> None:
    d = scenario_dict(0.0)
    mutate(d)
    err = field_of(d)
    assert err.field == field and needle in err.message, str(err)
