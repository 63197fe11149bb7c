"""Workload models and mixes: shapes match the published models, every template loads."""

from __future__ import annotations

import pytest

from echelon.errors import SpecError
from echelon.jobgen import PARADIGMS
from echelon.jobs import load_job
from echelon.models import GPT2_XL, V100, pipeline_stages, resnet50_blocks, transformer_layers
from sim.workloads import MIXES, Template, describe, generate_mix

HOSTS = [f"h{i}" for i in range(16)]


def test_resnet50_matches_published_size() -> None:
    blocks = resnet50_blocks()
    params = sum(p for _, p, _ in blocks)
    macs = sum(m for _, _, m in blocks)
    assert params == pytest.approx(25.6e6, rel=0.01)  # He et al. 2016: 25.6 M parameters
    assert macs == pytest.approx(4.1e9, rel=0.02)  # ~4.1 GMACs per 224x224 image


def test_gpt2_xl_parameters_and_stage_split() -> None:
    total = GPT2_XL.layers * GPT2_XL.layer_params + GPT2_XL.embedding_params
    assert total == pytest.approx(1.56e9, rel=0.02)  # "1.5B" (1,558 M) of Radford et al.
    layers = transformer_layers(GPT2_XL, 4)
    stages = pipeline_stages(GPT2_XL, 4, 4)
    assert sum(s["fwd_s"] for s in stages) == pytest.approx(
        sum(ly["fwd_s"] for ly in layers), rel=1e-5
    )
    assert layers[0]["fwd_s"] == pytest.approx(GPT2_XL.layer_fwd_flops(4) / V100.flops, rel=1e-5)
    assert stages[0]["activation_bytes"] == 2 * 4 * 1024 * 1600
    with pytest.raises(SpecError):
        pipeline_stages(GPT2_XL, 100, 4)


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_every_template_is_a_valid_job(mix: str) -> None:
    for tmpl, _ in MIXES[mix]:
        spec = load_job(describe(f"{mix}-{tmpl.paradigm}", tmpl, HOSTS[: tmpl.hosts]))
        plan = spec.plan(0, 0.0)
        assert plan.echelons and plan.tasks
        assert spec.ideal_iteration_s > 0


def test_all_paradigms_reachable() -> None:
    used = {t.paradigm for templates in MIXES.values() for t, _ in templates}
    assert used == set(PARADIGMS)
    for p in PARADIGMS:
        model = "resnet50" if p.startswith("dp") else "gpt2-xl"
        n = 8 if p == "hybrid" else 4
        t = Template(p, model, n, dp=2 if p == "hybrid" else 1, unit=8)
        assert load_job(describe("x", t, HOSTS[:n])).plan(0, 0.0).echelons


def test_bad_templates() -> None:
    with pytest.raises(SpecError):
        describe("x", Template("gpipe", "resnet50", 4), HOSTS[:4])
    with pytest.raises(SpecError):
        describe("x", Template("gpipe", "gpt2-xl", 4), HOSTS[:3])
    with pytest.raises(SpecError):
        generate_mix("nope", HOSTS, 1e9)


def test_mix_is_seeded_and_poisson_spaced() -> None:
    a = generate_mix("dp", HOSTS, 12.5e9, n_jobs=6, load=0.5, seed=3)
    b = generate_mix("dp", HOSTS, 12.5e9, n_jobs=6, load=0.5, seed=3)
    c = generate_mix("dp", HOSTS, 12.5e9, n_jobs=6, load=0.5, seed=4)
    assert [j.description for j in a] == [j.description for j in b]
    assert [j.arrival for j in a] == [j.arrival for j in b]
    assert [j.arrival for j in a] != [j.arrival for j in c]
    arrivals = [j.arrival for j in a]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals) and arrivals[-1] > 0
    # a higher load packs the same draws closer together
    heavy = generate_mix("dp", HOSTS, 12.5e9, n_jobs=6, load=1.0, seed=3)
    assert heavy[-1].arrival == pytest.approx(arrivals[-1] / 2)
    batch = generate_mix("dp", HOSTS, 12.5e9, n_jobs=4, load=None, seed=3)
    assert all(j.arrival == 0.0 for j in batch)
