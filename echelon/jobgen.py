"""Job descriptions from model parameters: what ``echelon job --model`` writes.

A model (:mod:`echelon.models`: GPT-2 XL, GPT-3 2.7B, ResNet-50 or a Hugging Face
``config.json``), a paradigm and its knobs become the job description dict that
:func:`echelon.jobs.load_job` reads. The simulator's workload templates
(``sim/workloads.py``) call :func:`describe_model` too, so a job file written by
``echelon job`` is exactly the job the simulator evaluates for the same parameters.

:func:`job_for_parallelism` maps Megatron-style degrees (tensor ``tp``, pipeline
``pp``, data ``dp``) onto a paradigm and checks them against the host list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from echelon.errors import SpecError
from echelon.models import (
    RESNET50,
    V100,
    Gpu,
    Transformer,
    pipeline_stages,
    resnet50_layers,
    transformer_layers,
)

#: The paradigms a model can be turned into (``1f1b`` is ``pipedream_1f1b``), and which
#: parallelism degrees each uses: the others must be 1.
_USES = {
    "gpipe": ("pp",),
    "1f1b": ("pp",),
    "hybrid": ("tp", "pp", "dp"),
    "dp_allreduce": ("dp",),
    "dp_ps": ("dp",),
    "fsdp": ("dp",),
    "tensor": ("tp",),
    "moe": ("dp",),
}
PARADIGMS = tuple(_USES)

Model = Transformer | str
"""A :class:`Transformer`, or :data:`echelon.models.RESNET50`."""


def model_name(model: Model) -> str:
    return model.name if isinstance(model, Transformer) else model


def _ddp_bucket_bytes() -> int:
    return 25 * 2**20  # PyTorch DDP's default bucket_cap_mb = 25


def describe_model(
    name: str,
    paradigm: str,
    model: Model,
    hosts: Sequence[str],
    *,
    micro_batches: int = 8,
    batch: int = 0,
    dp: int = 1,
    tp: int = 1,
    unit: int = 1,
    gpu: Gpu = V100,
) -> dict[str, Any]:
    """A job description (dict for ``echelon.jobs.load_job``) of ``model`` trained with
    ``paradigm`` on ``hosts``. ``batch`` 0 means the model's default (256 images,
    4 sequences); ``unit`` merges that many transformer layers into one modelled layer
    for the per-layer paradigms (fewer, larger flows, same bytes and compute)."""
    if paradigm not in PARADIGMS:
        raise SpecError("paradigm", f"unknown paradigm {paradigm!r} (known: {PARADIGMS})")
    if not isinstance(model, Transformer) and model != RESNET50:
        raise SpecError("model", f"unknown model {model!r}")
    base: dict[str, Any] = {"job": name, "hosts": list(hosts)}
    p, n = paradigm, len(hosts)
    if not isinstance(model, Transformer):
        if p not in ("dp_allreduce", "dp_ps"):
            raise SpecError(
                "model", "resnet50 is only modelled data parallel (dp_allreduce, dp_ps)"
            )
        return _data_parallel(base, p, resnet50_layers(batch or 256, gpu))
    batch = batch or 4
    if p in ("gpipe", "1f1b"):
        stages = [
            {k: v for k, v in st.items() if k in ("fwd_s", "bwd_s", "activation_bytes")}
            for st in pipeline_stages(model, n, batch, gpu)
        ]
        stages[-1].pop("activation_bytes")
        para = "gpipe" if p == "gpipe" else "pipedream_1f1b"
        return {**base, "paradigm": para, "micro_batches": micro_batches, "stages": stages}
    if p == "hybrid":
        n_st = n // (dp * tp)
        if n_st * dp * tp != n or n_st < 1:
            raise SpecError("hosts", f"{n} hosts is not stages x dp={dp} x tp={tp}")
        stages = pipeline_stages(model, n_st, batch, gpu, tp=tp)
        stages[-1].pop("activation_bytes")
        return {
            **base,
            "paradigm": "hybrid",
            "micro_batches": micro_batches,
            "dp": dp,
            "tp": tp,
            "schedule": "1f1b",
            "stages": stages,
        }
    return _per_layer(base, p, n, unit, model, batch, gpu)


def _data_parallel(base: dict[str, Any], p: str, layers: list[dict[str, Any]]) -> dict[str, Any]:
    """``dp_allreduce`` (DDP's gradient buckets) or ``dp_ps`` (the first host serves the
    parameters) over per-layer compute times and bytes, for any model."""
    if p == "dp_ps":
        return {**base, "paradigm": p, "ps": base["hosts"][0],
                "layers": _rename(layers, "param_bytes")}  # fmt: skip
    return {**base, "paradigm": p, "bucket_bytes": _ddp_bucket_bytes(),
            "layers": _rename(layers, "grad_bytes")}  # fmt: skip


def _group(layers: list[dict[str, Any]], unit: int) -> list[dict[str, Any]]:
    """Merge every ``unit`` consecutive layers (sums of times and bytes)."""
    out = []
    for i in range(0, len(layers), unit):
        chunk = layers[i : i + unit]
        out.append(
            {
                k: (
                    round(sum(c[k] for c in chunk), 7)
                    if isinstance(chunk[0][k], float)
                    else sum(c[k] for c in chunk)
                )
                for k in chunk[0]
            }
        )
    return out


def _per_layer(
    base: dict[str, Any], p: str, n: int, unit: int, model: Transformer, batch: int, gpu: Gpu
) -> dict[str, Any]:
    if unit < 1:
        raise SpecError("unit", f"must be at least 1, got {unit}")
    if p in ("dp_allreduce", "dp_ps"):
        return _data_parallel(base, p, _group(transformer_layers(model, batch, gpu), unit))
    if p == "fsdp":
        layers = _group(transformer_layers(model, batch, gpu), unit)
        return {**base, "paradigm": p, "layers": _rename(layers, "param_bytes")}
    if p == "tensor":
        layers = _group(transformer_layers(model, batch, gpu, tp=n), unit)
        return {
            **base,
            "paradigm": p,
            "layers": [
                {"fwd_s": ly["fwd_s"], "bwd_s": ly["bwd_s"], "allreduce_bytes": ly["tp_bytes"]}
                for ly in layers
            ],
        }
    # moe: attention part 1/3 of a layer's FLOPs, the expert MLP 2/3 (h^2 terms 8:16);
    # top-1 routing spreads each host's tokens evenly over the n experts.
    layers = _group(transformer_layers(model, batch, gpu), unit)
    a2a = model.activation_bytes(batch) // n
    return {
        **base,
        "paradigm": "moe",
        "layers": [
            {
                "fwd_s": round(ly["fwd_s"] / 3, 7),
                "bwd_s": round(ly["bwd_s"] / 3, 7),
                "expert_fwd_s": round(2 * ly["fwd_s"] / 3, 7),
                "expert_bwd_s": round(2 * ly["bwd_s"] / 3, 7),
                "a2a_bytes": a2a,
            }
            for ly in layers
        ],
    }


def _rename(layers: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [{"fwd_s": ly["fwd_s"], "bwd_s": ly["bwd_s"], key: ly["bytes"]} for ly in layers]


def infer_paradigm(model: Model, tp: int, pp: int, dp: int) -> str:
    """The paradigm the degrees imply: one degree > 1 -> its plain paradigm (``pp`` ->
    1F1B, ``tp`` -> tensor, ``dp`` -> all-reduce data parallel); several -> hybrid."""
    if not isinstance(model, Transformer):
        return "dp_allreduce"
    used = [k for k, v in (("tp", tp), ("pp", pp), ("dp", dp)) if v > 1]
    if len(used) > 1:
        return "hybrid"
    return {"pp": "1f1b", "tp": "tensor", "dp": "dp_allreduce"}[used[0]] if used else "1f1b"


def job_for_parallelism(
    model: Model,
    hosts: Sequence[str],
    *,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    paradigm: str | None = None,
    micro_batches: int = 8,
    batch: int = 0,
    name: str | None = None,
    gpu: Gpu = V100,
) -> dict[str, Any]:
    """The description of ``model`` on ``hosts`` with tensor/pipeline/data degrees.

    ``tp * pp * dp`` must equal the number of hosts (one worker per host); the
    paradigm is :func:`infer_paradigm`'s unless given, and a given one must leave the
    degrees it does not use at 1 (``gpipe`` with ``--dp 2`` is a hybrid job)."""
    for flag, value in (("--tp", tp), ("--pp", pp), ("--dp", dp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(flag, f"must be a positive integer, got {value!r}")
    for flag, value in (("--micro-batches", micro_batches), ("--batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SpecError(flag, f"must be a non-negative integer, got {value!r}")
    if micro_batches < 1:
        raise SpecError("--micro-batches", f"must be at least 1, got {micro_batches}")
    hosts = list(hosts)
    if len(set(hosts)) != len(hosts):
        raise SpecError("--hosts", f"a host appears twice: {hosts}")
    workers = tp * pp * dp
    if workers != len(hosts):
        raise SpecError(
            "--hosts",
            f"tp x pp x dp = {tp} x {pp} x {dp} = {workers} workers, but {len(hosts)} hosts "
            f"given (one worker per host)",
        )
    if workers == 1:
        raise SpecError("--hosts", "one worker sends nothing over the network: use 2+ hosts")
    para = paradigm or infer_paradigm(model, tp, pp, dp)
    if para not in _USES:
        raise SpecError("--paradigm", f"unknown paradigm {para!r} (known: {PARADIGMS})")
    if not isinstance(model, Transformer) and (
        para not in ("dp_allreduce", "dp_ps") or dp != workers
    ):
        flag = (
            "--paradigm"
            if para not in ("dp_allreduce", "dp_ps")
            else ("--tp" if tp > 1 else "--pp")
        )
        raise SpecError(flag, "resnet50 is only modelled data parallel (dp_allreduce, dp_ps)")
    degrees = {"tp": tp, "pp": pp, "dp": dp}
    for key, value in degrees.items():
        if value > 1 and key not in _USES[para]:
            raise SpecError(
                f"--{key}",
                f"{para} does not use {key} (it uses {', '.join(_USES[para])}); "
                f"use --paradigm hybrid to combine degrees",
            )
    if pp > 1 and isinstance(model, Transformer) and pp > model.layers:
        raise SpecError("--pp", f"must be at most {model.layers} (the layers of {model.name})")
    job = name or f"{model_name(model)}-{para}"
    return describe_model(
        job, para, model, hosts, micro_batches=micro_batches, batch=batch, dp=dp, tp=tp, gpu=gpu
    )
