"""``echelon job --model``: job descriptions from model parameters (echelon/jobgen.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from echelon.cli import main
from echelon.errors import SpecError
from echelon.jobgen import job_for_parallelism
from echelon.jobs import load_description, load_job
from echelon.models import GPT2_XL, load_model, transformer_from_config
from echelon.specs import read_file
from echelon.topology import load as load_topology
from sim.workloads import Template, describe

ROOT = Path(__file__).resolve().parents[2]
H4 = ["h1", "h2", "h3", "h4"]
H8 = [f"h{i}" for i in range(1, 9)]

#: The fields of Hugging Face's gpt2-xl config.json that the reader uses, plus some of
#: the ones it ignores (a real config carries them).
GPT2_XL_CONFIG = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 1600,
    "n_head": 25,
    "n_layer": 48,
    "n_positions": 1024,
    "vocab_size": 50257,
}


def _job(tmp_path: Path, *argv: str) -> Path:
    out = tmp_path / "job.yaml"
    assert main(["job", *argv, "-o", str(out)]) == 0
    return out


def test_generated_file_round_trips_through_the_job_parser(tmp_path: Path) -> None:
    out = _job(tmp_path, "--model", "gpt2-xl", "--pp", "4", "--hosts", ",".join(H4))
    data = read_file(out)
    star = load_topology(ROOT / "topo" / "star.yaml")
    desc = load_description(data, star.hosts)  # what echelonctl register / show parse
    assert desc.job_id == "gpt2-xl-1f1b" and desc.spec is not None
    assert desc.spec.paradigm == "pipedream_1f1b" and desc.spec.hosts == tuple(H4)
    assert desc.warnings == ()
    assert desc.spec.to_dict() == data  # nothing lost or added on the way through
    assert main(["show", str(out), "--topo", str(ROOT / "topo" / "star.yaml")]) == 0


def test_gpt2_xl_job_equals_the_simulators_template(tmp_path: Path) -> None:
    out = _job(
        tmp_path, "--model", "gpt2-xl", "--pp", "4", "--paradigm", "gpipe",
        "--micro-batches", "8", "--name", "g", "--hosts", ",".join(H4),
    )  # fmt: skip
    assert read_file(out) == describe("g", Template("gpipe", "gpt2-xl", 4, micro_batches=8), H4)
    hybrid = job_for_parallelism(
        load_model("gpt3-2.7b"), H8, tp=2, pp=2, dp=2, micro_batches=4, batch=2, name="h"
    )
    tmpl = Template("hybrid", "gpt3-2.7b", 8, micro_batches=4, batch=2, dp=2, tp=2)
    assert hybrid == describe("h", tmpl, H8)
    dp = job_for_parallelism(load_model("resnet50"), H4, dp=4, name="r")
    assert dp == describe("r", Template("dp_allreduce", "resnet50", 4), H4)


def test_config_json_gives_the_same_job_as_the_named_model(tmp_path: Path) -> None:
    cfg = tmp_path / "gpt2-xl" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(GPT2_XL_CONFIG))
    model = load_model(str(cfg))
    assert model == GPT2_XL  # same shape, same name (the folder's)
    newer = dict(GPT2_XL_CONFIG)
    for short, long in (("n_layer", "num_hidden_layers"), ("n_embd", "hidden_size")):
        newer[long] = newer.pop(short)
    assert transformer_from_config(newer, "gpt2-xl") == GPT2_XL
    a = job_for_parallelism(model, H4, dp=4, name="x")
    b = job_for_parallelism(GPT2_XL, H4, dp=4, name="x")
    assert a == b and a["paradigm"] == "dp_allreduce" and len(a["layers"]) == 48


@pytest.mark.parametrize(
    ("drop", "field"),
    [("n_layer", "n_layer"), ("n_embd", "n_embd"), ("vocab_size", "vocab_size")],
)
def test_config_json_missing_field_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], drop: str, field: str
) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({k: v for k, v in GPT2_XL_CONFIG.items() if k != drop}))
    assert main(["job", "--model", str(cfg), "--dp", "2", "--hosts", "h1,h2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {cfg}: {field}: is required"), err
    assert "Traceback" not in err


def test_config_json_bad_values_are_named() -> None:
    bad = {**GPT2_XL_CONFIG, "n_layer": "48"}
    with pytest.raises(SpecError, match="n_layer: must be an integer"):
        transformer_from_config(bad)
    with pytest.raises(SpecError, match="n_head: hidden size 1600 is not divisible by 24"):
        transformer_from_config({**GPT2_XL_CONFIG, "n_head": 24})
    with pytest.raises(SpecError, match="n_layer: 48 disagrees with num_hidden_layers=24"):
        transformer_from_config({**GPT2_XL_CONFIG, "num_hidden_layers": 24})
    with pytest.raises(SpecError, match="must be a JSON object"):
        transformer_from_config([1, 2])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "gpt2-xl", "--pp", "4", "--hosts", "h1,h2"],
         "error: --hosts: tp x pp x dp = 1 x 4 x 1 = 4 workers, but 2 hosts given"),
        (["--model", "gpt2-xl", "--hosts", "h1"], "error: --hosts: one worker sends nothing"),
        (["--model", "gpt9", "--hosts", "h1,h2"], "error: --model: unknown model 'gpt9'"),
        (["--model", "gpt2-xl", "--pp", "2", "--dp", "2", "--paradigm", "gpipe",
          "--hosts", "h1,h2,h3,h4"], "error: --dp: gpipe does not use dp"),
        (["--model", "resnet50", "--tp", "2", "--hosts", "h1,h2"],
         "error: --tp: resnet50 is only modelled data parallel"),
        (["--model", "gpt2-xl", "--dp", "2", "--hosts", "h1,h1"], "error: --hosts: a host appears"),
        (["--model", "gpt2-xl", "--pp", "0", "--hosts", "h1,h2"],
         "error: --pp: must be a positive integer"),
    ],
)  # fmt: skip
def test_bad_parallelism_is_a_clear_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["job", *argv]) == 2
    assert capsys.readouterr().err.startswith(message)


@pytest.mark.parametrize(
    ("degrees", "paradigm"),
    [({"pp": 2}, "pipedream_1f1b"), ({"tp": 2}, "tensor"), ({"dp": 2}, "dp_allreduce"),
     ({"tp": 2, "dp": 2}, "hybrid"), ({"pp": 2, "dp": 2}, "hybrid")],
)  # fmt: skip
def test_paradigm_follows_the_degrees(degrees: dict[str, int], paradigm: str) -> None:
    n = 1
    for v in degrees.values():
        n *= v
    data = job_for_parallelism(GPT2_XL, H8[:n], **degrees)
    assert data["paradigm"] == paradigm
    assert load_job(data).hosts == tuple(H8[:n])


def test_stdout_and_module_entry_point(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "echelon", "job", "--model", "resnet50", "--dp", "3",
         "--paradigm", "dp_ps", "--hosts", "a,b,c"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (tmp_path / "j.yaml").write_text(run.stdout)
    spec = load_job(read_file(tmp_path / "j.yaml"))
    assert spec.paradigm == "dp_ps" and spec.params is not None
    assert read_file(tmp_path / "j.yaml")["ps"] == "a"
