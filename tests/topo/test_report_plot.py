"""The demo's PNG: iteration time per policy, a labelled diagonal, network-bound jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topo.report import network_bound, plot_finish_times


def job(pairs: list[tuple[float, float]], iteration: float | None, ideal: float) -> dict[str, Any]:
    flows = [{"index": i, "ideal": x, "actual": y} for i, (x, y) in enumerate(pairs)]
    return {"echelons": [{"flows": flows}], "iteration_time_mean": iteration,
            "iteration_time_ideal": ideal}  # fmt: skip


def results(pp: list[tuple[float, float]], dp: list[tuple[float, float]]) -> dict[str, Any]:
    return {"policies": {
        "echelon": {"jobs": {"pp": job(pp, 0.50, 0.40), "dp": job(dp, 0.30, 0.01)}},
        "fifo": {"jobs": {"pp": job(pp, 0.70, 0.40), "dp": job(dp, None, 0.01)}},
    }}  # fmt: skip


def _texts(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_compute_bound_plot_has_bars_and_labelled_diagonal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = results([(0.1, 0.12), (0.3, 0.35)], [(0.2, 0.25), (0.4, 0.5)])
    out = tmp_path / "sub" / "plot.png"
    fig = plot_finish_times(r, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().err == ""
    bars, scatter_e, scatter_f = fig.axes  # the verdict first, then one panel per policy
    for ax, pol in ((scatter_e, "echelon"), (scatter_f, "fifo")):
        assert ax.get_title() == pol and ax.get_xscale() == "linear"
        assert "actual = ideal" in _texts(ax)
        labels = ax.get_legend_handles_labels()[1]
        assert "actual = ideal (on time)" in labels and {"pp", "dp"} <= set(labels)
    assert bars.get_ylabel() == "mean iteration time (s)"
    assert [t.get_text() for t in bars.get_xticklabels()] == ["dp", "pp"]
    heights = sorted(round(p.get_height(), 3) for p in bars.patches)
    assert heights == [0.3, 0.5, 0.7]  # fifo's dp unmeasured: no bar, an n/a label
    assert "n/a" in _texts(bars)
    assert "lower is better" in bars.get_title()
    assert {"0.300", "0.500", "0.700"} <= set(_texts(bars))  # values on the bars
    legend = bars.get_legend()
    assert legend.get_bbox_to_anchor().y0 < bars.get_window_extent().y0  # below the bars
    assert {"echelon", "fifo", "ideal iteration"} <= set(bars.get_legend_handles_labels()[1])


@pytest.mark.slow
def test_network_bound_job_is_warned_about_and_plotted_on_log_axes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # dp's ideal finishes are ms, its actual ones seconds: linear axes put it at x = 0
    r = results([(1.0, 1.2), (3.0, 3.5)], [(0.002, 2.0), (0.004, 4.0)])
    assert network_bound(r) == [
        "job dp is network-bound: its ideal finish times (max 0.004 s) are under 10% of "
        "its actual ones (max 4 s); the finish-time plot uses log axes"
    ]
    out = tmp_path / "plot.png"
    fig = plot_finish_times(r, out)
    assert out.stat().st_size > 0
    err = capsys.readouterr().err
    assert err.startswith("warning: job dp is network-bound") and "job pp" not in err
    scatter = fig.axes[1]
    assert scatter.get_xscale() == "log" and scatter.get_yscale() == "log"
    assert scatter.get_title() == "echelon (log axes)"
    lo, hi = scatter.get_xlim()
    assert lo <= 0.002 and hi >= 4.0  # both jobs' points are inside the panel
    xs = [x for c in scatter.collections for x, _ in c.get_offsets()]
    assert min(xs) == pytest.approx(0.002)  # not clipped to the axis floor


def test_open_loop_results_have_no_bars(tmp_path: Path) -> None:
    r = {"policies": {"echelon": {"jobs": {"a": job([(0.1, 0.2)], None, 0.3)}}}}
    assert network_bound(r) == []
    fig = plot_finish_times(r, tmp_path / "p.png")
    assert fig.axes[0].get_title() == "iteration time: closed loop only (n/a)"
    assert not fig.axes[0].patches


def test_a_policy_without_results_is_drawn_nowhere_and_panels_form_a_grid(
    tmp_path: Path,
) -> None:
    r = results([(0.1, 0.12)], [(0.2, 0.25)])
    for pol in ("coflow", "echelon-online", "srpt"):
        r["policies"][pol] = {"jobs": {"pp": {"echelons": [{"flows": [
            {"index": 0, "ideal": 0.1, "actual": None}]}], "iteration_time_mean": None,
            "iteration_time_ideal": 0.4}}}  # fmt: skip
    r["policies"]["edf"] = r["policies"]["echelon"]
    r["policies"]["varys"] = r["policies"]["fifo"]
    fig = plot_finish_times(r, tmp_path / "p.png")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[1:] == ["echelon", "fifo", "edf", "varys"]  # no panel for the three
    assert "no results (not drawn): coflow, echelon-online, srpt" in fig._suptitle.get_text()
    legend = {t for t in fig.axes[0].get_legend_handles_labels()[1]}
    assert "coflow" not in legend and "echelon" in legend
    rows = {round(ax.get_position().y0, 2) for ax in fig.axes}
    assert len(rows) == 2  # 5 panels in a 3-wide grid, not a strip
    width, height = fig.get_size_inches()
    assert width / height < 2.5
