"""SP figures that cannot be misread: an SP without a semantic win is a marker at the top edge
(never a 0 bar), SP is on a log axis with 1 marked and the intervals drawn, and all panels of
one figure share one y range. The figures are captured before saving and also written, to be
looked at."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmark.metrics.association import association_scores
from benchmark.report import plots, style
from core import datatables


@pytest.fixture()
def figures(monkeypatch):
    got = []
    real = style.save

    def keep(fig, path):
        got.append(fig)
        fig.canvas.draw()
        real(fig, path)

    monkeypatch.setattr(style, "save", keep)
    return got


def scores(seed: int, sem: float) -> dict:
    """3xcm scores over all countries; THA never has a semantic win (SP ∞), JPN no
    cultural one (SP 0)."""
    rng = np.random.default_rng(seed)
    codes = [c.code for c in datatables.countries()]
    country = np.repeat(codes, 40)
    concept = np.tile(np.repeat(np.arange(8), 5), len(codes)).astype(str)
    sims = rng.normal(0.0, 1.0, (len(country), 3)) + [sem, 0.0, 0.0]
    sims[country == "THA", 0] = -9
    sims[country == "JPN", 1] = -9
    return association_scores(sims, {"country": country, "concept": concept})


def _markers(ax, marker_path_count: int | None = None) -> list:
    return [c for c in ax.collections if c.get_offsets().size]


def test_sp_by_country_infinite_is_a_top_marker_on_a_shared_log_axis(figures, tmp_path):
    models = {"small-sp": scores(0, 2.0), "large-sp": scores(1, -0.5)}
    assert models["small-sp"]["by_country"]["THA"]["SP"] is None
    assert models["small-sp"]["by_country"]["THA"]["SP_note"] == "∞ (no semantic win)"
    assert models["small-sp"]["by_country"]["THA"]["SP_ci95"][1] is None  # upper limit ∞
    path = tmp_path / "sp-by-country.png"
    plots.sp_by_country(models, path, "test")
    assert path.stat().st_size > 0
    fig = figures[-1]
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    assert {ax.get_yscale() for ax in axes} == {"log"}
    assert len({ax.get_ylim() for ax in axes}) == 1  # one y range for every panel
    lo, hi = axes[0].get_ylim()
    assert lo < 1 < hi and any(line.get_ydata()[0] == 1.0 for line in axes[0].lines)
    for ax in axes:
        assert not ax.patches  # no bars: nothing of height 0
        codes = [t.get_text() for t in ax.get_xticklabels()]
        tha = codes.index("THA")
        pts = np.concatenate([c.get_offsets() for c in _markers(ax)])
        at = pts[np.isclose(pts[:, 0], tha)]
        assert at.size and np.isclose(at[0, 1], hi)  # ∞ on the top edge
        jpn = pts[np.isclose(pts[:, 0], codes.index("JPN"))]
        assert np.isclose(jpn[0, 1], lo)  # 0 on the bottom edge, a distinct marker
        assert len(ax.collections) > len(codes)  # interval lines drawn besides the points
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "∞ (no semantic win)" in legend


def test_heat_map_writes_infinity_and_colours_it_as_the_most(figures, tmp_path):
    plots.sp_heatmap({"m": scores(0, 2.0)}, tmp_path / "heat.png", "test")
    ax = figures[-1].axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "∞" in texts
    assert not np.isnan(ax.images[0].get_array()).all()
    col = [t.get_text() for t in ax.get_xticklabels()].index("THA")
    assert ax.images[0].get_array()[0, col] == pytest.approx(math.log2(plots.SP_SCALE[1]))


def test_own_vs_english_and_silhouette_panels_are_log_with_intervals(figures, tmp_path):
    s = scores(0, 2.0)["by_country"]
    summary = {c: {"own_language": s[c], "english": s["USA"]} for c in s}
    plots.own_vs_english(summary, tmp_path / "own.png", "m")
    ax = figures[-1].axes[0]
    assert ax.get_yscale() == "log" and not ax.patches
    by = {c: {**s[c], "silhouette": {"euclidean": {"text": 0.1 * i, "image": 0.05 * i,
                                                   "sum": 0.15 * i}}}
          for i, c in enumerate(s)}
    corr = {"euclidean": {k: {"n": 15, "r": 0.3, "p": 0.2, "ci95": [-0.2, 0.7], "p_holm": 1.0,
                              "exploratory": True, "spearman": {"rho": 0.25, "p": 0.3,
                                                                 "p_holm": 1.0}}
                          for k in ("text", "image", "sum")}}
    plots.sp_vs_silhouette(by, corr, "euclidean", tmp_path / "sil.png", "m")
    axes = [ax for ax in figures[-1].axes if ax.get_visible()]
    assert {ax.get_yscale() for ax in axes} == {"log"} and len({ax.get_ylim() for ax in axes}) == 1
    assert "[-0.20, 0.70]" in axes[0].get_title() and "exploratory" in axes[0].get_title()
