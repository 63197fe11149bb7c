"""Job descriptions: validation names the bad field; round trips; files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from echelon.errors import SpecError, UnknownHostError
from echelon.jobs import load_job, load_job_file
from tests.core.helpers import example_files


def gpipe(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "job": "g",
        "paradigm": "gpipe",
        "hosts": ["h1", "h2", "h3"],
        "micro_batches": 2,
        "stages": [
            {"fwd_s": 1, "bwd_s": 2, "activation_bytes": 10},
            {"fwd_s": 1, "bwd_s": 2, "activation_bytes": 10},
            {"fwd_s": 1, "bwd_s": 2},
        ],
    }
    data.update(over)
    return data


def field_of(data: Any, **kw: Any) -> str:
    with pytest.raises(SpecError) as info:
        load_job(data, **kw)
    return info.value.field


def test_valid_description_loads() -> None:
    spec = load_job(gpipe())
    assert (spec.job_id, spec.paradigm, spec.hosts) == ("g", "gpipe", ("h1", "h2", "h3"))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"stages": []}, "stages"),
        ({"micro_batches": 0}, "micro_batches"),
        ({"micro_batches": True}, "micro_batches"),
        ({"paradigm": "dataflow"}, "paradigm"),
        ({"hosts": ["h1", "h2"]}, "hosts"),  # 3 stages need 3 hosts
        ({"hosts": ["h1", "h1", "h2"]}, "hosts[1]"),
        ({"hosts": []}, "hosts"),
        ({"weight": -1}, "weight"),
        ({"job": "a/b"}, "job"),
        ({"extra": 1}, "extra"),
        ({"schedule": "1f1b"}, "schedule"),  # only hybrid takes it
        ({"optimizer_s": "fast"}, "optimizer_s"),
    ],
)
def test_bad_top_level_fields(change: dict[str, Any], field: str) -> None:
    assert field_of(gpipe(**change)) == field


@pytest.mark.parametrize(
    ("stage", "value", "field"),
    [
        ({"fwd_s": -1, "bwd_s": 2, "activation_bytes": 10}, None, "stages[1].fwd_s"),
        ({"fwd_s": 1, "bwd_s": 2, "activation_bytes": -5}, None, "stages[1].activation_bytes"),
        ({"fwd_s": 1, "bwd_s": 2}, None, "stages[1].activation_bytes"),  # middle stage sends
        ({"fwd_s": 1, "activation_bytes": 10}, None, "stages[1].bwd_s"),
        ({"fwd_s": 1, "bwd_s": 2, "activation_bytes": 10, "lr": 1}, None, "stages[1].lr"),
        ({"fwd_s": "4e6", "bwd_s": 2, "activation_bytes": 10}, None, "stages[1].fwd_s"),
        ({"fwd_s": 1, "bwd_s": 2, "activation_bytes": 1.5}, None, "stages[1].activation_bytes"),
    ],
)
def test_bad_stage_fields(stage: dict[str, Any], value: None, field: str) -> None:
    data = gpipe()
    data["stages"][1] = stage
    assert field_of(data) == field


def test_missing_fields_named() -> None:
    for key in ("job", "paradigm", "hosts"):
        data = gpipe()
        del data[key]
        assert field_of(data) == key
    data = gpipe()
    del data["stages"]
    assert field_of(data) == "stages"


def test_unknown_hosts_against_topology() -> None:
    assert field_of(gpipe(), known_hosts={"h1", "h2"}) == "hosts[2]"
    with pytest.raises(UnknownHostError, match=r"hosts\[2\]: unknown host 'h3'"):
        load_job(gpipe(), known_hosts={"h1", "h2"})
    assert load_job(gpipe(), known_hosts={"h1", "h2", "h3", "h4"}).hosts == ("h1", "h2", "h3")


def test_paradigm_specific_errors() -> None:
    ps = {
        "job": "p",
        "paradigm": "dp_ps",
        "hosts": ["h1", "h2"],
        "layers": [{"fwd_s": 1, "bwd_s": 1, "param_bytes": 1}],
    }
    assert field_of({**ps, "ps": "h9"}) == "ps"
    assert field_of(ps) == "ps"
    ar = {
        "job": "a",
        "paradigm": "dp_allreduce",
        "hosts": ["h1"],
        "layers": [{"fwd_s": 1, "bwd_s": 1, "grad_bytes": 1}],
    }
    assert field_of(ar) == "hosts"
    hy = {
        "job": "h",
        "paradigm": "hybrid",
        "hosts": ["h1", "h2", "h3"],
        "dp": 2,
        "stages": [{"fwd_s": 1, "bwd_s": 1, "activation_bytes": 1}, {"fwd_s": 1, "bwd_s": 1}],
    }
    assert field_of(hy) == "hosts"
    assert field_of({**hy, "hosts": ["h1", "h2", "h3", "h4"], "schedule": "zb"}) == "schedule"
    assert field_of([1, 2]) == "job"


def test_bad_iteration_named() -> None:
    spec = load_job(gpipe())
    with pytest.raises(SpecError) as info:
        spec.plan(-1)
    assert info.value.field == "iteration"


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_examples_round_trip(path: Path) -> None:
    spec = load_job_file(path)
    again = load_job(spec.to_dict())
    assert again == spec
    assert again.plan().echelons == spec.plan().echelons
    # the dict form is plain data: it survives YAML and JSON
    assert load_job(yaml.safe_load(yaml.safe_dump(spec.to_dict()))) == spec
    assert load_job(json.loads(json.dumps(spec.to_dict()))) == spec


def test_files_json_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "job.json"
    good.write_text(json.dumps(gpipe()))
    assert load_job_file(good).job_id == "g"
    with pytest.raises(SpecError) as info:
        load_job_file(tmp_path / "missing.yaml")
    assert info.value.field.endswith("missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("job: [unclosed\n")
    with pytest.raises(SpecError) as info:
        load_job_file(broken)
    assert "YAML" in info.value.message
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x00\xff\xfe\x01")
    with pytest.raises(SpecError, match=r"binary\.yaml: not a UTF-8 text file"):
        load_job_file(binary)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(1, 10**9)),
        min_size=1,
        max_size=6,
    ),
    st.integers(2, 5),
    st.sampled_from(["dp_ps", "dp_allreduce", "fsdp", "tensor"]),
)
def test_random_layer_jobs_round_trip(
    layers: list[tuple[int, int, int]], n_hosts: int, paradigm: str
) -> None:
    size_key = {
        "dp_ps": "param_bytes",
        "dp_allreduce": "grad_bytes",
        "fsdp": "param_bytes",
        "tensor": "allreduce_bytes",
    }[paradigm]
    data: dict[str, Any] = {
        "job": "r",
        "paradigm": paradigm,
        "hosts": [f"h{i}" for i in range(n_hosts)],
        "layers": [{"fwd_s": f / 10, "bwd_s": b / 10, size_key: s} for f, b, s in layers],
    }
    if paradigm == "dp_ps":
        data["ps"] = "h0"
    spec = load_job(data)
    assert load_job(spec.to_dict()) == spec
    plan = spec.plan(1, 5.0)
    assert spec.ideal_iteration_s >= sum(f + b for f, b, _ in layers) / 10 - 1e-9
    for ef in plan.echelons:
        assert ef.t_ref >= 5.0
        assert [f.offset for f in ef.flows] == sorted(f.offset for f in ef.flows)
