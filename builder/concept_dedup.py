"""Stage ``concept_dedup``: merge near-synonymous concepts.

BGE-M3 cosine >= ``--threshold``, union-find clusters, curated names kept, in one transaction;
``exports/concept_merges.csv`` lists every merge. docs/builder.md, "Stage concept_dedup"."""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from builder import stagekit
from builder.catalog import Catalog
from builder.stagekit import StageInputError
from builder.statuses import ConceptStatus
from builder.table_export import write_csv
from builder.text_embedders import TextEncoder, make_encoder
from builder.unionfind import UnionFind
from core.options import from_args, option

log = logging.getLogger(__name__)

STAGE = "concept_dedup"
REPORT = "concept_merges.csv"
DEFAULT_THRESHOLD = 0.92


@dataclass
class ConceptDedupConfig:
    """The stage's flags (``core.options``)."""

    threshold: float = option(f"cosine link threshold (default {DEFAULT_THRESHOLD})",
                              DEFAULT_THRESHOLD)
    embedder: str = option("bge-m3 (BAAI/bge-m3), bge-m3:/local/dir, or hash (test fake)",
                           "bge-m3")
    device: str | None = option("cpu / cuda / cuda:1 (default: cuda if present)", None)
    batch_size: int = option("texts per embedding batch", 32)
    keep_uncurated: bool = option("keep clusters without a curated member (default: dropped)",
                                  False)


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarities of L2-normalised float32 rows (float32 out)."""
    v = np.asarray(vectors, dtype=np.float32)
    return (v @ v.T).astype(np.float32)


def clusters(sim: np.ndarray, threshold: float) -> list[list[int]]:
    """Connected components of the graph ``sim[i, j] >= threshold``, by first member."""
    n = sim.shape[0]
    uf = UnionFind(n)
    ii, jj = np.nonzero(np.triu(sim >= np.float32(threshold), k=1))
    for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
        uf.union(i, j)
    return uf.groups(range(n))


@dataclass(frozen=True)
class Decision:
    name: str
    status: str  # kept / merged / dropped
    merged_into: str | None
    similarity: float | None
    reason: str | None
    cluster: int
    cluster_size: int
    link: str | None = None  # the member it is most similar to above the threshold
    link_similarity: float | None = None


def decide(names: list[str], sim: np.ndarray, threshold: float, curated: set[str],
           freq: dict[str, int], keep_uncurated: bool = False) -> list[Decision]:
    """The kept / merged / dropped decision of every concept (pure)."""
    out: list[Decision] = []
    curated_mode = bool(curated)
    for cid, members in enumerate(clusters(sim, threshold)):
        cur = [m for m in members if names[m] in curated]
        if cur:
            reps = cur
        else:
            reps = [min(members, key=lambda m: (-freq.get(names[m], 0), len(names[m]), names[m]))]
        drop = curated_mode and not cur and not keep_uncurated
        for m in members:
            if m in reps:
                status, reason = ((ConceptStatus.DROPPED, "not in the curated list") if drop
                                  else (ConceptStatus.KEPT, None))
                out.append(Decision(names[m], status, None, None, reason, cid, len(members)))
                continue
            rep = max(reps, key=lambda r: (float(sim[m, r]), -r))
            others = [o for o in members if o != m]
            link = max(others, key=lambda o: (float(sim[m, o]), -o))
            out.append(Decision(names[m], "merged", names[rep], round(float(sim[m, rep]), 6),
                                f"cosine >= {threshold} cluster", cid, len(members), names[link],
                                round(float(sim[m, link]), 6)))
    return sorted(out, key=lambda d: d.name)


def run_concept_dedup(catalog: Catalog, encoder: TextEncoder,
                      threshold: float = DEFAULT_THRESHOLD, keep_uncurated: bool = False) -> dict:
    """Embed, cluster and record the decision; write the merge report; return the counts."""
    if not 0.0 < threshold <= 1.0:
        raise StageInputError(f"--threshold must be in (0, 1], got {threshold}")
    rows = catalog.query("SELECT name, source FROM concepts ORDER BY name")
    if not rows:
        raise StageInputError("no concepts in the catalog: run `python -m builder.concepts` first")
    names = [r["name"] for r in rows]
    curated = {r["name"] for r in rows if r["source"] == "curated"}
    freq = catalog.pairs("SELECT concept, COUNT(*) FROM concept_instances GROUP BY concept")
    params = {"threshold": threshold, "embedder": encoder.name, "keep_uncurated": keep_uncurated}
    with stagekit.stage_run(catalog, STAGE, params, inputs=names) as rec:
        vecs = encoder.encode(names)
        sim = cosine_matrix(vecs)
        decisions = decide(names, sim, threshold, curated, freq, keep_uncurated)
        with catalog.tx() as con:
            con.executemany(
                "UPDATE concepts SET status=?, merged_into=?, similarity=?, reason=?, run_id=?"
                " WHERE name=?", [(d.status, d.merged_into, d.similarity, d.reason, rec.run_id,
                                   d.name) for d in decisions])
        report = write_report(catalog.workdir.exports_dir / REPORT, decisions)
        by_status = Counter(d.status for d in decisions)
        sizes = Counter(d.cluster_size for d in decisions if d.status != "merged")
        rec.counts = {
            "by_status": dict(by_status),
            "clusters": len({d.cluster for d in decisions}),
            "cluster_sizes": {str(k): v for k, v in sorted(sizes.items())},
            "report": str(report.name),
        }
        top = Counter(d.merged_into for d in decisions if d.merged_into)
        rec.summary = stagekit.format_summary(
            f"concept_dedup: {len(names)} concepts -> {by_status.get('kept', 0)} kept "
            f"(threshold {threshold}, {encoder.name})",
            {"by status": by_status, "clusters by size": {f"size {k}": v for k, v in sizes.items()},
             "most merged into": top})
    log.debug("%s", rec.summary)
    return rec.counts


def write_report(path: Path, decisions: list[Decision]) -> Path:
    """CSV of every merged pair: concept, merged_into, similarity, link, cluster."""
    write_csv(path, ["concept", "merged_into", "similarity", "linked_by", "link_similarity",
                     "cluster", "cluster_size"],
              [[d.name, d.merged_into, f"{d.similarity:.6f}", d.link, f"{d.link_similarity:.6f}",
                d.cluster, d.cluster_size]
               for d in sorted(decisions, key=lambda d: (d.cluster, d.name))
               if d.status == "merged"])
    return path


def build_parser() -> argparse.ArgumentParser:
    return stagekit.stage_parser("builder.concept_dedup", __doc__, ConceptDedupConfig)


def _cli(args: argparse.Namespace) -> int:
    cfg = from_args(ConceptDedupConfig, args)
    encoder = make_encoder(cfg.embedder, device=cfg.device, batch_size=cfg.batch_size)
    with Catalog.open(args.workdir) as catalog:
        run_concept_dedup(catalog, encoder, cfg.threshold, cfg.keep_uncurated)
        stagekit.report_run(catalog, STAGE)
    return 0


def main(argv: list[str] | None = None) -> int:
    return stagekit.stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
