"""The core's typed models (echelon/specs.py, echelon/jobs.py, echelon/topology.py):
path-precise errors, unknown keys everywhere, unit warnings, one parser for
paradigm descriptions and explicit specs, and ``echelon show --topo``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from echelon import cli
from echelon.errors import SpecError
from echelon.jobs import (
    ExplicitJob,
    description_models,
    load_description,
    load_job,
    opening_groups,
)
from echelon.model import ComputeTask, EchelonFlow, Flow, IterationPlan
from echelon.topology import one_switch, topology_warnings
from echelon.topology import parse as parse_topology

ROOT = Path(__file__).resolve().parents[2]
GPIPE = yaml.safe_load((ROOT / "echelon" / "examples" / "gpipe.yaml").read_text())
STAR = yaml.safe_load((ROOT / "topo" / "star.yaml").read_text())
EXPLICIT: dict[str, Any] = {
    "job": "mine",
    "echelonflows": [
        {
            "group": "grads",
            "flows": [
                {"src": "h1", "dst": "h4", "size": 100_000, "offset": 0.0},
                {"src": "h2", "dst": "h4", "size": 100_000, "offset": 0.002},
            ],
        }
    ],
}


def gpipe(**stage0: Any) -> dict[str, Any]:
    d = copy.deepcopy(GPIPE)
    d["stages"][0].update(stage0)
    return d


def error(data: Any) -> SpecError:
    with pytest.raises(SpecError) as e:
        load_description(data)
    return e.value


@pytest.mark.parametrize(
    ("data", "field", "needle"),
    [
        (gpipe(fwd_s="4e6"), "stages[0].fwd_s", "must be a number of seconds, got '4e6'"),
        (gpipe(fwd_s=True), "stages[0].fwd_s", "must be a number of seconds"),
        (gpipe(fwd_s=-1), "stages[0].fwd_s", "non-negative"),
        (gpipe(fwd_s=float("inf")), "stages[0].fwd_s", "finite"),
        (gpipe(activation_bytes=10**400), "stages[0].activation_bytes", "must be <="),
        (gpipe(activation_bytes=2.5), "stages[0].activation_bytes", "must be an integer"),
        (gpipe(fwd_ms=1), "stages[0].fwd_ms", "allowed: ['activation_bytes', 'bwd_s'"),
        ({**GPIPE, "micro_batch": 4}, "micro_batch", "unknown field (allowed: ["),
        ({**GPIPE, "micro_batches": 0}, "micro_batches", "must be >= 1"),
        ({**GPIPE, "job": "a/b"}, "job", "must not contain '/'"),
        ({**GPIPE, "job": "x\ud800"}, "job", "valid Unicode"),
        ({**GPIPE, "hosts": ["h1", "h2", "h1", "h4"]}, "hosts[2]", "duplicate host 'h1'"),
        ({**GPIPE, "stages": []}, "stages", "non-empty list"),
        ({**GPIPE, "paradigm": "gpipe2"}, "paradigm", "unknown paradigm"),
        ({**GPIPE, "weight": 0}, "weight", "positive"),
    ],
)
def test_job_errors_name_the_field(data: dict[str, Any], field: str, needle: str) -> None:
    err = error(data)
    assert err.field == field and needle in err.message, str(err)


def test_hybrid_schedule_lists_the_allowed_values() -> None:
    d = yaml.safe_load((ROOT / "echelon" / "examples" / "hybrid.yaml").read_text())
    err = error({**d, "schedule": "zigzag"})
    assert err.field == "schedule" and "'gpipe'" in err.message and "'1f1b'" in err.message


def test_explicit_specs_through_the_same_parser() -> None:
    desc = load_description(EXPLICIT)
    assert desc.job_id == "mine" and desc.spec is None
    assert [f.offset for f in desc.echelons[0].flows] == [0.0, 0.002]
    bad = copy.deepcopy(EXPLICIT)
    bad["echelonflows"][0]["flows"][1]["size"] = 10**400
    err = error(bad)
    assert err.field == "echelonflows[0].flows[1].size"
    bad["echelonflows"][0]["flows"][1] = {"src": "h2", "dst": "h4", "size": 1, "sizee": 2}
    err = error(bad)
    assert err.field == "echelonflows[0].flows[1].sizee" and "'offset'" in err.message
    dup = copy.deepcopy(EXPLICIT)
    dup["echelonflows"].append(dup["echelonflows"][0])
    assert error(dup).field == "echelonflows[1].group"
    with pytest.raises(SpecError) as e:
        load_description(EXPLICIT, known_hosts={"h1", "h4"})
    assert e.value.field == "grads.flows[1].src"


def test_opening_groups_are_those_whose_release_waits_on_no_flow() -> None:
    """A PS job's pull leaves at each iteration's start; its push waits for backward
    compute, which waits for the pull; a pipeline's first stage sends activations after
    forward compute alone, its gradients wait for the last stage's. Explicit specs have
    no tasks: their groups with t_ref 0."""
    root = Path(__file__).resolve().parents[2]
    opening = {
        name: load_description(
            yaml.safe_load((root / f"topo/jobs/{name}.yaml").read_text())
        ).opening
        for name in ("dp", "pipe", "big")
    }
    assert opening == {"dp": {"pull"}, "pipe": {"fwd/s0-s1"}, "big": {"pull"}}
    later = copy.deepcopy(EXPLICIT)
    later["echelonflows"].append({**later["echelonflows"][0], "group": "late", "t_ref": 0.5})
    assert load_description(later).opening == {later["echelonflows"][0]["group"]}


def test_a_task_behind_one_that_waits_on_a_flow_does_not_open_the_iteration() -> None:
    """Compute alone means the whole chain: a task waiting on none itself is not early
    when a task before it on its host, or a task it waits on, waits on a flow."""
    flows = {g: EchelonFlow(f"j/0/{g}", "j", g, (Flow(0, "a", "b", 1000, 0.0),), 0.0)
             for g in ("in", "first", "behind", "after", "free")}  # fmt: skip
    tasks = (
        ComputeTask("first", "b", 0.01),  # produces "first": compute alone
        ComputeTask("wait", "b", 0.01, after_flows=(("j/0/in", 0),)),
        ComputeTask("behind", "b", 0.01),  # after "wait" on host b
        ComputeTask("free", "a", 0.01, after_tasks=("first",)),
        ComputeTask("after", "a", 0.01, after_tasks=("wait",)),
    )
    producer = {(f"j/0/{g}", 0): g for g in ("first", "behind", "after", "free")}
    plan = IterationPlan("j", 0, tuple(flows.values()), tasks, producer)
    assert opening_groups(plan) == {"in", "first", "free"}


def test_unit_warnings() -> None:
    assert load_description(GPIPE).warnings == ()
    w = load_description(gpipe(fwd_s=6)).warnings
    assert [x.field for x in w] == ["stages[0].fwd_s"] and "0.006" in w[0].message
    w = load_description(gpipe(activation_bytes=4)).warnings
    assert [x.field for x in w] == ["stages[0].activation_bytes"] and "MB" in w[0].message
    w = load_description(gpipe(activation_bytes=4 * 10**12)).warnings
    assert [x.field for x in w] == ["stages[0].activation_bytes"]
    exp = copy.deepcopy(EXPLICIT)
    exp["echelonflows"][0]["flows"][1]["offset"] = 20
    w = load_description(exp).warnings
    assert [x.field for x in w] == ["echelonflows[0].flows[1].offset"]


def test_every_example_is_warning_free_and_round_trips() -> None:
    for path in sorted((ROOT / "echelon" / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert load_description(data).warnings == (), path.name
        assert load_job(load_job(data).to_dict()) == load_job(data), path.name


def test_models_publish_a_closed_schema() -> None:
    names = [m.__name__ for m in description_models()]
    assert "GpipeJob" in names and "ExplicitJob" in names
    for model in description_models():
        schema = model.model_json_schema()
        assert schema["additionalProperties"] is False, model.__name__
    flow = ExplicitJob.model_json_schema()["$defs"]["FlowSpec"]["properties"]["size"]
    assert flow["type"] == "integer" and flow["minimum"] == 1


def test_topology_rejects_unknown_keys_and_warns_on_units() -> None:
    bad = copy.deepcopy(STAR)
    bad["links"][0] = {**bad["links"][0], "bw_mb": 10}
    bad["links"][0].pop("bw_mbit", None)
    with pytest.raises(SpecError) as e:
        parse_topology(bad)
    assert e.value.field == "links[0].bw_mb" and "'bw_mbit'" in e.value.message
    for mutate, field in [
        (lambda d: d["switches"]["s1"].update(grcp="x"), "switches.s1.grcp"),
        (lambda d: d["hosts"]["h1"].update(ip="10.0.0"), "hosts.h1.ip"),
        (lambda d: d["links"][0].update(bottleneck="yes"), "links[0].bottleneck"),
        (lambda d: d["links"][0].update(delay_ms="5ms"), "links[0].delay_ms"),
        (lambda d: d.update(extra=1), "extra"),
    ]:
        d = copy.deepcopy(STAR)
        mutate(d)
        with pytest.raises(SpecError) as e:
            parse_topology(d)
        assert e.value.field == field, str(e.value)
    assert topology_warnings(STAR) == []
    fast = copy.deepcopy(STAR)
    fast["links"][0]["bw_mbit"] = 10_000_000_000  # bit/s given as Mbit/s
    assert [w.field for w in topology_warnings(fast)] == ["links[0].bw_mbit"]


def test_one_switch_puts_host_p_on_port_p() -> None:
    topo = parse_topology(one_switch("rig", "127.0.0.1:50051", 9091))
    assert topo.name == "rig" and list(topo.switches) == ["s1"]
    s1 = topo.switches["s1"]
    assert (s1.device_id, s1.grpc, s1.thrift_port) == (0, "127.0.0.1:50051", 9091)
    routes = {(r.host, r.prefix, r.port, r.next_hop_mac) for r in topo.routes("s1")}
    assert routes == {
        (f"h{p}", f"10.0.0.{p}/32", p, f"00:00:0a:00:00:{p:02x}") for p in range(1, 5)
    }
    assert all(lk.bw_mbit is None for lk in topo.links)  # unshaped


def run_show(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["show", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_show_accepts_explicit_specs_and_topologies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "mine.json"
    f.write_text(json.dumps(EXPLICIT))
    rc, out, err = run_show(capsys, str(f), "--topo", str(ROOT / "topo" / "star.yaml"))
    assert rc == 0, err
    assert "mine (explicit)" in out and "topology" in out and "deadline ranges" in out
    rc, out, _ = run_show(capsys, str(f), "--json")
    report = json.loads(out)
    assert report["paradigm"] == "explicit" and report["echelons"][0]["group"] == "grads"
    # a host the topology lacks is refused, naming the flow
    other = copy.deepcopy(EXPLICIT)
    other["echelonflows"][0]["flows"][0]["src"] = "h9"
    f.write_text(json.dumps(other))
    rc, _, err = run_show(capsys, str(f), "--topo", str(ROOT / "topo" / "star.yaml"))
    assert rc == 2 and err.startswith("error: grads.flows[0].src:")


def test_show_prints_unit_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "slow.yaml"
    f.write_text(yaml.safe_dump(gpipe(fwd_s=6)))
    rc, out, err = run_show(capsys, str(f))
    assert rc == 0 and out
    assert "warning: stages[0].fwd_s: 6 s for one compute step is long" in err
