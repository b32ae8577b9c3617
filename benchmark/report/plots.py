"""The report's figures (matplotlib, PNG): one function per figure, each taking plain dicts of
scores (as in the results files) and a path.

Every SP axis is logarithmic with SP = 1 marked, the intervals drawn and one range for all
panels of a figure; an SP of ∞ (no semantic win) or 0 is a triangle on the edge, never a bar
of height 0. Every SP heat map shares one diverging scale (:data:`SP_SCALE`). Countries are
labelled by their ISO 3166-1 alpha-3 code, as in the tables and results files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.metrics.association import INFINITE, sp_interval, sp_value
from benchmark.report import style
from core import datatables

TIER_COLOURS = {"high": "#1b9e77", "medium": "#d95f02", "low": "#7570b3"}


def country_order(codes: set[str] | list[str]) -> list[str]:
    """Codes by the Common Crawl share of their language (highest first), then table order."""
    table = list(datatables.countries())
    pos = {c.code: i for i, c in enumerate(table)}
    share = {c.code: c.cc_share for c in table}

    def key(code: str) -> tuple[float, int, str]:
        s = share.get(code)
        return (-s if s is not None else math.inf, pos.get(code, 99), code)

    return sorted(set(codes), key=key)


def country_tier(code: str) -> str | None:
    """Resource tier (XM3600 table) of a country's language; None if not listed."""
    try:
        return datatables.language(datatables.country(code).language).tier
    except datatables.TableError:
        return None


def tier_handles(unlisted: bool = True) -> list[Any]:
    """Legend patches of the tier colours (plus grey for languages outside XM3600)."""
    from matplotlib.patches import Patch

    out = [Patch(color=c, label=t) for t, c in TIER_COLOURS.items()]
    return out + [Patch(color="grey", label="not in XM3600")] if unlisted else out


def _grid(n: int, ncols: int = 2, w: float = 6.5, h: float = 3.2) -> tuple[Any, Any]:
    plt = style.setup()
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False,
                             layout="constrained")
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def sp_limits(values: list[float | None], points: list[float | None] | None = None
              ) -> tuple[float, float]:
    """One log range for every SP panel of a figure: the values, 1, and ends near the points."""
    v = [x for x in values if x is not None and 0 < x < math.inf]
    p = [x for x in (points if points is not None else values)
         if x is not None and 0 < x < math.inf] or [1.0]
    lo = max(min([1.0, *v]), min([1.0, *p]) / 10)
    hi = min(max([1.0, *v]), max([1.0, *p]) * 10)
    return lo / 1.6, hi * 1.6


def sp_axis(ax: Any, lim: tuple[float, float], label: str = "SP = M_cul / M_sem") -> None:
    """Log scale over ``lim``, plain-number ticks, SP = 1 dashed."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    ax.set_ylim(*lim)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    few = math.log10(lim[1] / lim[0]) <= 3.2  # label 2 and 5 only where there is room
    ax.yaxis.set_minor_formatter(FuncFormatter(_minor_label if few else lambda v, _: ""))
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_ylabel(label + " (log)")


def sp_points(ax: Any, x: np.ndarray, entries: list[dict[str, Any] | None], colours: Any,
              lim: tuple[float, float], label: str | None = None) -> bool:
    """SP with its 95% interval at ``x``, ∞ and 0 as edge markers; returns whether ∞ was drawn."""
    colours = colours if isinstance(colours, list) else [colours] * len(x)
    inf = False
    for i, (xi, e) in enumerate(zip(x, entries, strict=True)):
        if e is not None and "SP" not in e:
            raise KeyError("SP")  # a malformed entry costs the figure, never a silent gap
        v = sp_value(e)
        if v is None:
            continue
        lo, hi = sp_interval(e)
        y = lim[1] if v == math.inf else lim[0] if v == 0 else v
        if lo is not None:
            lo = lim[0] if lo <= 0 else min(lo, y)
            hi = lim[1] if hi is None or hi == math.inf else max(hi, y)
            ax.vlines(xi, lo, hi, color=colours[i], lw=1.0)
        marker = "^" if v == math.inf else "v" if v == 0 else "o"
        ax.scatter([xi], [y], color=colours[i], marker=marker, s=36 if marker != "o" else 22,
                   zorder=3, edgecolors="black" if marker != "o" else "none",
                   label=label if i == 0 else None)
        inf |= v == math.inf
    return inf


def edge_handles() -> list[Any]:
    """Legend entries of the edge markers."""
    from matplotlib.lines import Line2D

    return [Line2D([], [], marker="^", color="grey", markeredgecolor="black", ls="",
                   label=INFINITE),
            Line2D([], [], marker="v", color="grey", markeredgecolor="black", ls="",
                   label="0 (no cultural win)")]


def sp_by_country(models: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """``models``: name -> ``scores`` of a 3xcm results file (uses ``by_country``)."""
    fig, axes = _grid(len(models))
    entries = [e for s in models.values() for e in s.get("by_country", {}).values()]
    lim = sp_limits([x for e in entries for x in (sp_value(e), *sp_interval(e))],
                    [sp_value(e) for e in entries])
    for ax, (name, scores) in zip(axes, models.items(), strict=False):
        by = scores.get("by_country", {})
        codes = country_order(list(by))
        x = np.arange(len(codes))
        sp_points(ax, x, [by[c] for c in codes],
                  [TIER_COLOURS.get(country_tier(c) or "", "grey") for c in codes], lim)
        sp_axis(ax, lim)
        ax.set_xticks(x, codes, rotation=60, ha="right")
        overall = sp_value(scores.get("overall"))
        ax.set_title(f"{name}" + (f"  (overall SP {overall:.2f})" if overall is not None
                                  and overall < math.inf else ""))
    fig.suptitle(f"{title}: SP by country (95% CI), countries by the Common Crawl share of "
                 "their language", fontsize=11)
    # below the panels: a legend in the top corner overlapped the figure title
    fig.legend(handles=tier_handles() + edge_handles(),
               title="colour: resource tier of the language", frameon=False,
               loc="outside lower center", ncols=6)
    style.save(fig, path)


SP_SCALE = (0.25, 4.0)  # the one colour range of SP in every heat map (log2, centred on 1)


def sp_colours(m: np.ndarray) -> np.ndarray:
    """log2(SP) clipped to :data:`SP_SCALE`: SP = 1 at the centre, 0.5 and 2 equally far."""
    lo, hi = SP_SCALE
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isnan(m), np.nan, np.log2(np.clip(m, lo, hi)))


def _sp_grid(rows: dict[str, dict[str, Any]], row_labels: list[str], path: Path, title: str,
             margins: tuple[float, float], xlabel: str = "", ylabel: str = "") -> None:
    """A heat map of SP (row -> country -> scores) on the one scale :data:`SP_SCALE`."""
    plt = style.setup()
    keys = list(rows)
    codes = country_order({c for row in rows.values() for c in row})
    m = np.full((len(keys), len(codes)), np.nan)
    for i, k in enumerate(keys):
        for j, c in enumerate(codes):
            v = sp_value(rows[k].get(c))
            m[i, j] = np.nan if v is None else v
    fig, ax = plt.subplots(figsize=(margins[0] + 0.62 * len(codes), margins[1] + 0.42 * len(keys)),
                           layout="constrained")
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#e0e0e0")
    lo, hi = np.log2(SP_SCALE)
    im = ax.imshow(sp_colours(m), cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
    for i, j in zip(*np.nonzero(~np.isnan(m)), strict=True):
        dark = abs(sp_colours(m[i, j])) > 0.7 * hi
        ax.text(j, i, "∞" if m[i, j] == math.inf else f"{m[i, j]:.2f}", ha="center",
                va="center", fontsize=7, color="white" if dark else "black")
    ax.set_xticks(range(len(codes)), codes, rotation=60, ha="right")
    ax.set_yticks(range(len(keys)), row_labels)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ticks = [0.25, 0.5, 1, 2, 4]
    bar = fig.colorbar(im, ax=ax, shrink=0.8, extend="both")
    bar.set_ticks(np.log2(ticks), labels=["≤0.25", "0.5", "1", "2", "≥4"])
    bar.set_label("SP (log, centred on 1; same in every SP heat map; ∞: no semantic win)",
                  fontsize=7)
    style.save(fig, path)


def sp_heatmap(models: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """Model x country heat map of SP (``models``: name -> 3xcm ``scores``)."""
    rows = {n: s.get("by_country", {}) for n, s in models.items()}
    _sp_grid(rows, list(rows), path, f"{title}: SP by model and country", (1.0, 1.4))


def rank_by_tier(models: dict[str, dict[str, Any]], path: Path, n_queries: dict[str, int]) -> None:
    """Share of the captions at each rank per tier, a panel per model (dashed: the pool's share)."""
    fig, axes = _grid(len(models))
    for ax, (name, scores) in zip(axes, models.items(), strict=False):
        counts = scores.get("retrieved_language_counts") or {}
        pool = scores.get("pool_tier_counts") or {}
        ptotal = float(sum(pool.values())) or 1.0
        n = max(n_queries.get(name, 0), 1)
        for tier, series in counts.get("by_tier", {}).items():
            y = np.asarray(series, float) / n
            colour = TIER_COLOURS.get(tier)
            ax.plot(np.arange(1, len(y) + 1), y, label=tier, lw=1.4, color=colour)
            if tier in pool:
                ax.axhline(pool[tier] / ptotal, color=colour, lw=0.9, ls="--")
        ax.set(title=name, xlabel="rank", ylabel="share of retrieved captions", ylim=(0, 1))
        ax.legend(title="tier" + ("\n(dashed: pool share)" if pool else ""), frameon=False,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("XM3600 image -> text: language tier of the caption at each rank", fontsize=11)
    style.save(fig, path)


def language_frequency(models: dict[str, dict[str, Any]], path: Path) -> None:
    """Share of each language among all top-K captions (a black tick: the pool's share)."""
    langs = list(datatables.languages())
    fig, axes = _grid(len(models), ncols=1, w=12, h=3.4)
    for ax, (name, scores) in zip(axes, models.items(), strict=False):
        counts = scores.get("retrieved_language_counts") or {}
        by = counts.get("by_language", {})
        codes = [lg.code for lg in langs if lg.code in by] + sorted(
            set(by) - {lg.code for lg in langs})
        total = sum(float(np.sum(v)) for v in by.values()) or 1.0
        share = [float(np.sum(by[c])) / total for c in codes]
        tier = {lg.code: lg.tier for lg in langs}
        ax.bar(range(len(codes)), share,
               color=[TIER_COLOURS.get(tier.get(c, ""), "grey") for c in codes])
        pool = scores.get("pool_language_counts") or {}
        if pool:
            ptotal = float(sum(pool.values())) or 1.0
            ax.scatter(range(len(codes)), [pool.get(c, 0) / ptotal for c in codes], marker="_",
                       s=120, color="black", label="share of pool", zorder=3)
        ax.set_xticks(range(len(codes)), codes, rotation=90)
        ax.set_ylabel(f"share of top-{counts.get('ranks', '?')}")
        ax.set_title(f"{name}: retrieved caption languages (by Common Crawl share)")
        extra = [ax.collections[0]] if pool and ax.collections else []
        ax.legend(handles=tier_handles(False) + extra, title="tier", frameon=False)
    style.save(fig, path)


def matrix_heatmap(matrix: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """SP of each query language (rows) on each image culture (columns)."""
    names = datatables.language_names()
    _sp_grid(matrix, [f"{names.get(lg, lg)} ({lg})" for lg in matrix], path,
             f"{title}: SP by query language and image culture", (1.5, 1.2),
             xlabel="image culture (query country)", ylabel="query language")


def own_vs_english(summary: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """Per country: SP with the country's own-language queries and with English queries."""
    plt = style.setup()
    codes = country_order(list(summary))
    fig, ax = plt.subplots(figsize=(1.5 + 0.6 * len(codes), 4.0), layout="constrained")
    x = np.arange(len(codes))
    keys = (("own_language", "#c44e52", -0.15, "own language"),
            ("english", "#4c72b0", 0.15, "English"))
    entries = [summary[c].get(key) for c in codes for key, *_ in keys]
    lim = sp_limits([v for e in entries for v in (sp_value(e), *sp_interval(e))],
                    [sp_value(e) for e in entries])
    for key, colour, off, name in keys:
        sp_points(ax, x + off, [summary[c].get(key) for c in codes], colour, lim, name)
    sp_axis(ax, lim, "SP")
    ax.set_xticks(x, codes, rotation=60, ha="right")
    ax.set_title(f"{title}: own-language vs English queries (95% CI)")
    ax.legend(handles=[*ax.get_legend_handles_labels()[0], *edge_handles()], frameon=False,
              fontsize=7)
    style.save(fig, path)


def authors_scatter(rows: list[dict[str, Any]], path: Path) -> None:
    """Our per-country SP against the authors' (log axes, y = x; ∞ and 0 on the edges)."""
    from matplotlib.ticker import FuncFormatter

    exps = sorted({r["experiment"] for r in rows}, reverse=True)
    fig, axes = _grid(len(exps), w=4.8, h=4.4)
    plt = style.setup()
    models = sorted({r["model"] for r in rows})
    cmap = plt.get_cmap("tab10")
    for ax, exp in zip(axes, exps, strict=False):
        mine = [r for r in rows if r["experiment"] == exp and r["authors_SP"] is not None
                and r["ours_SP"] is not None]
        lo, hi = sp_limits([v for r in mine for v in (r["authors_SP"], r["ours_SP"])])
        for i, model in enumerate(models):
            pts = np.array([(r["authors_SP"], r["ours_SP"]) for r in mine
                            if r["model"] == model], float).reshape(-1, 2)
            edge = ~np.all((pts > 0) & np.isfinite(pts), axis=1)
            pts = np.where(pts == math.inf, hi, np.where(pts <= 0, lo, pts))
            ax.scatter(*pts[~edge].T, s=18, color=cmap(i % 10), label=model)
            ax.scatter(*pts[edge].T, s=36, color=cmap(i % 10), marker="^",
                       edgecolors="black")
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="authors' SP",
               ylabel="our SP", title=f"per country, {exp}")
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers, not mathtext powers of ten
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(FuncFormatter(_minor_label))
        ax.legend(frameon=False, fontsize=7, title="▲ on an edge: ∞ or 0", title_fontsize=7)
    style.save(fig, path)


def _minor_label(v: float, _: Any = None) -> str:
    """Minor log ticks: 2 and 5 times a power of ten as plain numbers (not mathtext)."""
    if v <= 0:
        return ""
    lead = round(v / 10 ** math.floor(math.log10(v)), 6)
    return f"{v:g}" if lead in (2.0, 5.0) else ""


def sp_vs_silhouette(by_country: dict[str, Any], correlations: dict[str, Any], metric: str,
                     path: Path, title: str) -> None:
    """SP with its 95% interval against the text, image and summed silhouette per country,
    the correlations in the panel titles (the data behind the paper's Table 8)."""
    from benchmark.analysis.silhouette import correlation_text

    fig, axes = _grid(3, ncols=3, w=4.2, h=3.8)
    lim = sp_limits([v for row in by_country.values() for v in (sp_value(row),
                                                               *sp_interval(row))],
                    [sp_value(row) for row in by_country.values()])
    for ax, key in zip(axes, ("text", "image", "sum"), strict=True):
        pts = [(row["silhouette"][metric][key], row, code) for code, row in by_country.items()
               if sp_value(row) is not None and row["silhouette"][metric][key] is not None]
        sp_points(ax, np.array([p[0] for p in pts]), [p[1] for p in pts],
                  [TIER_COLOURS.get(country_tier(code) or "", "grey") for *_, code in pts], lim)
        for x, row, code in pts:
            v = sp_value(row)
            ax.annotate(code, (x, min(max(v, lim[0]), lim[1])), fontsize=7,
                        xytext=(2, 2), textcoords="offset points")
        c = correlations.get(metric, {}).get(key, {})
        ax.set_title(f"{key} silhouette\n{correlation_text(c)}", fontsize=8)
        ax.set_xlabel(f"{key} silhouette ({metric})")
        sp_axis(ax, lim, "SP")
    fig.suptitle(f"{title}: SP vs silhouette per country", fontsize=11)
    fig.legend(handles=edge_handles(), frameon=False, loc="outside lower center", ncols=2)
    style.save(fig, path)
