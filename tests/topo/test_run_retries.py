"""``topo.run.play_with_retries``: a policy's run that lost packets is played again."""

from __future__ import annotations

from typing import Any

import pytest

from echelon.errors import EchelonError
from topo.run import loss_hint, packet_bytes, play_with_retries


def fake(results: list[tuple[bool, int]]) -> tuple[list[int], Any]:
    """A ``play`` returning (complete, lost packets) in turn; counts its calls."""
    calls: list[int] = []

    def play() -> dict[str, Any]:
        complete, lost = results[len(calls)]
        calls.append(1)
        return {"agents": {"h1": {"complete": complete}, "h2": {"complete": True}},
                "lost_packets": lost}  # fmt: skip

    return calls, play


def test_a_run_that_lost_packets_is_played_again(capsys: pytest.CaptureFixture[str]) -> None:
    calls, play = fake([(False, 7), (True, 0)])
    report = play_with_retries(play, "coflow", retries=2)
    assert len(calls) == 2
    assert report["attempts"] == 2 and report["lost_packets_per_attempt"] == [7, 0]
    assert "coflow: 7 packets lost" in capsys.readouterr().out


def test_retries_are_bounded_and_the_last_attempt_is_kept() -> None:
    calls, play = fake([(False, 3), (False, 2), (False, 1), (True, 0)])
    report = play_with_retries(play, "fifo", retries=2)
    assert len(calls) == 3
    assert report["lost_packets_per_attempt"] == [3, 2, 1]
    assert report["lost_packets"] == 1 and not report["agents"]["h1"]["complete"]


def test_an_incomplete_run_without_loss_is_not_repeated() -> None:
    """Nothing was lost (e.g. the run hit its timeout): playing it again would not help."""
    calls, play = fake([(False, 0), (True, 0)])
    report = play_with_retries(play, "echelon", retries=2)
    assert len(calls) == 1 and report["attempts"] == 1


def test_a_complete_run_is_played_once() -> None:
    calls, play = fake([(True, 0)])
    assert play_with_retries(play, "echelon", retries=2)["attempts"] == 1 and len(calls) == 1


def test_a_last_attempt_that_lost_packets_says_what_to_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, play = fake([(False, 5), (False, 4)])
    play_with_retries(play, "echelon", retries=1, hint=loss_hint("bmv2", 40.0))
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "echelon: 4 packets lost in the last attempt" in last
    assert "--rate-mbit 20" in last and "TARGET=soft" in last


def test_the_hint_halves_the_rate_and_names_the_soft_switch_only_on_bmv2() -> None:
    assert "--rate-mbit 12.5" in loss_hint("soft", 25.0)
    assert "TARGET=soft" not in loss_hint("soft", 40.0)
    assert "TARGET=soft" in loss_hint("bmv2", 40.0)


def test_the_hint_offers_larger_packets_only_below_bmv2s_default() -> None:
    assert '--packet-bytes 4000": 0.25 of the packets' in loss_hint("bmv2", 40.0, 1000)
    assert "--packet-bytes" not in loss_hint("bmv2", 40.0, 4000)
    assert "--packet-bytes" not in loss_hint("soft", 40.0, 8000)


def test_packet_size_defaults_by_target_and_is_bounded_by_one_jumbo_frame() -> None:
    assert packet_bytes(None, "soft") == 2000 and packet_bytes(None, "bmv2") == 4000
    assert packet_bytes(None, "bmv2", interleave=True) == 1000
    assert packet_bytes(None, "soft", interleave=True) == 1000
    assert packet_bytes(8972, "soft") == 8972
    for bad in (63, 8973):
        with pytest.raises(EchelonError, match=r"packet_bytes: must be 64\.\.8972"):
            packet_bytes(bad, "bmv2")
