"""Stage ``image_dedup``: near-duplicate groups within each concept, by perceptual hashes and
image embeddings; one transaction per concept, reviewed groups left alone. docs/crawl.md."""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from builder import stagekit
from builder.catalog import Catalog
from builder.stagekit import StageInputError
from builder.statuses import USABLE_ITEMS, DedupStatus, ItemStatus
from builder.unionfind import UnionFind
from core.clikit import report
from core.errors import DataError
from core.options import from_args, option
from core.provenance import utcnow

log = logging.getLogger(__name__)

STAGE = "image_dedup"
OPEN = (*USABLE_ITEMS, ItemStatus.DUPLICATE, ItemStatus.NEAR_DUPLICATE, ItemStatus.NEEDS_REVIEW)


@dataclass
class DedupConfig:
    """The stage's parameters; the ``option`` fields are its flags."""

    phash_distance: int = option("max Hamming distance (0-64)", 4, minimum=0, maximum=64)
    cosine: float = option("automatic cosine threshold", 0.95, minimum=-1.0, maximum=1.0)
    review_cosine: float = option("lower bound of the review band [review-cosine, cosine)",
                                  0.90, minimum=-1.0, maximum=1.0)
    model: str | None = option("any registered image model (python -m benchmark ls), or "
                               "'none'", "clip-l14")  # None: perceptual hashes only
    concepts: str = option("all or a comma-separated list of concepts", "all")
    batch_size: int = option("images per embedding batch", 64, minimum=1)
    embed_chunk: int = 1024  # images decoded at once for embedding
    block_elements: int = 8_000_000  # pairwise block size (rows x columns)
    cache_dir: str | None = option("embedding cache (default $XCM_CACHE_DIR)", None)
    pair_device: str | None = None  # torch device of the pairwise products; None: numpy


def phash_hex(path: Any) -> str:
    """64-bit ``imagehash.phash`` (16 hex digits) of the evaluator's decoder's picture."""
    import imagehash

    from core.decode import decode_image, read_image_file

    return str(imagehash.phash(decode_image(read_image_file(path), str(path))))


def ensure_phashes(catalog: Catalog, shas: list[str]) -> dict[str, str | None]:
    """phash per sha256, computing (and caching in ``images.phash``) the missing ones."""
    rows = {r["sha256"]: r for r in catalog.query(
        "SELECT sha256, ext, phash FROM images WHERE sha256 IN "
        "(SELECT value FROM json_each(?))", (json.dumps(shas),))}
    out: dict[str, str | None] = {s: rows[s]["phash"] if s in rows else None for s in shas}
    todo = [s for s in shas if s in rows and not rows[s]["phash"]]
    new: list[tuple[str, str]] = []
    for sha in todo:
        try:
            out[sha] = phash_hex(catalog.workdir.image_path(sha, rows[sha]["ext"]))
            new.append((out[sha], sha))
        except (OSError, DataError) as e:
            log.warning("cannot hash stored image %s: %s", sha, e)
    if new:
        with catalog.tx() as con:
            con.executemany("UPDATE images SET phash=? WHERE sha256=?", new)
    return out


def _exts(catalog: Catalog, shas: list[str]) -> dict[str, str]:
    return catalog.pairs("SELECT sha256, ext FROM images WHERE sha256 IN "
                         "(SELECT value FROM json_each(?))", (json.dumps(shas),))


def embeddings_for(adapter: Any, cache: Any, catalog: Catalog, shas: list[str],
                   chunk: int) -> np.ndarray:
    """Unit-norm image embeddings (n, d) for ``shas``, via the embedding cache, in chunks."""
    from benchmark.cache import embed_cached
    from core.decode import decode_image, read_image_file
    from core.vectors import l2_normalize

    ext = _exts(catalog, shas)
    parts = []
    for s in range(0, len(shas), chunk):
        keys = shas[s:s + chunk]

        def load(idx: list[int], keys: list[str] = keys) -> list[Any]:
            return [decode_image(read_image_file(
                catalog.workdir.image_path(keys[i], ext[keys[i]])), keys[i]) for i in idx]

        emb, _ = embed_cached(adapter, "image", "document", keys, load, cache)
        parts.append(np.asarray(emb, np.float32))
    return l2_normalize(np.concatenate(parts)) if parts else np.zeros((0, 0), np.float32)


def phash_ints(hexes: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes, validity mask) from hex strings (None -> invalid)."""
    vals = np.array([int(h, 16) if h else 0 for h in hexes], dtype=np.uint64)
    return vals, np.array([h is not None for h in hexes], dtype=bool)


def pair_device(adapter: Any) -> str | None:
    """Where the pairwise products run: torch on the model's GPU, else numpy (None)."""
    from core.devices import torch_device

    return torch_device("auto", str(getattr(adapter, "device", "") or "cpu"))


def _cosine_blocks(emb: np.ndarray, device: str | None) -> Any:
    """``f(r0, r1)`` -> cosines of rows r0:r1 against rows r0: (numpy, or torch on ``device``)."""
    if device is None:
        return lambda r0, r1: emb[r0:r1] @ emb[r0:].T
    import torch

    t = torch.from_numpy(np.ascontiguousarray(emb)).to(device)
    return lambda r0, r1: (t[r0:r1] @ t[r0:].T).float().cpu().numpy()


def candidate_pairs(hashes: np.ndarray, valid: np.ndarray, emb: np.ndarray | None,
                    max_distance: int, min_cosine: float, block_elements: int,
                    device: str | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, distance, cosine) of all pairs i < j with phash distance <= ``max_distance`` or
    cosine >= ``min_cosine`` (NaN without embeddings), in blocks of ``block_elements``."""
    n = len(hashes)
    rows = max(1, min(n, block_elements // max(n, 1)))
    upper = np.triu(np.ones((rows, rows), dtype=bool), k=1)  # j > i inside the diagonal block
    all_valid = bool(valid.all())
    out_i, out_j, out_d, out_c = [], [], [], []
    cos_block = _cosine_blocks(emb, device) if emb is not None and emb.size else None
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        dist = np.bitwise_count(hashes[r0:r1, None] ^ hashes[None, r0:])  # uint8
        hit = dist <= max_distance
        if not all_valid:
            hit[~valid[r0:r1], :] = False
            hit[:, ~valid[r0:]] = False
        cos = None
        if cos_block is not None:
            cos = cos_block(r0, r1)
            hit |= cos >= min_cosine
        hit[:, : r1 - r0] &= upper[: r1 - r0, : r1 - r0]
        bi, bj = np.nonzero(hit)
        d = dist[bi, bj].astype(np.int16)
        if not all_valid:
            d[~(valid[bi + r0] & valid[bj + r0])] = 99
        out_i.append(bi + r0)
        out_j.append(bj + r0)
        out_d.append(d)
        out_c.append(cos[bi, bj] if cos is not None else np.full(len(bi), np.nan, np.float32))
    if not out_i:
        e = np.zeros(0, np.int64)
        return e, e, e.astype(np.int16), e.astype(np.float32)
    return (np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_d),
            np.concatenate(out_c).astype(np.float32))


@dataclass
class Item:
    item_id: int
    sha256: str
    rank: int
    pixels: int


def _keep_key(it: Item) -> tuple[int, int, int]:
    """Sort key of the keep rule: largest resolution, then best rank, then lowest item id."""
    return (-it.pixels, it.rank, it.item_id)


def group_concept(items: list[Item], hashes: np.ndarray, valid: np.ndarray,
                  emb: np.ndarray | None, cfg: DedupConfig) -> list[dict[str, Any]]:
    """Groups of one concept: each a dict with members, kept, status, per-item decisions."""
    n = len(items)
    low = min(cfg.review_cosine, cfg.cosine)
    i, j, d, c = candidate_pairs(hashes, valid, emb, cfg.phash_distance, low, cfg.block_elements,
                                 cfg.pair_device)
    auto = (d <= cfg.phash_distance) | (c >= cfg.cosine)
    uf_auto, uf_all = UnionFind(n), UnionFind(n)
    for a, b, is_auto in zip(i.tolist(), j.tolist(), auto.tolist(), strict=True):
        uf_all.union(a, b)
        if is_auto:
            uf_auto.union(a, b)
    edges: dict[int, list[list[Any]]] = {}
    for a, b, dd, cc in zip(i.tolist(), j.tolist(), d.tolist(), c.tolist(), strict=True):
        edges.setdefault(uf_all.find(a), []).append(
            [items[a].item_id, items[b].item_id, int(dd) if dd < 99 else None,
             None if np.isnan(cc) else round(float(cc), 4)])

    def evidence(a: int, b: int) -> dict[str, Any]:
        dist = int(np.bitwise_count(hashes[a] ^ hashes[b])) if valid[a] and valid[b] else None
        cos = round(float(emb[a] @ emb[b]), 4) if emb is not None and emb.size else None
        return {"phash_distance": dist, "cosine": cos}

    groups = []
    for members in uf_all.groups(range(n)):
        if len(members) < 2:
            continue
        decisions: dict[int, tuple[str, str, dict[str, Any]]] = {}
        reps = []
        for sub in uf_auto.groups(members):
            keep = min(sub, key=lambda m: _keep_key(items[m]))
            reps.append(keep)
            for m in sub:
                if m == keep:
                    continue
                ev = {"kept_item": items[keep].item_id, **evidence(m, keep)}
                same = items[m].sha256 == items[keep].sha256
                decisions[items[m].item_id] = (
                    ItemStatus.DUPLICATE if same else ItemStatus.NEAR_DUPLICATE,
                    f"{'same bytes as' if same else 'near duplicate of'} item "
                    f"{items[keep].item_id} (phash distance {ev['phash_distance']}, "
                    f"cosine {ev['cosine']})", ev)
        best = min(reps, key=lambda m: _keep_key(items[m]))
        review = len(reps) > 1
        for r in reps:
            if review:
                others = [items[o].item_id for o in reps if o != r]
                decisions[items[r].item_id] = (
                    ItemStatus.NEEDS_REVIEW, f"similar to items {others} (cosine in the review band "
                    f"[{low}, {cfg.cosine}))", {"similar_items": others})
            else:
                decisions[items[r].item_id] = (ItemStatus.KEPT, "kept for its group", {})
        groups.append({
            "members": sorted(items[m].item_id for m in members),
            "kept": items[best].item_id,
            "status": DedupStatus.NEEDS_REVIEW if review else DedupStatus.AUTO,
            "edges": edges.get(uf_all.find(members[0]), []),
            "decisions": decisions,
        })
    return groups


def _concept_items(catalog: Catalog, concept: str) -> list[Item]:
    marks = ",".join("?" * len(OPEN))
    rows = catalog.query(
        f"SELECT i.item_id, i.sha256, i.rank, im.width * im.height AS px FROM items i "
        f"JOIN images im ON im.sha256 = i.sha256 WHERE i.concept=? AND i.status IN ({marks}) "
        f"AND (i.group_id IS NULL OR i.group_id NOT IN "
        f"(SELECT group_id FROM dedup_groups WHERE status=?)) ORDER BY i.item_id",
        (concept, *OPEN, DedupStatus.REVIEWED))
    return [Item(r["item_id"], r["sha256"], r["rank"], r["px"]) for r in rows]


def _drop_missing(catalog: Catalog, items: list[Item]) -> set[int]:
    """Items whose stored image file is gone: marked failed (never silently skipped)."""
    ext = _exts(catalog, [it.sha256 for it in items])
    gone = {it.item_id for it in items
            if not catalog.workdir.image_path(it.sha256, ext.get(it.sha256, "")).is_file()}
    if gone:
        with catalog.tx() as con:
            con.executemany("UPDATE items SET status=?, reason=?, updated_at=? WHERE item_id=?",
                            [(ItemStatus.FAILED, "image_dedup: stored image file is missing",
                              utcnow(), i) for i in sorted(gone)])
    return gone


def dedup_concept(catalog: Catalog, concept: str, cfg: DedupConfig, adapter: Any, cache: Any,
                  run_id: int) -> Counter[str]:
    """Recompute one concept's groups and statuses in a single transaction."""
    items = _concept_items(catalog, concept)
    missing = _drop_missing(catalog, items)
    items = [it for it in items if it.item_id not in missing]
    shas = list(dict.fromkeys(it.sha256 for it in items))
    ph = ensure_phashes(catalog, shas)
    hashes, valid = phash_ints([ph[it.sha256] for it in items])
    emb = None
    if adapter is not None and items:
        uniq = embeddings_for(adapter, cache, catalog, shas, cfg.embed_chunk)
        pos = {s: k for k, s in enumerate(shas)}
        emb = uniq[[pos[it.sha256] for it in items]]
    groups = group_concept(items, hashes, valid, emb, cfg)
    counts: Counter[str] = Counter()
    now = utcnow()
    with catalog.tx() as con:
        ids = [it.item_id for it in items]
        con.execute("DELETE FROM dedup_groups WHERE concept=? AND status != ?",
                    (concept, DedupStatus.REVIEWED))
        con.executemany("UPDATE items SET status=?, reason='no near duplicate', "
                        "group_id=NULL, dedup_json=NULL, updated_at=? WHERE item_id=?",
                        [(ItemStatus.KEPT, now, i) for i in ids])
        for g in groups:
            ev = {"members": g["members"], "edges": g["edges"],
                  "thresholds": {"phash_distance": cfg.phash_distance, "cosine": cfg.cosine,
                                 "review_cosine": cfg.review_cosine, "model": cfg.model}}
            gid = add_dedup_group(con, concept, g["status"], ev, kept_item_id=g["kept"],
                                  run_id=run_id)
            con.executemany(
                "UPDATE items SET status=?, reason=?, group_id=?, dedup_json=?, updated_at=? "
                "WHERE item_id=?",
                [(st, why, gid, json.dumps(e, sort_keys=True), now, iid)
                 for iid, (st, why, e) in g["decisions"].items()])
        for r in con.execute("SELECT status, COUNT(*) FROM items WHERE concept=? AND item_id IN "
                             "(SELECT value FROM json_each(?)) GROUP BY status",
                             (concept, json.dumps(ids))):
            counts[r[0]] += r[1]
    return counts


def add_dedup_group(con: sqlite3.Connection, concept: str, status: DedupStatus | str,
                    evidence: dict[str, Any], *, kept_item_id: int | None = None,
                    run_id: int | None = None, group_id: int | None = None) -> int:
    """The ``dedup_groups`` row of one group of near duplicates; returns its ``group_id``."""
    cur = con.execute(
        "INSERT INTO dedup_groups (group_id, concept, kept_item_id, status, evidence_json, run_id)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (group_id, concept, kept_item_id, status, json.dumps(evidence, sort_keys=True), run_id))
    return int(cur.lastrowid)


def image_dedup(catalog: Catalog, cfg: DedupConfig, adapter: Any = None) -> dict[str, Any]:
    """Run the stage; ``adapter`` overrides ``cfg.model`` (tests, benchmarks)."""
    from benchmark.cache import CacheError, EmbeddingCache

    try:  # before the model loads: a bad --cache-dir is the user's to fix, one line, exit 2
        cache = EmbeddingCache(cfg.cache_dir) if adapter is not None or cfg.model else None
    except CacheError as exc:
        raise StageInputError(str(exc)) from exc
    with cache if cache is not None else nullcontext():
        if adapter is None and cfg.model:
            adapter = _load_model(cfg.model)
        if adapter is not None and cfg.batch_size:
            adapter.image_batch_size = cfg.batch_size
        if cfg.pair_device is None and (dev := pair_device(adapter)) is not None:
            cfg = DedupConfig(**{**asdict(cfg), "pair_device": dev})
        concepts = [r[0] for r in catalog.query(
            "SELECT DISTINCT concept FROM items WHERE sha256 IS NOT NULL ORDER BY concept")]
        wanted = stagekit.concept_filter(cfg.concepts)  # NFC, as every name
        if wanted is not None:
            concepts = [c for c in concepts if c in wanted]
        by_concept: dict[str, dict[str, int]] = {}
        total: Counter[str] = Counter()
        with stagekit.stage_run(catalog, STAGE, asdict(cfg)) as rec:
            rec.counts = {"items": total}  # filled per concept: an interrupted run records it
            for concept in tqdm(concepts, desc="image_dedup", unit="concept",
                                disable=not concepts):
                c = dedup_concept(catalog, concept, cfg, adapter, cache, rec.run_id)
                by_concept[concept] = dict(c)
                total.update(c)
            groups = catalog.pairs("SELECT status, COUNT(*) FROM dedup_groups GROUP BY status")
            items = dict(sorted(total.items()))
            rec.counts = {"items": items, "groups": groups, "by_concept": by_concept}
            rec.summary = (f"items: {', '.join(f'{k} {v}' for k, v in items.items()) or 'none'}\n"
                           f"groups: {', '.join(f'{k} {v}' for k, v in groups.items()) or 'none'}")
    return {**rec.counts, "summary": rec.summary, "run_id": rec.run_id}


def _load_model(name: str) -> Any:
    """The registered image model ``name``; an unknown name or path is bad input."""
    from benchmark.registry import load_model

    try:
        return load_model(name)
    except (LookupError, FileNotFoundError) as exc:
        raise StageInputError(str(exc)) from exc


def build_parser() -> argparse.ArgumentParser:
    return stagekit.stage_parser("builder.image_dedup",
                                 "Near-duplicate groups within each concept.", DedupConfig)


def config_from_args(a: argparse.Namespace) -> DedupConfig:
    """The CLI values as a :class:`DedupConfig` (StageInputError on bad input)."""
    if not a.review_cosine <= a.cosine:
        raise StageInputError("need -1 <= --review-cosine <= --cosine <= 1")
    stagekit.concept_filter(a.concepts)
    cfg = from_args(DedupConfig, a)
    return replace(cfg, model=None if cfg.model is None or cfg.model.lower() == "none"
                   else cfg.model)


def _cli(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    stagekit.built_before(args.workdir, "python -m builder.crawl")
    with Catalog.open(args.workdir) as catalog:
        report(image_dedup(catalog, cfg)["summary"])
    return 0


def main(argv: list[str] | None = None) -> int:
    return stagekit.stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
