"""3XCM association bias: ``3xcm`` (text -> image) and ``3xcm-i2i`` (image -> image).

Each triplet's query (its text, or its anchor image for ``3xcm-i2i``) is compared with its
three candidate images and scored by :mod:`benchmark.metrics.association`; every unique text
and image is embedded once per model through the embedding cache.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark.data import query_texts
from benchmark.data.dataset import XCMDataset
from benchmark.data.layouts import open_xcm
from benchmark.embeddings import Embeddings
from benchmark.metrics.association import (
    CI_METHODS,
    CI_TEXT,
    ESTIMAND,
    TIE_ORDER,
    TIE_RULES,
    association_scores,
    sp_interval,
    sp_value,
    winners,
    zscores,
)
from benchmark.models.base import Adapter
from benchmark.tasks.base import (
    RunContext,
    Task,
    TaskConfig,
    TaskOutput,
    embed_images,
    embed_texts,
)
from core.options import option

log = logging.getLogger(__name__)

GROUPINGS = {"country": "query_country", "language": "query_language", "concept": "query_concept"}
CANDIDATE_COLUMNS = ["semantic_image_id", "cultural_image_id", "non_relevant_image_id"]


@dataclass
class AssociationConfig(TaskConfig):
    """The 3XCM data, its query texts and the intervals: what ``3xcm*`` and ``analyze`` read."""

    triplets_csv: Path | None = option(
        "the authors' triplet CSV (xcm-bench.csv columns): with --images DIR instead of "
        "--dataset, or with --dataset in the authors' published layout instead of its "
        "benchmark config", None)
    images: Path | None = option("folder of <image_id>.<ext> (with --triplets-csv)", None)
    query_source: str = option(query_texts.SOURCE_HELP, "auto", metavar="SOURCE")
    query_term: str = option(query_texts.QUERY_TERM_HELP, "own", choices=list(query_texts.QUERY_TERMS))
    bootstrap: int = option("resamples of the --ci iid intervals (default 1000)", 1000,
                            minimum=0)
    ci: str = option("intervals: cluster (default; over concepts: what generalises to other "
                     "concepts) or iid (the earlier triplet bootstrap, for comparison)",
                     "cluster", choices=list(CI_METHODS))
    ties: str = option("a tie for the best similarity: order (default; the authors' rule: "
                       "semantic > cultural > non-relevant) or split (each tied candidate "
                       "1/m of a win)", "order", choices=list(TIE_RULES))


def interval_settings(cfg: AssociationConfig) -> dict[str, Any]:
    """What a 3XCM result records about its intervals and ties."""
    return {"seed": cfg.seed, "ci": cfg.ci, "ci_method": CI_TEXT[cfg.ci],
            "estimand": ESTIMAND[cfg.ci], "ci_level": 0.95,
            "bootstrap_resamples": cfg.bootstrap,  # used by --ci iid only
            "ties": cfg.ties, "tie_order": TIE_ORDER,
            "mde": "smallest true difference from a fixed value detected with 80% power by "
                   "a two-sided t test at 0.05 with these units"}


@dataclass
class XCMConfig(AssociationConfig):
    """``3xcm`` and ``3xcm-i2i``."""

    save_per_triplet: bool = option(
        "also write <task>.per_triplet.parquet with every triplet's scores", False)


def load_xcm(ctx: RunContext, cfg: AssociationConfig, *, with_texts: bool = True) -> XCMDataset:
    """The 3XCM dataset ``cfg`` names, loaded once per run; ``with_texts``: with the query
    texts of ``cfg`` applied and their provenance recorded (``ds.query_texts``)."""
    key = ("xcm", cfg.dataset, cfg.revision, cfg.triplets_csv, cfg.images)
    if key not in ctx.memo:
        ds = open_xcm(cfg, ctx.hash_memo)
        log.info("%s: %d triplets, %d images (%s)", ds.dataset_id, len(ds.triplets),
                 len(ds.images.ids), ds.source_format)
        ctx.memo[key] = ds
    ds = ctx.memo[key]
    if not with_texts:
        return ds
    tkey = (*key, "texts", cfg.query_source, cfg.query_term)
    if tkey not in ctx.memo:
        ctx.memo[tkey] = query_texts.with_texts(ds, cfg.query_source, cfg.query_term)
    return ctx.memo[tkey]


def embed_candidates(
    ctx: RunContext, ds: XCMDataset,
) -> tuple[Embeddings, list[np.ndarray], dict[str, Any]]:
    """Document embeddings of every candidate image, per candidate column the index of each
    triplet's image into them, and the embedding timings."""
    tr = ds.triplets
    img_ids = sorted(set(tr[CANDIDATE_COLUMNS].to_numpy().ravel()))
    pos = {iid: i for i, iid in enumerate(img_ids)}
    d_emb, st = embed_images(ctx, ds, img_ids, "document")
    return (d_emb, [tr[c].map(pos).to_numpy() for c in CANDIDATE_COLUMNS],
            {"embed_images_s": st.seconds, "image_embedding": vars(st)})


def similarity_settings(adapter: Adapter, query_modality: str) -> dict[str, Any]:
    """How a 3XCM task scored: the similarity and the conventions of both sides."""
    return {"similarity": adapter.spec.similarity,
            "conventions": {"query": adapter.conventions(query_modality, "query"),
                            "document": adapter.conventions("image", "document")}}


#: the columns of a triplet that its outcome row repeats, so that a gallery (benchmark report)
#: can show the triplet with no other file than the images
OUTCOME_TRIPLET_COLUMNS = ["query_concept", "query_text", "query_image_id", *CANDIDATE_COLUMNS]
SIM_COLUMNS = ["sim_semantic", "sim_cultural", "sim_non_relevant"]


def outcome_frame(tr: pd.DataFrame, sims: np.ndarray) -> pd.DataFrame:
    """The per-triplet outcomes: id, query country, winner (0 semantic, 1 cultural,
    2 non-relevant), the triplet's query and candidates, and the three similarities."""
    return pd.DataFrame({
        "triplet_id": tr["triplet_id"].astype(str).to_numpy(),
        "query_country": tr["query_country"].astype(str).to_numpy(),
        "winner": winners(sims)[0].astype(np.int8),
        **{c: tr[c].astype(str).to_numpy() for c in OUTCOME_TRIPLET_COLUMNS},
        **{c: sims[:, j] for j, c in enumerate(SIM_COLUMNS)}})


class XCMTextToImage(Task):
    name = "3xcm"
    description = "association bias, text -> image: native-language concept vs 3 images (SP)"
    config_class = XCMConfig
    config: XCMConfig
    query_modality = "text"

    def embed_queries(self, ctx: RunContext, ds: XCMDataset
                      ) -> tuple[Embeddings, np.ndarray, dict[str, Any]]:
        """The distinct queries' embeddings, each triplet's index into them, the timings."""
        text = self.query_modality == "text"
        col = ds.triplets["query_text" if text else "query_image_id"]
        items = sorted(set(col))
        q_emb, qs = (embed_texts(ctx, items, "query") if text
                     else embed_images(ctx, ds, items, "query"))
        q_idx = col.map({t: i for i, t in enumerate(items)}).to_numpy()
        what = "text" if text else "query_image"
        return q_emb, q_idx, {f"embed_{what}s_s": qs.seconds, f"{what}_embedding": vars(qs)}

    def similarities(self, ctx: RunContext, ds: XCMDataset) -> tuple[np.ndarray, dict[str, Any]]:
        """(N, 3) similarities and the embedding timings."""
        q_emb, q_idx, timings = self.embed_queries(ctx, ds)
        d_emb, cand_idx, d_timings = embed_candidates(ctx, ds)
        timings.update(d_timings)
        t0 = time.perf_counter()
        sims = ctx.adapter.indexed_pair_similarity(q_emb, q_idx, d_emb, cand_idx).astype(np.float64)
        timings["similarity_s"] = time.perf_counter() - t0
        return sims, timings

    def run(self, ctx: RunContext) -> TaskOutput:
        cfg = self.config
        ds = load_xcm(ctx, cfg)
        if self.query_modality == "text":  # image queries score no term
            query_texts.warn_unreviewed(ds.query_texts, ctx.memo)
        sims, timings = self.similarities(ctx, ds)
        t0 = time.perf_counter()
        tr = ds.triplets
        scores = association_scores(
            sims, {k: tr[c].to_numpy() for k, c in GROUPINGS.items()},
            n_resamples=cfg.bootstrap, seed=cfg.seed, ci=cfg.ci, ties=cfg.ties,
        )
        timings["scoring_s"] = time.perf_counter() - t0
        if cfg.save_per_triplet:
            self.save_per_triplet(ctx, tr, sims)
        outcomes = self.save_outcomes(ctx, outcome_frame(tr, sims), "triplet", "triplet_id",
                                      "query_country")
        outcomes["winner_codes"] = {"0": "semantic", "1": "cultural", "2": "non_relevant"}
        return TaskOutput(
            task={"name": self.name, "dataset": ds.dataset_id, "data_fingerprint": ds.fingerprint,
                  "n": len(tr), "source_format": ds.source_format,
                  "query_modality": self.query_modality, "n_images": len(ds.images.ids),
                  "query_texts": ds.query_texts, **({"notes": ds.notes} if ds.notes else {})},
            scores=scores,
            settings={
                **interval_settings(cfg),
                "z_score": "all 3N similarities, one mean, population std (ddof=0)",
                **similarity_settings(ctx.adapter, self.query_modality),
            },
            timings=timings,
            extra={"outcomes": outcomes},
        )

    def prefill(self, ctx: RunContext) -> None:
        """``--shard``: embed the query texts (or images) and the candidate images, no scoring."""
        ds = load_xcm(ctx, self.config)
        self.embed_queries(ctx, ds)
        embed_candidates(ctx, ds)

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
        return self.save_parquet(ctx, "per_triplet", df)

    def format_table(self, out: TaskOutput) -> str:
        return format_sp_table(out.scores, f"{self.name}  n={out.task['n']}")


def _fmt(x: float | None, nd: int = 3) -> str:
    if x is None:
        return "-"
    return "∞" if x == float("inf") else f"{x:.{nd}f}"


def format_sp_table(scores: dict[str, Any], title: str) -> str:
    """Overall and per-country rows: n, each win rate and SP with its 95% interval, ties; and
    what the run can tell apart (80% power at 0.05)."""
    def ci(lo: float | None, hi: float | None, nd: int = 2) -> str:
        return f"[{_fmt(lo, nd)}, {_fmt(hi, nd)}]"

    head = (f"{'':<9}{'n':>6}  {'M_sem [95% CI]':<21}{'M_cul [95% CI]':<21}"
            f"{'M_non [95% CI]':<21}{'SP [95% CI]':<24}{'ties':>4}")
    lines = [title, head, "-" * len(head)]

    def row(label: str, s: dict[str, Any]) -> str:
        m = [f"{_fmt(s[k])} {ci(*(s.get(f'{k}_ci95') or [None, None]))}"
             for k in ("M_sem", "M_cul", "M_non")]
        sp = f"{_fmt(sp_value(s))} {ci(*sp_interval(s), nd=3)}"
        return f"{label:<9}{s['n']:>6}  {m[0]:<21}{m[1]:<21}{m[2]:<21}{sp:<24}{s['ties']:>4}"

    lines.append(row("overall", scores["overall"]))
    for code, s in scores.get("by_country", {}).items():
        lines.append(row(code, s))
    if any(sp_value(s) == float("inf") for s in [scores["overall"],
                                                 *scores.get("by_country", {}).values()]):
        lines.append("SP ∞: no semantic win (the most self-preference there can be)")
    mde = scores["overall"].get("mde") or {}
    if mde.get("SP") is not None:
        lines.append(f"this run cannot tell apart differences below ΔSP {mde['SP']:.3f}, ΔM_sem "
                     f"{_fmt(mde.get('M_sem'))}, ΔM_cul {_fmt(mde.get('M_cul'))} (overall, 80% "
                     "power, α = 0.05)")
    return "\n".join(lines)


class XCMImageToImage(XCMTextToImage):
    name = "3xcm-i2i"
    description = "association bias, image -> image: the query's anchor image vs 3 images"
    query_modality = "image"
