"""Realistic model parameters: the layers, compute times and tensor sizes of real models.

The core's job generator (:mod:`echelon.jobgen`, ``echelon job --model``) and the
simulator's workloads (``sim/workloads.py``) both read these, so a job written by
``echelon job`` is the job the simulator evaluates. A Hugging Face-style
``config.json`` becomes a :class:`Transformer` through :func:`transformer_from_config`
(plain JSON, no torch).

Nothing here is measured on this machine; every number is derived from a
model's published layer shapes and a stated GPU throughput (docs/simulator.md
lists the sources):

* Transformers (GPT-2 XL 1.5B; GPT-3 2.7B): Megatron-LM's per-layer counts
  (Narayanan et al., SC'21): forward FLOPs ``24 B s h^2 + 4 B s^2 h``, backward
  twice that, ``12 h^2`` parameters per layer, the activation a stage hands on
  is ``B s h`` fp16 values, a tensor-parallel layer all-reduces ``2 B s h`` fp16
  values per pass. Shapes from Radford et al. 2019 (GPT-2) and Brown et al. 2020
  Table 2.1 (GPT-3).
* ResNet-50 (v1.5): per-block parameters and multiply-accumulates computed from
  the layer shapes of He et al. 2016 Table 1 (25.6 M parameters, ~4.1 GMACs per
  224x224 image), compute time calibrated to a stated training throughput.

Compute times assume an NVIDIA V100 at a stated fraction of its 125 TFLOP/s FP16
tensor-core peak (:data:`V100`); pass another :class:`Gpu` to rescale.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from echelon.errors import SpecError
from echelon.specs import bounded_int, read_file, validate


@dataclass(frozen=True)
class Gpu:
    name: str
    peak_flops: float
    efficiency: float
    resnet50_images_per_s: float

    @property
    def flops(self) -> float:
        return self.peak_flops * self.efficiency


#: V100 SXM2: 125 TFLOP/s FP16 tensor-core peak, 40 % achieved on transformer
#: layers; ~1,250 images/s training ResNet-50 v1.5 with mixed precision (the order
#: NVIDIA's DeepLearningExamples report for one V100).
V100 = Gpu("V100", 125e12, 0.40, 1250.0)


@dataclass(frozen=True)
class Transformer:
    name: str
    layers: int
    hidden: int
    seq: int
    vocab: int
    heads: int = 0
    """Attention heads: not used by the cost model (FLOPs do not depend on it), kept
    so that a config's ``hidden % heads`` can be checked."""

    def layer_fwd_flops(self, batch: int) -> float:
        b, s, h = batch, self.seq, self.hidden
        return 24.0 * b * s * h * h + 4.0 * b * s * s * h

    @property
    def layer_params(self) -> int:
        return 12 * self.hidden**2 + 13 * self.hidden

    @property
    def embedding_params(self) -> int:
        return (self.vocab + self.seq) * self.hidden

    def activation_bytes(self, batch: int) -> int:
        return 2 * batch * self.seq * self.hidden


GPT2_XL = Transformer("gpt2-xl", 48, 1600, 1024, 50257, heads=25)
GPT3_2_7B = Transformer("gpt3-2.7b", 32, 2560, 2048, 50257, heads=32)
TRANSFORMERS = {m.name: m for m in (GPT2_XL, GPT3_2_7B)}

# ResNet-50 v1.5: (blocks, bottleneck width, output channels, stride) per stage.
_RESNET50_STAGES = ((3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2), (3, 512, 2048, 2))


def resnet50_blocks() -> list[tuple[str, int, int]]:
    """(name, parameters, MACs per 224x224 image) of the stem, 16 bottlenecks and fc."""
    out = [("stem", 7 * 7 * 3 * 64 + 2 * 64, 7 * 7 * 3 * 64 * 112 * 112)]
    cin, size = 64, 56
    for st, (blocks, mid, cout, stride) in enumerate(_RESNET50_STAGES):
        for blk in range(blocks):
            s = stride if blk == 0 else 1
            so = size // s
            params = cin * mid + 9 * mid * mid + mid * cout + 2 * (2 * mid + cout)
            macs = cin * mid * size * size + 9 * mid * mid * so * so + mid * cout * so * so
            if blk == 0:
                params += cin * cout + 2 * cout
                macs += cin * cout * so * so
            out.append((f"conv{st + 2}_{blk}", params, macs))
            cin, size = cout, so
    out.append(("fc", 2048 * 1000 + 1000, 2048 * 1000))
    return out


def _r(x: float) -> float:
    return round(x, 7)


def resnet50_layers(
    batch: int = 256, gpu: Gpu = V100, grad_bytes_per_param: int = 4
) -> list[dict[str, Any]]:
    """Per-block layers for data-parallel paradigms; compute split by MACs, backward
    = 2 x forward, iteration compute = ``batch / images_per_s``."""
    blocks = resnet50_blocks()
    total_macs = sum(m for _, _, m in blocks)
    it = batch / gpu.resnet50_images_per_s
    return [
        {
            "fwd_s": _r(it / 3 * m / total_macs),
            "bwd_s": _r(2 * it / 3 * m / total_macs),
            "bytes": p * grad_bytes_per_param,
        }
        for _, p, m in blocks
    ]


def transformer_layers(
    model: Transformer, batch: int, gpu: Gpu = V100, grad_bytes_per_param: int = 2, tp: int = 1
) -> list[dict[str, Any]]:
    """One entry per transformer layer (fwd/bwd seconds on one GPU, gradient bytes,
    tensor-parallel all-reduce bytes), with compute and parameters split ``tp`` ways."""
    fwd = model.layer_fwd_flops(batch) / gpu.flops / tp
    return [
        {
            "fwd_s": _r(fwd),
            "bwd_s": _r(2 * fwd),
            "bytes": model.layer_params * grad_bytes_per_param // tp,
            "tp_bytes": 2 * model.activation_bytes(batch),
        }
        for _ in range(model.layers)
    ]


def pipeline_stages(
    model: Transformer, stages: int, batch: int, gpu: Gpu = V100, tp: int = 1
) -> list[dict[str, Any]]:
    """Even split of the layers over ``stages`` (the first takes the remainder)."""
    if not 1 <= stages <= model.layers:
        raise SpecError("stages", f"must be 1..{model.layers} for {model.name}, got {stages}")
    layers = transformer_layers(model, batch, gpu, tp=tp)
    per = [model.layers // stages + (1 if i < model.layers % stages else 0) for i in range(stages)]
    out, at = [], 0
    for i, n in enumerate(per):
        chunk = layers[at : at + n]
        at += n
        params = sum(ly["bytes"] for ly in chunk)
        if i == 0:
            params += model.embedding_params * 2 // tp
        out.append(
            {
                "fwd_s": _r(sum(ly["fwd_s"] for ly in chunk)),
                "bwd_s": _r(sum(ly["bwd_s"] for ly in chunk)),
                "activation_bytes": model.activation_bytes(batch) if i < stages - 1 else 0,
                "param_bytes": params,
                "tp_allreduce_bytes": n * chunk[0]["tp_bytes"] if tp > 1 else 0,
            }
        )
    return out


#: The models ``echelon job --model NAME`` knows by name (besides a config.json path).
RESNET50 = "resnet50"
MODEL_NAMES = (RESNET50, *TRANSFORMERS)


def _int_field(maximum: int, *aliases: str) -> Any:
    return Annotated[bounded_int(1, maximum), Field(validation_alias=AliasChoices(*aliases))]


class HfConfig(BaseModel):
    """The fields of a Hugging Face ``config.json`` the cost model needs, under either
    spelling (GPT-2's ``n_layer`` or the newer ``num_hidden_layers``).

    Unlike the project's own files (``extra="forbid"``), other keys are ignored: a real
    config carries dozens (dropout rates, activation, token IDs) that do not change
    layer FLOPs or tensor sizes, and refusing them would refuse every real file."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    layers: _int_field(10_000, "n_layer", "num_hidden_layers")  # type: ignore[valid-type]
    hidden: _int_field(1_000_000, "n_embd", "hidden_size")  # type: ignore[valid-type]
    heads: _int_field(100_000, "n_head", "num_attention_heads")  # type: ignore[valid-type]
    vocab: _int_field(10_000_000, "vocab_size")  # type: ignore[valid-type]
    seq: _int_field(10_000_000, "n_positions", "max_position_embeddings")  # type: ignore[valid-type]


_ALIASES = {
    "n_layer": "num_hidden_layers",
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
}


def transformer_from_config(
    data: Any, name: str = "config", where: str = "config.json"
) -> Transformer:
    """A :class:`Transformer` from a parsed Hugging Face config; a missing or bad field is
    a :class:`SpecError` naming it (``where: n_layer``)."""
    if not isinstance(data, dict):
        raise SpecError(where, f"must be a JSON object, got {type(data).__name__}")
    for short, long in _ALIASES.items():
        if short in data and long in data and data[short] != data[long]:
            raise SpecError(
                f"{where}: {short}", f"{data[short]!r} disagrees with {long}={data[long]!r}"
            )
    try:
        cfg = validate(HfConfig, data)
    except SpecError as exc:
        field, message = exc.field, exc.message
        if message == "is required" and field in _ALIASES:
            message = f"is required (or {_ALIASES[field]})"
        raise SpecError(f"{where}: {field}", message) from None
    if cfg.hidden % cfg.heads:
        raise SpecError(
            f"{where}: n_head", f"hidden size {cfg.hidden} is not divisible by {cfg.heads} heads"
        )
    return Transformer(name, cfg.layers, cfg.hidden, cfg.seq, cfg.vocab, heads=cfg.heads)


def load_model(model: str) -> Transformer | str:
    """``gpt2-xl`` / ``gpt3-2.7b`` (a :class:`Transformer`), ``resnet50`` (the string), or
    a path to a Hugging Face ``config.json`` (read with :func:`~echelon.specs.read_file`,
    no torch)."""
    if model == RESNET50:
        return RESNET50
    if model in TRANSFORMERS:
        return TRANSFORMERS[model]
    path = Path(model)
    if not model.endswith(".json") and not path.is_file():
        raise SpecError(
            "--model", f"unknown model {model!r} (known: {list(MODEL_NAMES)}, or a config.json)"
        )
    data = read_file(model)
    stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return transformer_from_config(data, stem or "config", where=model)
