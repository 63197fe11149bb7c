"""Job descriptions for the core's paradigm builders, multi-job mixes, trace files.

A *template* (paradigm, model, size knobs) becomes a job description dict that
:func:`echelon.jobs.load_job` reads; the paradigms themselves (GPipe, 1F1B,
data parallel with PS / all-reduce, tensor, FSDP, MoE, hybrid) live in the core.
A *mix* draws templates, places each job on random hosts and spaces arrivals as
a Poisson process whose rate gives a target offered network load.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echelon.errors import SpecError
from sim.engine import JobRun
from sim.models import TRANSFORMERS, V100, Gpu, pipeline_stages, resnet50_layers, transformer_layers

PARADIGMS = ("gpipe", "1f1b", "hybrid", "dp_allreduce", "dp_ps", "fsdp", "tensor", "moe")
MODELS = ("resnet50", *TRANSFORMERS)


@dataclass(frozen=True)
class Template:
    """What to build: paradigm, model, host count and knobs (see :func:`describe`)."""

    paradigm: str
    model: str
    hosts: int
    micro_batches: int = 8
    batch: int = 0
    dp: int = 1
    tp: int = 1
    unit: int = 1
    """Transformer layers per modelled layer for the per-layer paradigms (FSDP wrap
    unit; TP/MoE/DP blocks): fewer, larger flows with the same bytes and compute."""


def _ddp_bucket_bytes() -> int:
    return 25 * 2**20  # PyTorch DDP's default bucket_cap_mb = 25


def describe(name: str, t: Template, hosts: Sequence[str], gpu: Gpu = V100) -> dict[str, Any]:
    """A job description (dict for ``echelon.jobs.load_job``) for template ``t`` on ``hosts``."""
    if t.paradigm not in PARADIGMS:
        raise SpecError("paradigm", f"unknown paradigm {t.paradigm!r} (known: {PARADIGMS})")
    if t.model not in MODELS:
        raise SpecError("model", f"unknown model {t.model!r} (known: {MODELS})")
    if len(hosts) != t.hosts:
        raise SpecError("hosts", f"template needs {t.hosts} hosts, got {len(hosts)}")
    base: dict[str, Any] = {"job": name, "hosts": list(hosts)}
    p = t.paradigm
    if t.model == "resnet50":
        if p not in ("dp_allreduce", "dp_ps"):
            raise SpecError(
                "model", "resnet50 is only modelled data parallel (dp_allreduce, dp_ps)"
            )
        layers = resnet50_layers(t.batch or 256, gpu)
        if p == "dp_ps":
            return {
                **base,
                "paradigm": p,
                "ps": base["hosts"][0],
                "layers": _rename(layers, "param_bytes"),
            }
        return {
            **base,
            "paradigm": p,
            "bucket_bytes": _ddp_bucket_bytes(),
            "layers": _rename(layers, "grad_bytes"),
        }
    model = TRANSFORMERS[t.model]
    batch = t.batch or 4
    if p in ("gpipe", "1f1b"):
        stages = [
            {k: v for k, v in st.items() if k in ("fwd_s", "bwd_s", "activation_bytes")}
            for st in pipeline_stages(model, t.hosts, batch, gpu)
        ]
        stages[-1].pop("activation_bytes")
        para = "gpipe" if p == "gpipe" else "pipedream_1f1b"
        return {**base, "paradigm": para, "micro_batches": t.micro_batches, "stages": stages}
    if p == "hybrid":
        n_st = t.hosts // (t.dp * t.tp)
        if n_st * t.dp * t.tp != t.hosts or n_st < 1:
            raise SpecError("hosts", f"{t.hosts} hosts is not stages x dp={t.dp} x tp={t.tp}")
        stages = pipeline_stages(model, n_st, batch, gpu, tp=t.tp)
        stages[-1].pop("activation_bytes")
        return {
            **base,
            "paradigm": "hybrid",
            "micro_batches": t.micro_batches,
            "dp": t.dp,
            "tp": t.tp,
            "schedule": "1f1b",
            "stages": stages,
        }
    if p in ("dp_allreduce", "dp_ps", "fsdp", "tensor", "moe"):
        return _per_layer(base, t, model, batch, gpu)
    raise SpecError("paradigm", f"{p} is not modelled for {t.model}")


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
    base: dict[str, Any], t: Template, model: Any, batch: int, gpu: Gpu
) -> dict[str, Any]:
    p, n = t.paradigm, t.hosts
    if t.unit < 1:
        raise SpecError("unit", f"must be at least 1, got {t.unit}")
    if p == "dp_allreduce":
        layers = _group(transformer_layers(model, batch, gpu), t.unit)
        return {
            **base,
            "paradigm": p,
            "bucket_bytes": _ddp_bucket_bytes(),
            "layers": _rename(layers, "grad_bytes"),
        }
    if p == "dp_ps":
        layers = _group(transformer_layers(model, batch, gpu), t.unit)
        return {
            **base,
            "paradigm": p,
            "ps": base["hosts"][0],
            "layers": _rename(layers, "param_bytes"),
        }
    if p == "fsdp":
        layers = _group(transformer_layers(model, batch, gpu), t.unit)
        return {**base, "paradigm": p, "layers": _rename(layers, "param_bytes")}
    if p == "tensor":
        layers = _group(transformer_layers(model, batch, gpu, tp=n), t.unit)
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
    layers = _group(transformer_layers(model, batch, gpu), t.unit)
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


#: Named mixes: (template, probability). Host counts fit a 16-host cluster.
MIXES: dict[str, tuple[tuple[Template, float], ...]] = {
    "pipeline": (
        (Template("gpipe", "gpt2-xl", 4, micro_batches=8), 0.5),
        (Template("1f1b", "gpt3-2.7b", 4, micro_batches=8, batch=2), 0.5),
    ),
    "hybrid": (
        (Template("hybrid", "gpt2-xl", 8, micro_batches=4, dp=2, tp=1), 0.5),
        (Template("hybrid", "gpt3-2.7b", 8, micro_batches=4, batch=2, dp=2, tp=2), 0.5),
    ),
    "dp": (
        (Template("dp_allreduce", "resnet50", 4), 0.4),
        (Template("dp_ps", "resnet50", 5), 0.3),
        (Template("fsdp", "gpt2-xl", 4, unit=4), 0.3),
    ),
    "mixed": (
        (Template("gpipe", "gpt2-xl", 4, micro_batches=8), 0.2),
        (Template("hybrid", "gpt2-xl", 8, micro_batches=4, dp=2, tp=1), 0.2),
        (Template("dp_allreduce", "resnet50", 4), 0.2),
        (Template("tensor", "gpt2-xl", 4, unit=4), 0.15),
        (Template("moe", "gpt2-xl", 4, unit=4), 0.15),
        (Template("fsdp", "gpt2-xl", 4, unit=4), 0.1),
    ),
}


@dataclass(frozen=True)
class TraceJob:
    """One line of a trace: a job description, when it arrives, how many iterations."""

    description: Mapping[str, Any]
    arrival: float = 0.0
    iterations: int = 1

    def to_run(self, known_hosts: Sequence[str] | None = None) -> JobRun:
        from echelon.jobs import load_job

        return JobRun(load_job(self.description, known_hosts), self.arrival, self.iterations)


def job_demand(description: Mapping[str, Any]) -> tuple[float, float]:
    """(bytes per iteration, ideal iteration seconds) of a description."""
    from echelon.jobs import load_job

    spec = load_job(description)
    plan = spec.plan(0, 0.0)
    return float(sum(ef.total_bytes for ef in plan.echelons)), spec.ideal_iteration_s


def generate_mix(
    mix: str | Sequence[tuple[Template, float]],
    hosts: Sequence[str],
    host_bytes_per_s: float,
    n_jobs: int = 8,
    load: float | None = 0.5,
    iterations: int = 3,
    seed: int = 0,
    gpu: Gpu = V100,
) -> list[TraceJob]:
    """Draw ``n_jobs`` jobs from a mix and place them on random hosts.

    ``load`` is the offered network load: Poisson arrivals with rate
    ``load * len(hosts) * host_bytes_per_s / E[bytes per job]`` (a job's bytes =
    iterations x bytes per iteration). ``load=None`` starts every job at once
    (a closed batch: every job contends from the start).
    """
    templates = MIXES.get(mix) if isinstance(mix, str) else tuple(mix)
    if templates is None:
        raise SpecError("mix", f"unknown mix {mix!r} (known: {sorted(MIXES)})")
    if n_jobs < 1 or iterations < 1:
        raise SpecError("n_jobs", "n_jobs and iterations must be at least 1")
    if load is not None and load <= 0:
        raise SpecError("load", f"must be positive, got {load}")
    rng = random.Random(seed)
    weights = [w for _, w in templates]
    demand: dict[Template, float] = {}
    jobs: list[TraceJob] = []
    t = 0.0
    for k in range(n_jobs):
        tmpl = rng.choices([tp for tp, _ in templates], weights)[0]
        if tmpl.hosts > len(hosts):
            raise SpecError(
                "mix", f"{tmpl.paradigm} needs {tmpl.hosts} hosts, network has {len(hosts)}"
            )
        placed = rng.sample(list(hosts), tmpl.hosts)
        desc = describe(f"j{k}-{tmpl.paradigm}", tmpl, placed, gpu)
        if tmpl not in demand:
            demand[tmpl] = job_demand(desc)[0]
        jobs.append(TraceJob(desc, t, iterations))
        if load is not None:
            mean_bytes = sum(w * _lazy(demand, tp, hosts, gpu) for tp, w in templates) / sum(
                weights
            )
            rate = load * len(hosts) * host_bytes_per_s / (iterations * mean_bytes)
            t += rng.expovariate(rate)
    return jobs


def _lazy(cache: dict[Template, float], t: Template, hosts: Sequence[str], gpu: Gpu) -> float:
    if t not in cache:
        cache[t] = job_demand(describe("probe", t, list(hosts)[: t.hosts], gpu))[0]
    return cache[t]
