"""The evaluation's real-job section: the DDP trace's job among modelled jobs."""

from __future__ import annotations

import pytest

from sim.eval import chakra


@pytest.mark.slow
@pytest.mark.skipif(not chakra.TRACE.exists(), reason="shared Chakra traces not present")
def test_the_section_runs_every_job_under_each_policy() -> None:
    results = chakra.run(policies=("echelon", "fair"))
    assert set(results) == {"echelon", "fair"}
    for per in results.values():
        assert set(per) == {"ddp", "pipeline", "fsdp"}
        for job in per.values():
            # no iteration beats the contention-free one; p99 is at least the mean
            assert job["mean"] >= job["ideal"] * (1 - 1e-9)
            assert job["p99"] >= job["mean"] * (1 - 1e-9)
    assert results["echelon"]["ddp"]["ideal"] == pytest.approx(0.292828)
    text = chakra.section({(10.0, "consumer"): results})
    assert "| `echelon` |" in text and "| `fair` |" in text
    assert "* per-flow fair sharing (TCP-like): mean " in text
    assert "### 10 Gbit/s host links, `--group-by consumer`" in text
    by_op = chakra.run(policies=("echelon",), group_by="op")
    # one Coflow per collective: the same bytes and ideal iteration, other groups
    assert by_op["echelon"]["ddp"]["ideal"] == pytest.approx(0.292828)
