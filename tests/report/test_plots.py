"""What the plots draw, read back from the figures: the reward band stays within the values the
reward took, legends cover no axis, and a run without flags says so instead of empty axes."""

from __future__ import annotations

import pytest

from execrl.report import plots

pytest.importorskip("matplotlib")


@pytest.fixture
def drawn(monkeypatch):
    """Each figure the plots save, kept open (and drawn) for the test to read."""
    figures = []

    def keep(plt, fig, path):
        fig.tight_layout()
        fig.savefig(path)
        figures.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield figures
    import matplotlib.pyplot as plt

    for fig in figures:
        plt.close(fig)


def test_the_reward_band_stays_within_the_values_the_reward_took(drawn, tmp_path):
    # A pass reward in {0, 1}: mean 0.9, std 0.3, so mean ± std would reach 1.2 and 0.6
    rows = [{"step": s, "reward_mean": 0.9, "reward_std": 0.3, "reward_p10": 0.0,
             "reward_p90": 1.0} for s in range(4)]  # fmt: skip
    plots.reward(rows, tmp_path / "reward.png")
    (ax,) = drawn[0].axes
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() >= 0.0 and ys.max() <= 1.0
    assert band.get_label() == "10th-90th percentile of the samples"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "mean", "10th-90th percentile of the samples"]  # fmt: skip


def test_the_episodes_legend_covers_neither_axis(drawn, tmp_path):
    rows = [{"step": s, "episode/pass@turn1": 0.2, "episode/pass@turn2": 0.3,
             "episode/masked_token_frac": 0.4, "episode/turns_mean": 1.5 + s / 10}
            for s in range(5)]  # fmt: skip
    plots.episodes(rows, tmp_path / "episodes.png")
    fig = drawn[0]
    left, right = fig.axes
    renderer = fig.canvas.get_renderer()
    legends = [a.get_legend() for a in (left, right) if a.get_legend() is not None]
    assert len(legends) == 1  # one legend for both axes' lines
    (legend,) = legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "pass@turn1", "pass@turn2", "masked_token_frac", "turns per episode (right)"]  # fmt: skip
    box = legend.get_window_extent(renderer)
    for axis in (left.yaxis, right.yaxis, left.xaxis):  # ticks, tick labels and axis labels
        assert not box.overlaps(axis.get_tightbbox(renderer)), axis
    assert not box.overlaps(left.get_window_extent(renderer))  # nor the plotted area
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)  # not cut off


def test_flags_without_any_flag_say_so_instead_of_empty_axes(drawn, tmp_path):
    rows = [{"step": s, "flag/no_code": 0, "reward/masked": 0} for s in range(3)]
    plots.flags(rows, tmp_path / "flags.png")
    (ax,) = drawn[0].axes
    assert not ax.axison and not ax.lines
    assert [t.get_text() for t in ax.texts] == ["no flags raised and no samples masked in 3 steps"]
    drawn.clear()
    plots.flags([{**rows[0], "flag/no_code": 2}], tmp_path / "flags.png")
    (ax,) = drawn[0].axes
    assert ax.axison and [line.get_label() for line in ax.lines] == ["no_code"] and not ax.texts
