"""The report's figures (matplotlib, PNG): one function per figure, each taking plain dicts of
scores (as in the results files) and a path.

- :func:`sp_by_country`: SP per country with its 95% interval, one panel per model,
  countries ordered by the Common Crawl share of their language (highest first; the paper's
  Fig. 8), SP = 1 marked;
- :func:`sp_heatmap`: model x country SP (one diverging log scale centred on SP = 1, the
  same in every SP heat map: :data:`SP_SCALE`);
- :func:`rank_by_tier`: share of retrieved captions of each resource tier at ranks 1..K, one
  panel per model (Figs. 6, 7); :func:`language_frequency`: share of each language among
  all top-K captions, languages by Common Crawl share, coloured by tier (Figs. 13, 14);
- :func:`matrix_heatmap`: 3xcm-matrix SP, query language x image culture;
  :func:`own_vs_english`: SP with the country's own language vs English, per country;
- :func:`authors_scatter`: our SP against the authors' per country.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.report import style
from core import datatables

TIER_COLOURS = {"high": "#1b9e77", "medium": "#d95f02", "low": "#7570b3"}


def country_order(codes: set[str] | list[str]) -> list[str]:
    """Codes ordered by the Common Crawl share of their language (highest first, unknown last),
    then by the table's order."""
    table = list(datatables.countries())
    pos = {c.code: i for i, c in enumerate(table)}
    share = {c.code: c.cc_share for c in table}

    def key(code: str) -> tuple[float, int, str]:
        s = share.get(code)
        return (-s if s is not None else math.inf, pos.get(code, 99), code)

    return sorted(set(codes), key=key)


def label(code: str) -> str:
    """A country's label in every figure: its ISO 3166-1 alpha-3 code (GBR, DEU), the same
    set the tables and the results files use (the paper's own labels, UK / GER, are kept in
    ``data/countries.csv`` and the authors' comparison CSV only)."""
    return code


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


def sp_by_country(models: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """``models``: name -> ``scores`` of a 3xcm results file (uses ``by_country``)."""
    fig, axes = _grid(len(models))
    for ax, (name, scores) in zip(axes, models.items(), strict=False):
        by = scores.get("by_country", {})
        codes = country_order(list(by))
        sp = np.array([by[c]["SP"] if by[c]["SP"] is not None else np.nan for c in codes])
        ci = [by[c].get("SP_ci95") or [None, None] for c in codes]
        lo = np.array([sp[i] - x[0] if x[0] is not None else 0 for i, x in enumerate(ci)])
        hi = np.array([x[1] - sp[i] if x[1] is not None else 0 for i, x in enumerate(ci)])
        colours = [TIER_COLOURS.get(country_tier(c), "grey") for c in codes]
        x = np.arange(len(codes))
        ax.bar(x, np.nan_to_num(sp), color=colours, yerr=[np.nan_to_num(lo), np.nan_to_num(hi)],
               capsize=2, error_kw={"elinewidth": 0.8})
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xticks(x, [label(c) for c in codes], rotation=60, ha="right")
        overall = scores.get("overall", {}).get("SP")
        ax.set_title(f"{name}" + (f"  (overall SP {overall:.2f})" if overall is not None else ""))
        ax.set_ylabel("SP = M_cul / M_sem")
    fig.suptitle(f"{title}: SP by country (95% CI), countries by the Common Crawl share of "
                 "their language", fontsize=11)
    # below the panels: a legend in the top corner overlapped the figure title
    fig.legend(handles=tier_handles(), title="bar colour: resource tier of the language",
               frameon=False, loc="outside lower center", ncols=4)
    style.save(fig, path)


SP_SCALE = (0.25, 4.0)  # the one colour range of SP in every heat map (log2, centred on 1)


def sp_colours(m: np.ndarray) -> np.ndarray:
    """Where SP values fall on the shared diverging scale: log2(SP) clipped to
    log2(SP_SCALE), so SP = 1 is the centre and SP = 0.5 and 2 are equally far from it."""
    lo, hi = SP_SCALE
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(m), np.log2(np.clip(m, lo, hi)), np.nan)


def _sp_grid(rows: dict[str, dict[str, Any]], row_labels: list[str], path: Path, title: str,
             margins: tuple[float, float], xlabel: str | None = None,
             ylabel: str | None = None) -> None:
    """A heat map of SP: one row per key of ``rows`` (row -> country -> scores with ``SP``),
    countries as columns by :func:`country_order`, values written in the cells. Every SP
    heat map of the report (3xcm, 3xcm-i2i, 3xcm-matrix) uses one diverging scale centred
    on SP = 1, log2 from 1/4 to 4 (:data:`SP_SCALE`; beyond is clipped), stated in the
    colour bar, so two heat maps can be compared by eye."""
    plt = style.setup()
    keys = list(rows)
    codes = country_order({c for row in rows.values() for c in row})
    m = np.full((len(keys), len(codes)), np.nan)
    for i, k in enumerate(keys):
        for j, c in enumerate(codes):
            v = (rows[k].get(c) or {}).get("SP")
            m[i, j] = np.nan if v is None else v
    fig, ax = plt.subplots(figsize=(margins[0] + 0.62 * len(codes), margins[1] + 0.42 * len(keys)),
                           layout="constrained")
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#e0e0e0")
    lo, hi = np.log2(SP_SCALE)
    im = ax.imshow(sp_colours(m), cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
    for i, j in zip(*np.nonzero(np.isfinite(m)), strict=True):
        dark = abs(sp_colours(m[i, j])) > 0.7 * hi
        ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7,
                color="white" if dark else "black")
    ax.set_xticks(range(len(codes)), [label(c) for c in codes], rotation=60, ha="right")
    ax.set_yticks(range(len(keys)), row_labels)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_title(title)
    ticks = [0.25, 0.5, 1, 2, 4]
    bar = fig.colorbar(im, ax=ax, shrink=0.8, extend="both")
    bar.set_ticks(np.log2(ticks), labels=["≤0.25", "0.5", "1", "2", "≥4"])
    bar.set_label("SP (log scale, centred on 1; same scale in every SP heat map)", fontsize=8)
    style.save(fig, path)


def sp_heatmap(models: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """Model x country heat map of SP (``models``: name -> 3xcm ``scores``)."""
    rows = {n: s.get("by_country", {}) for n, s in models.items()}
    _sp_grid(rows, list(rows), path, f"{title}: SP by model and country", (1.0, 1.4))


def rank_by_tier(models: dict[str, dict[str, Any]], path: Path, n_queries: dict[str, int]) -> None:
    """Share of the captions at each rank that belong to each tier (one panel per model);
    ``models``: name -> xm3600-i2t ``scores``. Dashed: the tier's share of the caption pool
    (the expected share without prevalence bias), when the results give ``pool_tier_counts``."""
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
        ax.set_title(name)
        ax.set_xlabel("rank")
        ax.set_ylabel("share of retrieved captions")
        ax.set_ylim(0, 1)
        ax.legend(title="tier" + ("\n(dashed: pool share)" if pool else ""), frameon=False,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("XM3600 image -> text: language tier of the caption at each rank", fontsize=11)
    style.save(fig, path)


def language_frequency(models: dict[str, dict[str, Any]], path: Path) -> None:
    """Share of each language among all top-K captions, languages by Common Crawl share;
    ``models``: name -> xm3600-i2t ``scores``. A black tick marks the language's share of the
    caption pool (the expected share without prevalence bias) when the results give it."""
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
    for k, (key, colour, off) in enumerate((("own_language", "#c44e52", -0.2),
                                            ("english", "#4c72b0", 0.2))):
        vals, err = [], [[], []]
        for c in codes:
            s = summary[c].get(key) or {}
            v = s.get("SP")
            lo, hi = s.get("SP_ci95") or [None, None]
            vals.append(np.nan if v is None else v)
            err[0].append(v - lo if v is not None and lo is not None else 0)
            err[1].append(hi - v if v is not None and hi is not None else 0)
        ax.bar(x + off, np.nan_to_num(vals), width=0.4, color=colour, yerr=err, capsize=2,
               label="own language" if k == 0 else "English", error_kw={"elinewidth": 0.8})
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(x, [label(c) for c in codes], rotation=60, ha="right")
    ax.set_ylabel("SP")
    ax.set_title(f"{title}: own-language vs English queries")
    ax.legend(frameon=False)
    style.save(fig, path)


def authors_scatter(rows: list[dict[str, Any]], path: Path) -> None:
    """Our per-country SP against the authors', one panel per experiment, log axes (their SP
    spans 0.03 to 16), y = x marked."""
    from matplotlib.ticker import FuncFormatter

    exps = sorted({r["experiment"] for r in rows}, reverse=True)
    fig, axes = _grid(len(exps), w=4.8, h=4.4)
    plt = style.setup()
    models = sorted({r["model"] for r in rows})
    cmap = plt.get_cmap("tab10")
    for ax, exp in zip(axes, exps, strict=False):
        lo, hi = math.inf, 0.0
        for i, model in enumerate(models):
            pts = [(r["authors_SP"], r["ours_SP"]) for r in rows
                   if r["experiment"] == exp and r["model"] == model
                   and r["authors_SP"] and r["ours_SP"]]  # > 0: log axes
            if pts:
                a, o = np.array(pts, float).T
                ax.scatter(a, o, s=18, color=cmap(i % 10), label=model)
                lo, hi = min(lo, a.min(), o.min()), max(hi, a.max(), o.max())
        lo, hi = (lo / 1.3, hi * 1.3) if hi > 0 else (0.1, 10.0)
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers, not mathtext powers of ten
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(FuncFormatter(_minor_label))
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("authors' SP")
        ax.set_ylabel("our SP")
        ax.set_title(f"per country, {exp}")
        ax.legend(frameon=False, fontsize=7)
    style.save(fig, path)


def _minor_label(v: float, _: Any = None) -> str:
    """Minor ticks of a log axis: 2 and 5 times a power of ten as plain numbers, others
    unlabelled (matplotlib's default writes mathtext powers, with a minus sign the plot
    fonts lack)."""
    if v <= 0:
        return ""
    lead = round(v / 10 ** math.floor(math.log10(v)), 6)
    return f"{v:g}" if lead in (2.0, 5.0) else ""


def sp_vs_silhouette(by_country: dict[str, Any], correlations: dict[str, Any], metric: str,
                     path: Path, title: str) -> None:
    """SP against the text, image and summed silhouette per country (one panel each), with
    Pearson r and p in the panel titles (the data behind the paper's Table 8)."""
    fig, axes = _grid(3, ncols=3, w=4.2, h=3.8)
    for ax, key in zip(axes, ("text", "image", "sum"), strict=True):
        pts = [(row["silhouette"][metric][key], row["SP"], code)
               for code, row in by_country.items()
               if row["SP"] is not None and row["silhouette"][metric][key] is not None]
        for x, y, code in pts:
            ax.scatter(x, y, s=20, color=TIER_COLOURS.get(country_tier(code) or "", "grey"))
            ax.annotate(label(code), (x, y), fontsize=7, xytext=(2, 2),
                        textcoords="offset points")
        c = correlations.get(metric, {}).get(key, {})
        r = f"r = {c['r']:.2f}, p = {c['p']:.3f}" if c.get("r") is not None else "r undefined"
        ax.set_title(f"{key} silhouette: {r} (n = {c.get('n', 0)})", fontsize=9)
        ax.set_xlabel(f"{key} silhouette ({metric})")
        ax.set_ylabel("SP")
    fig.suptitle(f"{title}: SP vs silhouette per country", fontsize=11)
    style.save(fig, path)
