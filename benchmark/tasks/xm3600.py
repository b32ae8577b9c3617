"""``xm3600-i2t``: prevalence bias, image -> text over one mixed pool of 36 languages.

Every image queries the pool of all captions (:mod:`benchmark.retrieval`, or the paper's
two-stage search); the lists are scored by :mod:`benchmark.metrics.prevalence`, overall and
per locale. Results structure: docs/xm3600.md.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark import chroma, retrieval, shortlist
from benchmark.data.xm3600 import XM3600, load_xm3600
from benchmark.embeddings import Embeddings, MultiVector, take
from benchmark.metrics import prevalence as pm
from benchmark.models.conventions import TWO_STAGE_L2
from benchmark.tasks.base import (
    RunContext,
    Task,
    TaskConfig,
    TaskOutput,
    embed_images,
    embed_texts,
)
from core import datatables
from core.errors import DataError
from core.options import option

log = logging.getLogger(__name__)

DEFAULT_KS = (1, 5, 10, 25, 50, 99)
AUTHORS_DEPTH = 100  # the paper's retrieved list (n_results=100 / K_FINAL_RETRIEVAL=100)


def list_depth(ks: list[int], pool: int) -> int:
    """How many captions to retrieve per image: the largest k, and at least the authors' 100
    (their NDCG ideal reads the whole list), or the whole pool when it is smaller."""
    return max(ks[-1], min(AUTHORS_DEPTH, pool))


def parse_ks(text: str) -> list[int]:
    """``"1,5,10"`` -> [1, 5, 10] (sorted, unique, positive)."""
    try:
        ks = sorted({int(p) for p in str(text).split(",") if p.strip()})
    except ValueError as e:
        raise DataError(f"--k: expected comma-separated integers, got {text!r}") from e
    if not ks or ks[0] < 1:
        raise DataError(f"--k: cut-offs must be positive integers, got {text!r}")
    return ks


@dataclass
class XM3600Config(TaskConfig):
    """``xm3600-i2t``: the data, the cut-offs and grouping, and how retrieval runs."""

    xm3600: str | None = option(
        "XM3600: captions.jsonl (or its folder) or a datasets folder / hub id (default: "
        "--dataset, else mteb/xm3600 pinned)", None)
    xm3600_images: Path | None = option(
        "image folder of the official layout (default: images/ next to captions.jsonl)", None)
    k: str = option("cut-offs, comma-separated (default 1,5,10,25,50,99)",
                    ",".join(map(str, DEFAULT_KS)))
    grouping: str = option(
        "LBKL/DLBKL language groups: authors (low tier vs rest, target 0.5/0.5; default), "
        "tier, language (targets: the image's caption shares)", "authors", choices=pm.GROUPINGS)
    chunk_size: int = option(f"captions per score block (default {retrieval.DEFAULT_CHUNK})",
                             retrieval.DEFAULT_CHUNK)
    retrieval_backend: str = option(
        "auto (default): torch on a GPU, faiss on the CPU; numpy: the chunked numpy path",
        "auto", choices=list(retrieval.BACKENDS))
    engine: str | None = option(
        "single-vector models: exact (default) or chromadb (the authors' HNSW index, "
        "hnsw:space cosine, chromadb defaults; approximate; needs the chromadb extra). "
        "Default under --conventions authors: chromadb", None, choices=list(chroma.ENGINES))
    compare_engines: bool = option(
        "single-vector models: also rank the same embeddings with the other engine (exact / "
        "chromadb) and record its overall scores and the difference (scores.engine_comparison)",
        False)
    two_stage: int | None = option(
        "multi-vector models: shortlist N captions by mean-pooled cosine, rerank by MaxSim "
        "(approximate; agreement reported). With --conventions authors ColQwen always runs "
        "the paper's two-stage search (exact L2 of mean-pooled vectors); N sets its shortlist",
        None, metavar="N")
    two_stage_check: int = option(
        "images on which --two-stage is checked against exact MaxSim (64)", 64, metavar="M")
    save_topk: bool = option(
        "also write <task>.topk.parquet with every image's top-k captions", False)

    @property
    def ks(self) -> list[int]:
        return parse_ks(self.k)


def load_data(ctx: RunContext, cfg: XM3600Config) -> XM3600:
    """The XM3600 data ``cfg`` names (``--xm3600``, else ``--dataset``, else mteb/xm3600), once."""
    spec = cfg.xm3600 or cfg.dataset
    key = ("xm3600", spec, cfg.xm3600_images, cfg.revision)
    if key in ctx.memo:
        return ctx.memo[key]
    ds = load_xm3600(spec, cfg.xm3600_images, cfg.revision, hash_memo=ctx.hash_memo)
    log.info("%s: %d images, %d captions (%s)", ds.dataset_id, len(ds.image_ids),
             len(ds.captions), ds.source_format)
    ctx.memo[key] = ds
    return ds


def embed(ctx: RunContext, ds: XM3600) -> tuple[Embeddings, Embeddings, dict[str, Any]]:
    """Image (query role) and caption (document role) embeddings through the cache."""
    img, ist = embed_images(ctx, ds, ds.image_ids, "query")
    cap, tst = embed_texts(ctx, ds.captions, "document")
    timings = {"embed_images_s": ist.seconds, "image_embedding": vars(ist),
               "embed_texts_s": tst.seconds, "text_embedding": vars(tst)}
    return img, cap, timings


def score_topk(
    ds: XM3600, query_images: np.ndarray, indices: np.ndarray, ks: list[int], grouping: str,
    epsilon: float = pm.EPSILON,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(``scores`` as in the results file, per-query metric arrays) of the retrieved pool
    indices, one row per query image (``ndcg_authors`` reads the whole list, the rest max(ks))."""
    langs = datatables.languages()
    codes = [lang.code for lang in langs]
    tier_of = {lang.code: lang.tier for lang in langs}
    g = pm.make_grouping(grouping, [(lang.code, lang.tier) for lang in langs])
    lang_idx = np.array([codes.index(c) for c in ds.caption_language], np.int64)
    cap_group = np.array([g.group_of[c] for c in codes], np.int64)[lang_idx]
    n_rel_all = np.bincount(ds.caption_image, minlength=len(ds.image_ids))
    rel = ds.caption_image[indices] == query_images[:, None]
    if g.fixed_target is not None:
        target = np.asarray(g.fixed_target)
    else:
        target = pm.caption_share_targets(ds.caption_image, cap_group, len(ds.image_ids),
                                          g.n_groups)[query_images]
    per_q = pm.per_query_scores(rel, n_rel_all[query_images], cap_group[indices], target,
                                g.n_groups, ks, epsilon)
    locales = np.array(ds.locales)[query_images]
    by_locale = {c: pm.mean_scores(per_q, locales == c) for c in codes if (locales == c).any()}
    for c in sorted(set(locales) - set(codes)):
        by_locale[c or "unknown"] = pm.mean_scores(per_q, locales == c)
    counts = pm.rank_counts(lang_idx[indices[:, : ks[-1]]], len(codes))  # (K, 36)
    tier_cols = {t: [i for i, c in enumerate(codes) if tier_of[c] == t] for t in pm.TIERS}
    pool = np.bincount(lang_idx, minlength=len(codes))
    scores = {
        "overall": pm.mean_scores(per_q),
        "by_locale": by_locale,
        "retrieved_language_counts": {
            "ranks": int(counts.shape[0]),
            "by_language": {c: counts[:, i].tolist() for i, c in enumerate(codes)},
            "by_tier": {t: counts[:, i].sum(axis=1).tolist() for t, i in tier_cols.items()},
        },
        "pool_language_counts": {c: int(pool[i]) for i, c in enumerate(codes)},
        "pool_tier_counts": {t: int(pool[i].sum()) for t, i in tier_cols.items()},
    }
    return scores, per_q


#: captions per image the outcomes keep for the report's gallery
GALLERY_K = 10


def top_captions(ds: XM3600, query_images: np.ndarray, topk: retrieval.TopK,
                 k: int = GALLERY_K) -> dict[str, list[list[Any]]]:
    """Per query image its first ``k`` retrieved captions: text, language, whether it is a
    caption of that image, and the score (list columns of the outcomes)."""
    idx, sc = topk.indices[:, :k], topk.scores[:, :k]
    caps = np.array(ds.captions, dtype=object)
    langs = np.array(ds.caption_language, dtype=object)
    rel = ds.caption_image[idx] == query_images[:, None]
    return {"top_caption": [list(map(str, r)) for r in caps[idx]],
            "top_language": [list(map(str, r)) for r in langs[idx]],
            "top_relevant": [list(map(bool, r)) for r in rel],
            "top_score": [[float(x) for x in r] for r in sc]}


class XM3600ImageToText(Task):
    name = "xm3600-i2t"
    description = "prevalence bias, image -> text: XM3600 images vs all captions in 36 languages"
    config_class = XM3600Config
    config: XM3600Config

    def run(self, ctx: RunContext) -> TaskOutput:
        cfg = self.config
        ks, grouping = cfg.ks, cfg.grouping
        if cfg.chunk_size < 1:
            raise DataError("--chunk-size must be >= 1")
        ds = load_data(ctx, cfg)
        if ks[-1] > len(ds.captions):
            raise DataError(f"--k {ks[-1]} exceeds the pool size {len(ds.captions)}")
        img, cap, timings = embed(ctx, ds)
        has_caps = np.bincount(ds.caption_image, minlength=len(ds.image_ids)) > 0
        query_images = np.flatnonzero(has_caps)
        if not has_caps.all():
            log.warning("%d images have no caption: not scored as queries", int((~has_caps).sum()))
        t0 = time.perf_counter()
        depth = list_depth(ks, len(ds.captions))
        topk, ret_settings, agreement = self.retrieve(ctx, take(img, query_images), cap, ks,
                                                      depth)
        timings["retrieval_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        scores, per_q = score_topk(ds, query_images, topk.indices, ks, grouping)
        if agreement is not None:
            scores["two_stage_agreement"] = agreement
        timings["scoring_s"] = time.perf_counter() - t0
        if cfg.compare_engines:
            t0 = time.perf_counter()
            scores["engine_comparison"] = self.other_engine(
                ctx, take(img, query_images), cap, ks, depth, topk, ret_settings["engine"],
                scores["overall"], lambda idx: score_topk(ds, query_images, idx, ks, grouping))
            timings["other_engine_s"] = time.perf_counter() - t0
        if cfg.save_topk:
            self.save_topk(ctx, ds, query_images, topk)
        outcomes = self.save_outcomes(ctx, pd.DataFrame({
            "query_image_id": np.array(ds.image_ids, dtype=object)[query_images].astype(str),
            "query_locale": np.array(ds.locales, dtype=object)[query_images].astype(str),
            **per_q, **top_captions(ds, query_images, topk)}), "query_image", "query_image_id",
            "query_locale")
        g = pm.make_grouping(grouping, [(x.code, x.tier) for x in datatables.languages()])
        notes = dict(ds.notes, images_without_captions=int((~has_caps).sum()))
        ad = ctx.adapter
        return TaskOutput(
            task={"name": self.name, "dataset": ds.dataset_id, "data_fingerprint": ds.fingerprint,
                  "n": int(len(query_images)), "source_format": ds.source_format,
                  "n_images": len(ds.image_ids), "n_captions": len(ds.captions), "ks": ks,
                  "list_depth": depth,
                  "ndcg_authors_ideal": f"the whole retrieved top-{depth}, sorted, cut at k",
                  "grouping": grouping, "groups": list(g.names), "target": g.describe_target(),
                  "epsilon": pm.EPSILON, "notes": notes},
            scores=scores,
            settings={"seed": cfg.seed, "retrieval": ret_settings,
                      "conventions": {"query": ad.conventions("image", "query"),
                                      "document": ad.conventions("text", "document")}},
            timings=timings,
            extra={"outcomes": outcomes},
        )

    def other_engine(self, ctx: RunContext, q: Embeddings, d: Embeddings, ks: list[int],
                     depth: int, mine: retrieval.TopK, engine: str,
                     overall: dict[str, Any], score: Any) -> dict[str, Any]:
        """``--compare-engines``: the overall scores of the other engine on the same
        embeddings, and ``difference`` = this run's engine minus the other, per metric."""
        multi = isinstance(q, MultiVector) or isinstance(d, MultiVector)
        if multi or not ctx.adapter.uses_default_similarity():
            return {"engine": engine, "other_engine": None,
                    "note": "not compared: chromadb ranks single-vector cosine models only"}
        other = "exact" if engine == "chromadb" else "chromadb"
        if other == "chromadb" and importlib.util.find_spec("chromadb") is None:
            log.warning("--compare-engines: chromadb is not installed, so only the %s engine "
                        "ran (pip install -e '.[chromadb]')", engine)
            return {"engine": engine, "other_engine": None,
                    "note": "not compared: chromadb is not installed"}
        top, st, _ = self.retrieve(ctx, q, d, ks, depth, engine=other)
        theirs = score(top.indices)[0]["overall"]
        k = ks[-1]
        same = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(
            top.indices[:, :k].tolist(), mine.indices[:, :k].tolist(), strict=True)]))
        return {"engine": engine, "other_engine": other, "other_settings": st,
                "other_overall": theirs,
                "difference": {k: overall[k] - theirs[k] for k in overall if k in theirs},
                f"mean_overlap@{k}": same}

    def retrieve(
        self, ctx: RunContext, q: Embeddings, d: Embeddings, ks: list[int], depth: int,
        engine: str | None = None,
    ) -> tuple[retrieval.TopK, dict[str, Any], dict[str, Any] | None]:
        """Exact top-``depth`` (or two-stage for multi-vector models) and its settings;
        ``engine`` overrides ``--engine``."""
        cfg, ad = self.config, ctx.adapter
        chunk = cfg.chunk_size
        multi = isinstance(q, MultiVector) or isinstance(d, MultiVector)
        bk = retrieval.get_backend(cfg.retrieval_backend, ctx.device or ad.device)
        st: dict[str, Any] = {"method": "exact", "backend": bk.name, "device": bk.device,
                              "chunk_size": chunk, "tie_break": retrieval.TIE_BREAK,
                              "similarity": "maxsim" if multi else "cosine"}
        engine = engine or cfg.engine or (
            "chromadb" if getattr(ad.profile, "profile", None) == "authors" and not multi
            and ad.uses_default_similarity() else "exact")
        st["engine"] = engine
        if engine == "chromadb":
            if multi or not ad.uses_default_similarity():
                raise DataError("--engine chromadb: single-vector cosine models only")
            top = chroma.chromadb_topk(np.asarray(q), np.asarray(d), depth)
            st.update(method="chromadb-hnsw", backend="chromadb", device="cpu",
                      chromadb=chroma.chromadb_version(), hnsw=dict(chroma.CHROMADB_SETTINGS),
                      tie_break="chromadb's order")
            return top, st, None
        if not ad.uses_default_similarity():
            st.update(similarity="adapter.similarity", backend="numpy", device="cpu")
            return retrieval.topk_by_function(
                lambda qs, qe, ds_, de: ad.similarity(take(q, np.arange(qs, qe)),
                                                     take(d, np.arange(ds_, de))),
                len(q), len(d), depth, chunk_size=chunk), st, None
        two = cfg.two_stage
        authors_l2 = getattr(ad.profile, "retrieval", None) == TWO_STAGE_L2
        if (two or authors_l2) and multi:
            two = two or depth
            if two < depth:
                raise DataError(f"--two-stage {two} must be >= the list depth ({depth})")
            metric, ties = ("l2", "shortlist") if authors_l2 else ("cosine", "index")
            st.update(method="two-stage", shortlist=two, shortlist_similarity=(
                "exact L2 of unnormalised mean-pooled token vectors (faiss IndexFlatL2)"
                if authors_l2 else "cosine of mean-pooled token vectors"),
                rerank_ties="shortlist order" if authors_l2 else retrieval.TIE_BREAK)
            top = shortlist.two_stage_topk(q, d, depth, two, chunk_size=chunk, backend=bk,
                                           shortlist_metric=metric, ties=ties)
            rng = np.random.default_rng(cfg.seed)
            m = min(len(q), max(1, cfg.two_stage_check))
            check = np.sort(rng.choice(len(q), m, replace=False))
            exact = retrieval.exact_maxsim_topk(take(q, check), d, depth, chunk_size=chunk,
                                                backend=bk)
            agree = shortlist.topk_agreement(top.indices[check], exact.indices, ks)
            agree["method"] = st["shortlist_similarity"]
            agree["checked_query_positions"] = check.tolist()
            return top, st, agree
        if two:
            log.warning("--two-stage ignored: the model gives single vectors (exact is cheap)")
        top = retrieval.exact_topk(q, d, depth, chunk_size=chunk, backend=bk)
        return top, st, None

    def prefill(self, ctx: RunContext) -> None:
        """``--shard``: embed the images and the captions, no retrieval."""
        embed(ctx, load_data(ctx, self.config))

    def save_topk(self, ctx: RunContext, ds: XM3600, query_images: np.ndarray,
                  topk: retrieval.TopK) -> Path:
        """``<task>.topk.parquet``: one row per (query, rank), written atomically."""
        k = min(topk.indices.shape[1], max(self.config.ks))
        topk = retrieval.TopK(topk.scores[:, :k], topk.indices[:, :k])
        n = topk.indices.shape[0]
        flat = topk.indices.ravel()
        qi = np.repeat(query_images, k)
        ids = np.array(ds.image_ids, dtype=object)
        df = pd.DataFrame({
            "query_image_id": ids[qi],
            "query_locale": np.array(ds.locales, dtype=object)[qi],
            "rank": np.tile(np.arange(1, k + 1), n),
            "caption_index": flat,
            "caption_image_id": ids[ds.caption_image[flat]],
            "caption_language": np.array(ds.caption_language, dtype=object)[flat],
            "score": topk.scores.ravel(),
            "relevant": ds.caption_image[flat] == qi,
        })
        return self.save_parquet(ctx, "topk", df)

    def format_table(self, out: TaskOutput) -> str:
        t, o = out.task, out.scores["overall"]
        head = (f"{'k':>4}{'acc':>8}{'ndcg':>8}{'ndcg_a':>8}{'LBKL':>9}{'DLBKL':>9}"
                f"{'missing':>9}{'LBJS':>8}")
        lines = [f"{self.name}  n={t['n']}  pool={t['n_captions']}  grouping={t['grouping']}",
                 head, "-" * len(head)]
        for k in t["ks"]:
            lines.append(f"{k:>4}{o[f'accuracy@{k}']:>8.3f}{o[f'ndcg@{k}']:>8.3f}"
                         f"{o[f'ndcg_authors@{k}']:>8.3f}{o[f'lbkl@{k}']:>9.3f}"
                         f"{o[f'dlbkl@{k}']:>9.3f}{o[f'missing@{k}']:>9.3f}"
                         f"{o[f'lbjs@{k}']:>8.3f}")
        lines.append("missing: share of top-k lists without a target language group (each "
                     "scores ~P_g ln(1/1e-9) in LBKL); LBJS: Jensen-Shannon, bounded by ln 2")
        return "\n".join(lines)
