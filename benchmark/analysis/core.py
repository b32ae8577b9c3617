"""``analyze``: silhouettes, their correlation with SP, and UMAP projections for one model.

Embeddings come through the embedding cache (a ``3xcm`` run's are reused): texts labelled by
query language, images by country; multi-vectors mean-pooled. SP per country uses the ``3xcm``
definitions, so it equals the ``3xcm`` run's numbers. Outputs: docs/analysis.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark.analysis.projection import MIN_POINTS, save_coords, scatter, umap_2d
from benchmark.analysis.silhouette import EXPLORATORY_N, METRICS, pearson, silhouette_by_label
from benchmark.data.dataset import XCMDataset
from benchmark.embeddings import Embeddings, MultiVector
from benchmark.metrics.association import INFINITE, association_scores
from benchmark.metrics.significance import holm
from benchmark.results import model_slug, write_results
from benchmark.tasks.base import (
    RunConfig,
    RunContext,
    TaskOutput,
    embed_images,
    embed_texts,
    open_context,
    result_file,
)
from benchmark.tasks.xcm import (
    CANDIDATE_COLUMNS,
    AssociationConfig,
    interval_settings,
    load_xcm,
)
from core import datatables
from core.options import option

log = logging.getLogger(__name__)


@dataclass
class AnalyzeConfig(AssociationConfig):
    """What ``analyze`` reads (the 3XCM data, the bootstrap of SP) and what shapes its numbers."""

    metric: str = option("silhouette distance: euclidean on raw embeddings (the authors'), "
                         "cosine, or both (default euclidean)", "euclidean",
                         choices=[*METRICS, "both"])
    no_umap: bool = option("skip the UMAP projections (the slow part)", False)
    annotate: int = option("query texts written on the text UMAP per language (default 1)", 1)


def pooled(emb: Embeddings) -> np.ndarray:
    """One float32 vector per item (multi-vector embeddings mean-pooled)."""
    if isinstance(emb, MultiVector):
        return emb.mean_pooled()
    return np.asarray(emb, np.float32)


def text_items(tr: pd.DataFrame) -> pd.DataFrame:
    """Distinct (language, text) query pairs, sorted, with the concept of their first triplet."""
    cols = ["query_language", "query_text", "query_concept"]
    df = tr[cols].drop_duplicates(["query_language", "query_text"])
    return df.sort_values(["query_language", "query_text"]).reset_index(drop=True)


def image_countries(ds: XCMDataset) -> pd.DataFrame:
    """Every image the triplets reference, with its country (image table first)."""
    pairs = [("query", "query"), ("semantic", "semantic"), ("cultural", "query"),
             ("non_relevant", "non_relevant")]  # (image, its country) column prefixes
    df = pd.concat([ds.triplets[[f"{i}_image_id", f"{c}_country"]].set_axis(
        ["image_id", "country"], axis=1) for i, c in pairs], ignore_index=True).drop_duplicates()
    if ds.image_meta is not None and "country" in ds.image_meta:
        meta = ds.image_meta.set_index("image_id")["country"].to_dict()
        df["country"] = [meta.get(i, c) for i, c in zip(df["image_id"], df["country"], strict=True)]
        df = df.drop_duplicates()
    clash = df["image_id"].duplicated(keep=False)
    if clash.any():
        log.warning("%d image(s) referenced with two countries; the first is kept",
                    df.loc[clash, "image_id"].nunique())
    df = df.drop_duplicates("image_id").astype(str)
    return df.sort_values("image_id").reset_index(drop=True)


def sp_scores(adapter: Any, tr: pd.DataFrame, texts: pd.DataFrame, t_emb: Embeddings,
              imgs: pd.DataFrame, i_emb: Embeddings, n_resamples: int, seed: int,
              ci: str = "cluster", ties: str = "order") -> dict[str, Any]:
    """3xcm association scores by country and language, from embeddings already at hand."""
    t_pos = {t: i for i, t in enumerate(texts["query_text"])}  # same text -> same vector
    i_pos = {iid: i for i, iid in enumerate(imgs["image_id"])}
    sims = adapter.indexed_pair_similarity(
        t_emb, tr["query_text"].map(t_pos).to_numpy(), i_emb,
        [tr[c].map(i_pos).to_numpy() for c in CANDIDATE_COLUMNS]).astype(np.float64)
    return association_scores(
        sims, {"country": tr["query_country"].to_numpy(), "language": tr["query_language"].to_numpy()},
        n_resamples=n_resamples, seed=seed, ci=ci, ties=ties,
        concept=tr["query_concept"].to_numpy())


def country_table(sp_by_country: dict[str, Any], sil: dict[str, Any]) -> dict[str, Any]:
    """Per country: SP (+CI, n), and per metric its language's text silhouette, its image
    silhouette and their sum."""
    out: dict[str, Any] = {}
    known = {c.code: c for c in datatables.countries()}
    order = [c for c in known if c in sp_by_country] + sorted(set(sp_by_country) - set(known))
    for code in order:
        s = sp_by_country[code]
        lang = known[code].language if code in known else None
        row: dict[str, Any] = {"n": s.get("n"), "SP": s.get("SP"), "SP_ci95": s.get("SP_ci95"),
                               **({"SP_note": s["SP_note"]} if "SP_note" in s else {}),
                               "language": lang, "silhouette": {}}
        for metric, m in sil.items():
            t = m["text_by_language"]["by_label"].get(lang, {}).get("silhouette") if lang else None
            i = m["image_by_country"]["by_label"].get(code, {}).get("silhouette")
            total = t + i if t is not None and i is not None else None
            row["silhouette"][metric] = {"text": t, "image": i, "sum": total}
        out[code] = row
    return out


def _sp(s: dict[str, Any]) -> float | None:
    return float("inf") if s.get("SP_note") == INFINITE else s.get("SP")


def correlations(by_country: dict[str, Any], by_language: dict[str, Any],
                 sil: dict[str, Any]) -> dict[str, Any]:
    """Pearson r (95% CI, p) and Spearman rho (p) of SP with each silhouette, across countries
    and across languages; every p Holm-adjusted over the model's family (all of them)."""
    out: dict[str, Any] = {}
    codes = list(by_country)
    sp = [_sp(by_country[c]) for c in codes]
    for metric, m in sil.items():
        res = {k: pearson(sp, [by_country[c]["silhouette"][metric][k] for c in codes])
               for k in ("text", "image", "sum")}
        langs = sorted(by_language)
        res["text_by_language"] = pearson(
            [_sp(by_language[lang]) for lang in langs],
            [m["text_by_language"]["by_label"].get(lang, {}).get("silhouette") for lang in langs])
        out[metric] = res
    tests = [d for res in out.values() for c in res.values() for d in (c, c["spearman"])]
    for d, adj in zip(tests, holm([d["p"] for d in tests]), strict=True):
        d["p_holm"] = adj
        d["holm_family"] = sum(t["p"] is not None for t in tests)
    return out


def analyze_arrays(
    text_x: np.ndarray, text_langs: list[str], image_x: np.ndarray, image_countries: list[str],
    scores: dict[str, Any], metrics: list[str],
) -> tuple[dict[str, Any], dict[str, float]]:
    """Silhouettes, per-country table and correlations from pooled embeddings and 3xcm scores
    (``scores`` has ``by_country`` and ``by_language``). Returns (scores, timings)."""
    timings: dict[str, float] = {}
    sil: dict[str, Any] = {}
    for metric in metrics:
        t0 = time.perf_counter()
        sil[metric] = {"text_by_language": silhouette_by_label(text_x, text_langs, metric)}
        timings[f"silhouette_text_{metric}_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        sil[metric]["image_by_country"] = silhouette_by_label(image_x, image_countries, metric)
        timings[f"silhouette_image_{metric}_s"] = time.perf_counter() - t0
    by_country = country_table(scores["by_country"], sil)
    return {
        "silhouette": sil,
        "by_country": by_country,
        "by_language_sp": {k: {"n": v["n"], "SP": v["SP"], "SP_ci95": v["SP_ci95"],
                               **({"SP_note": v["SP_note"]} if "SP_note" in v else {})}
                           for k, v in scores.get("by_language", {}).items()},
        "correlations": correlations(by_country, scores.get("by_language", {}), sil),
    }, timings


def text_notes(texts: pd.DataFrame, per_language: int) -> list[tuple[int, str]]:
    """Up to ``per_language`` query texts per language to write on the text UMAP."""
    notes: list[tuple[int, str]] = []
    if per_language <= 0:
        return notes
    for _, g in texts.groupby("query_language", sort=True):
        picks = np.linspace(0, len(g) - 1, num=min(per_language, len(g))).round().astype(int)
        notes.extend((int(g.index[p]), str(g["query_text"].iloc[p])) for p in sorted(set(picks)))
    return notes


def projections(
    out_dir: Path, text_x: np.ndarray, texts: pd.DataFrame, image_x: np.ndarray,
    imgs: pd.DataFrame, model: str, annotate: int = 1,
) -> dict[str, Any]:
    """UMAP of texts (by language) and images (by country): PNG + parquet per kind."""
    names = datatables.language_names()
    labels = {c.code: c.label for c in datatables.countries()}
    country_order = [c.code for c in datatables.countries()]
    lang_order = list(dict.fromkeys(c.language for c in datatables.countries()))
    result: dict[str, Any] = {}
    kinds = [
        ("text", text_x, texts["query_language"].tolist(), names,
         [lg for lg in lang_order if lg in set(texts["query_language"])]
         + sorted(set(texts["query_language"]) - set(lang_order)),
         texts[["query_language", "query_text", "query_concept"]], text_notes(texts, annotate)),
        ("image", image_x, imgs["country"].tolist(), labels,
         [c for c in country_order if c in set(imgs["country"])]
         + sorted(set(imgs["country"]) - set(country_order)), imgs[["image_id", "country"]], None),
    ]
    for kind, x, lab, legend, order, frame, notes in kinds:
        if len(x) < MIN_POINTS:
            result[kind] = {"skipped": f"fewer than {MIN_POINTS} points ({len(x)})"}
            continue
        coords, params = umap_2d(x)
        frame = frame.copy()
        frame["x"], frame["y"] = coords[:, 0], coords[:, 1]
        base = out_dir / model_slug(model)
        png, pq = base / f"analysis-umap-{kind}.png", base / f"analysis-umap-{kind}.parquet"
        save_coords(pq, frame)
        what = "query texts by language" if kind == "text" else "images by country"
        scatter(coords, lab, legend, f"{model}: UMAP of {what}", png, notes=notes, order=order)
        result[kind] = {**params, "png": png.name, "parquet": pq.name}
        log.info("UMAP %s: %d points in %.1f s", kind, len(x), params["seconds"])
    return result


def correlation_figures(out_dir: Path, model: str, scores: dict[str, Any],
                        metrics: list[str]) -> dict[str, str]:
    """``analysis-sp-vs-silhouette-<metric>.png`` per metric; returns metric -> file name."""
    from benchmark.report.plots import sp_vs_silhouette

    out: dict[str, str] = {}
    for metric in metrics:
        path = out_dir / model_slug(model) / f"analysis-sp-vs-silhouette-{metric}.png"
        sp_vs_silhouette(scores["by_country"], scores["correlations"], metric, path, model)
        out[metric] = path.name
    return out


def analyze(run: RunConfig, cfg: AnalyzeConfig) -> Path:
    """Run the whole analysis of ``run.model`` on the data ``cfg`` names; returns the path of
    ``<output-dir>/<model-slug>/analysis.json``."""
    return analyze_context(open_context(run), cfg)


def analyze_context(ctx: RunContext, cfg: AnalyzeConfig) -> Path:
    """:func:`analyze` with the model already loaded (``ctx``; results go to its output dir)."""
    t_start = time.perf_counter()
    out_dir = ctx.output_dir
    adapter = ctx.adapter
    ds = load_xcm(ctx, cfg)
    tr = ds.triplets
    texts, imgs = text_items(tr), image_countries(ds)
    t_emb, t_stats = embed_texts(ctx, texts["query_text"].tolist(), "query")
    i_emb, i_stats = embed_images(ctx, ds, imgs["image_id"].tolist(), "document")
    t0 = time.perf_counter()
    sp = sp_scores(adapter, tr, texts, t_emb, imgs, i_emb, cfg.bootstrap, cfg.seed, cfg.ci,
                   cfg.ties)
    timings: dict[str, Any] = {"embed_texts_s": t_stats.seconds, "text_embedding": vars(t_stats),
                               "embed_images_s": i_stats.seconds,
                               "image_embedding": vars(i_stats),
                               "sp_s": time.perf_counter() - t0}
    metrics = ["euclidean", "cosine"] if cfg.metric == "both" else [cfg.metric]
    text_x, image_x = pooled(t_emb), pooled(i_emb)
    scores, sil_t = analyze_arrays(text_x, texts["query_language"].tolist(), image_x,
                                   imgs["country"].tolist(), sp, metrics)
    timings.update(sil_t)
    scores["figures"] = correlation_figures(out_dir, adapter.spec.name, scores, metrics)
    if cfg.no_umap:
        scores["umap"] = {"skipped": "--no-umap"}
    else:
        t0 = time.perf_counter()
        scores["umap"] = projections(out_dir, text_x, texts, image_x, imgs,
                                     adapter.spec.name, cfg.annotate)
        timings["umap_s"] = time.perf_counter() - t0
    timings["total_s"] = time.perf_counter() - t_start
    out = TaskOutput(
        task={"name": "analysis", "dataset": ds.dataset_id, "data_fingerprint": ds.fingerprint,
              "n": len(tr), "source_format": ds.source_format, "n_texts": len(texts),
              "n_images": len(imgs)},
        scores=scores,
        settings={
            "metrics": metrics, **interval_settings(cfg),
            "correlation": "Pearson r with a Fisher-z 95% interval, Spearman rho beside it; "
                           "p Holm-adjusted over every correlation of the model; exploratory "
                           f"below {EXPLORATORY_N} pairs",
            "embeddings": "raw model output" + (", mean-pooled over tokens"
                                                if adapter.spec.similarity == "maxsim" else ""),
            "text_items": "distinct (query_language, query_text) of the triplets, role query",
            "image_items": "every image the triplets reference, role document",
            "sp": "3xcm definitions on the same embeddings (benchmark.metrics.association)",
            "umap": None if cfg.no_umap else {"n_neighbors": 15, "min_dist": 0.1,
                                               "random_state": 42},
        },
        timings=timings,
    )
    return write_results(out_dir, result_file(ctx, out))
