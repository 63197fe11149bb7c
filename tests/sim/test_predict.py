"""sim.predict on the emulation's star topology: answers computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from echelon.constants import PACKET_HEADER_LEN
from echelon.errors import SpecError
from sim.predict import predict_finish_times

STAR = str(
    Path(__file__).resolve().parents[2] / "topo" / "star.yaml"
)  # h4's link is 10 Mbit/s, the others 100 Mbit/s
SLOW = 10e6 / 8


def gpipe(size: int, fwd: float = 0.1, bwd: float = 0.2) -> dict[str, object]:
    return {
        "job": "demo",
        "paradigm": "gpipe",
        "hosts": ["h1", "h4"],
        "micro_batches": 1,
        "stages": [
            {"fwd_s": fwd, "bwd_s": bwd, "activation_bytes": size},
            {"fwd_s": fwd, "bwd_s": bwd},
        ],
    }


def wire(size: int, payload: int = 1400, header: int = PACKET_HEADER_LEN) -> float:
    return size + math.ceil(size / payload) * header


def test_two_stage_gpipe_on_the_bottleneck() -> None:
    size, fwd, bwd = 200_000, 0.1, 0.2
    got = predict_finish_times([gpipe(size, fwd, bwd)], STAR, policy="echelon", levels_mode="k8")
    fwd_key = next(k for k in got if "/fwd/" in k[0])
    bwd_key = next(k for k in got if "/bwd/" in k[0])
    t_fwd = fwd + wire(size) / SLOW  # h1 -> s1 -> h4: h4's 10 Mbit/s link limits
    assert got[fwd_key] == pytest.approx(t_fwd)
    # stage 1 runs forward then backward, then the gradient goes back over the same link
    assert got[bwd_key] == pytest.approx(t_fwd + fwd + bwd + wire(size) / SLOW)


def test_overhead_parameters() -> None:
    size = 100_000
    plain = predict_finish_times([gpipe(size)], STAR, header_bytes=0, levels_mode="ideal")
    key = next(k for k in plain if "/fwd/" in k[0])
    assert plain[key] == pytest.approx(0.1 + size / SLOW)


def test_bad_levels_mode() -> None:
    with pytest.raises(SpecError) as err:
        predict_finish_times([gpipe(1000)], STAR, levels_mode="lots")
    assert err.value.field == "levels_mode"


def test_unknown_host_is_a_spec_error() -> None:
    job = gpipe(1000)
    job["hosts"] = ["h1", "h9"]
    with pytest.raises(SpecError):
        predict_finish_times([job], STAR)


def test_round_robin_senders_share_the_host_link_whatever_the_rank() -> None:
    """A parameter server on h4 (10 Mbit/s) sends two layers' pulls to h1. By rank, the
    first layer's takes the host link first; a host pacing its flows round-robin
    (``sender_round_robin``, as hostagent.sender does) gives each half of it."""
    size = 50_000
    layer = {"fwd_s": 0.1, "bwd_s": 0.1, "param_bytes": size}
    job = {"job": "rr", "paradigm": "dp_ps", "hosts": ["h4", "h1"], "ps": "h4",
           "layers": [layer, layer]}  # fmt: skip
    by_rank = predict_finish_times([job], STAR, header_bytes=0, levels_mode="ideal")
    rr = predict_finish_times(
        [job], STAR, header_bytes=0, levels_mode="ideal", sender_round_robin=True
    )
    first, second = sorted((k for k in by_rank if "/pull" in k[0]), key=lambda k: k[1])
    assert by_rank[first] == pytest.approx(size / SLOW)
    assert by_rank[second] == pytest.approx(2 * size / SLOW)
    assert rr[first] == pytest.approx(2 * size / SLOW)
    assert rr[second] == pytest.approx(2 * size / SLOW)
