"""3XCM association bias: ``3xcm`` (text -> image) and ``3xcm-i2i`` (image -> image).

For each triplet the query (the concept in the query country's native language, or the
query's anchor image for ``3xcm-i2i``) is compared with its semantic, cultural and
non-relevant candidate images; the winner rule, SP, bootstrap intervals and z-scores are in
:mod:`benchmark.metrics.association`. Every unique text and image is embedded once per model
through the embedding cache; scoring from cached embeddings does no model work.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark.cache import EmbedStats, embed_cached
from benchmark.data import DataError
from benchmark.data.xcm import XCMDataset, load_authors_csv, load_release
from benchmark.metrics.association import TIE_ORDER, association_scores, winners, zscores
from benchmark.embeddings import Embeddings
from benchmark.results import model_slug
from benchmark.tasks.base import RunContext, Task, TaskOutput

log = logging.getLogger(__name__)

GROUPINGS = {"country": "query_country", "language": "query_language", "concept": "query_concept"}


def load_xcm(ctx: RunContext) -> XCMDataset:
    """The 3XCM dataset named by the run's arguments (loaded once per run)."""
    if "xcm" in ctx.memo:
        return ctx.memo["xcm"]
    a = ctx.args
    if a.triplets_csv:
        if not a.images:
            raise DataError("--triplets-csv needs --images DIR (files named <image_id>.<ext>)")
        ds = load_authors_csv(a.triplets_csv, a.images, a.queries)
    elif a.dataset:
        ds = load_release(a.dataset, a.revision)
    else:
        raise DataError("3xcm needs --dataset PATH_OR_HUB_ID or --triplets-csv FILE --images DIR")
    log.info("%s: %d triplets, %d images (%s)", ds.dataset_id, len(ds.triplets),
             len(ds.images.ids), ds.source_format)
    ctx.memo["xcm"] = ds
    return ds


def sha_text(t: str) -> str:
    return hashlib.sha256(t.encode("utf-8")).hexdigest()


def embed_texts(ctx: RunContext, texts: list[str], role: str) -> tuple[Embeddings, EmbedStats]:
    return embed_cached(ctx.adapter, "text", role, [sha_text(t) for t in texts],
                        lambda idx: [texts[i] for i in idx], ctx.cache)


def embed_images(
    ctx: RunContext, ds: XCMDataset, ids: list[str], role: str
) -> tuple[Embeddings, EmbedStats]:
    def load(idx: list[int]) -> Any:
        wanted = [ids[i] for i in idx]
        ds.images.check_decodable(wanted)
        return ds.images.load(wanted)

    return embed_cached(ctx.adapter, "image", role, [ds.images.sha256[i] for i in ids], load,
                        ctx.cache)


class XCMTextToImage(Task):
    name = "3xcm"
    description = "association bias, text -> image: native-language concept vs 3 images (SP)"
    query_modality = "text"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        g = parser.add_argument_group("3xcm tasks")
        g.add_argument("--triplets-csv", type=Path,
                       help="the authors' triplet CSV (xcm-bench.csv columns) instead of --dataset")
        g.add_argument("--images", type=Path, help="folder of <image_id>.<ext> (with --triplets-csv)")
        g.add_argument("--queries", type=Path,
                       help="CSV concept,language,text of query texts (default: data/queries.csv)")
        g.add_argument("--bootstrap", type=int, default=1000,
                       help="bootstrap resamples for SP intervals (default 1000)")
        g.add_argument("--save-per-triplet", action="store_true",
                       help="also write <task>.per_triplet.parquet with every triplet's scores")

    def similarities(self, ctx: RunContext, ds: XCMDataset) -> tuple[np.ndarray, dict[str, Any]]:
        """(N, 3) similarities and the embedding timings."""
        tr = ds.triplets
        cand_cols = ["semantic_image_id", "cultural_image_id", "non_relevant_image_id"]
        img_ids = sorted(set(tr[cand_cols].to_numpy().ravel()))
        pos = {iid: i for i, iid in enumerate(img_ids)}
        timings: dict[str, Any] = {}
        if self.query_modality == "text":
            texts = sorted(set(tr["query_text"]))
            q_emb, qs = embed_texts(ctx, texts, "query")
            q_idx = tr["query_text"].map({t: i for i, t in enumerate(texts)}).to_numpy()
            timings["embed_texts_s"], timings["text_embedding"] = qs.seconds, vars(qs)
        else:
            qids = sorted(set(tr["query_image_id"]))
            q_emb, qs = embed_images(ctx, ds, qids, "query")
            q_idx = tr["query_image_id"].map({t: i for i, t in enumerate(qids)}).to_numpy()
            timings["embed_query_images_s"], timings["query_image_embedding"] = qs.seconds, vars(qs)
        d_emb, ds_ = embed_images(ctx, ds, img_ids, "document")
        timings["embed_images_s"], timings["image_embedding"] = ds_.seconds, vars(ds_)
        t0 = time.perf_counter()
        sims = ctx.adapter.indexed_pair_similarity(
            q_emb, q_idx, d_emb, [tr[c].map(pos).to_numpy() for c in cand_cols]
        ).astype(np.float64)
        timings["similarity_s"] = time.perf_counter() - t0
        return sims, timings

    def run(self, ctx: RunContext) -> TaskOutput:
        ds = load_xcm(ctx)
        sims, timings = self.similarities(ctx, ds)
        t0 = time.perf_counter()
        tr = ds.triplets
        scores = association_scores(
            sims, {k: tr[c].to_numpy() for k, c in GROUPINGS.items()},
            n_resamples=ctx.args.bootstrap, seed=ctx.args.seed,
        )
        timings["scoring_s"] = time.perf_counter() - t0
        if ctx.args.save_per_triplet:
            self.save_per_triplet(ctx, tr, sims)
        a = ctx.adapter
        return TaskOutput(
            task={"name": self.name, "dataset": ds.dataset_id, "data_fingerprint": ds.fingerprint,
                  "n": len(tr), "source_format": ds.source_format,
                  "query_modality": self.query_modality, "n_images": len(ds.images.ids)},
            scores=scores,
            settings={
                "seed": ctx.args.seed, "bootstrap_resamples": ctx.args.bootstrap,
                "bootstrap_method": "percentile; multinomial resampling of triplet outcomes",
                "tie_order": TIE_ORDER,
                "similarity": "maxsim" if a.multi_vector else "cosine",
                "z_score": "all 3N similarities, one mean, population std (ddof=0)",
                "conventions": {
                    "query": a.conventions(self.query_modality, "query"),
                    "document": a.conventions("image", "document"),
                },
            },
            timings=timings,
        )

    def save_per_triplet(self, ctx: RunContext, tr: pd.DataFrame, sims: np.ndarray) -> Path:
        winner, ties = winners(sims)
        z = zscores(sims)
        df = tr[["triplet_id", "query_concept", "query_country", "query_language",
                 "query_text"]].copy()
        for j, k in enumerate(("sem", "cul", "non")):
            df[f"sim_{k}"] = sims[:, j]
            df[f"z_{k}"] = z[:, j]
        df["winner"] = np.array(TIE_ORDER)[winner]
        df["tie"] = ties
        path = ctx.output_dir / model_slug(ctx.adapter.spec.name) / f"{self.name}.per_triplet.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        return path

    def format_table(self, out: TaskOutput) -> str:
        return format_sp_table(out.scores, f"{self.name}  n={out.task['n']}")


def _fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def format_sp_table(scores: dict[str, Any], title: str) -> str:
    """Overall and per-country rows: n, M_sem, M_cul, M_non, SP [95% CI], ties."""
    head = f"{'':<10}{'n':>7}{'M_sem':>8}{'M_cul':>8}{'M_non':>8}{'SP':>8}  {'SP 95% CI':<17}{'ties':>5}"
    lines = [title, head, "-" * len(head)]

    def row(label: str, s: dict[str, Any]) -> str:
        lo, hi = s["SP_ci95"]
        ci = f"[{_fmt(lo)}, {_fmt(hi)}]"
        return (f"{label:<10}{s['n']:>7}{_fmt(s['M_sem']):>8}{_fmt(s['M_cul']):>8}"
                f"{_fmt(s['M_non']):>8}{_fmt(s['SP']):>8}  {ci:<17}{s['ties']:>5}")

    lines.append(row("overall", scores["overall"]))
    for code, s in scores.get("by_country", {}).items():
        lines.append(row(code, s))
    return "\n".join(lines)


class XCMImageToImage(XCMTextToImage):
    name = "3xcm-i2i"
    description = "association bias, image -> image: the query's anchor image vs 3 images"
    query_modality = "image"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Shares the 3xcm flags (added once by XCMTextToImage)."""
