"""The sampling stage on a work dir: pool -> triplets, stored in the catalog (replaced in one
transaction) and ``exports/triplets.csv`` (atomic); the run record holds the settings, counts
and balance."""

from __future__ import annotations

import csv
import gc
import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.catalog import Catalog
from builder.stagekit import stage_run
from builder.workdir import WorkDir
from core import datatables
from core.files import atomic_write_text
from core.release import RELEASE_TRIPLET_COLUMNS
from triplets.pool import Pool, load_pool
from triplets.rules import TRIPLET_COLUMNS, ImageInfo, Violation, check_sampled
from triplets.sampling import SampleConfig, SampleResult, release_order, sample_triplets

log = logging.getLogger(__name__)

STAGE = "triplets"


def with_locale(rows: list[dict], pool: Pool | None = None) -> list[dict]:
    """Triplet rows with ``query_locale`` and, with ``pool``, the term's source and reviewers."""
    locale = {c.code: c.locale for c in datatables.countries()}
    out = []
    for r in rows:
        src, n = pool.term_source(str(r["query_concept"]), str(r["query_country"]),
                                  str(r["query_text"])) if pool is not None else ("", 0)
        out.append({**r, "query_locale": locale.get(str(r["query_country"]), ""),
                    "query_term_source": src, "query_term_reviewers": int(n)})
    return out


def triplets_csv(rows: list[dict[str, str]], pool: Pool | None = None) -> str:
    """The release columns as CSV text (``\\n`` line ends, so the bytes are platform-free)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=RELEASE_TRIPLET_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(with_locale(rows, pool))
    return buf.getvalue()


def pool_image_infos(pool: Pool) -> dict[str, ImageInfo]:
    return {
        im.image_id: ImageInfo(im.concept, im.country, im.tags, im.sha256) for im in pool.images
    }


@contextmanager
def _frozen_heap() -> Iterator[None]:
    """The objects alive now (the pool) left out of the garbage collector's full passes."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_sample(workdir: str | Path | WorkDir | None, cfg: SampleConfig) -> SampleResult:
    """Sample, check every rule, store the triplets in the catalog and ``exports/triplets.csv``."""
    with Catalog.open(workdir) as cat:
        pool = load_pool(cat)
        inputs = [im.image_id for im in pool.images]
        with stage_run(cat, STAGE, cfg.record(), inputs=inputs) as rec, _frozen_heap():
            result = sample_triplets(pool, cfg)
            rows = [t.release_row() for t in result.triplets]
            bad = check_sampled(rows, pool_image_infos(pool), cfg.record())
            if bad:  # a sampler bug, never bad input: refuse to store
                raise RuntimeError(f"sampler produced {len(bad)} rule violations: {bad[:3]}")
            _store(cat, result, cfg, rec.run_id)
            atomic_write_text(cat.workdir.exports_dir / "triplets.csv", triplets_csv(rows, pool))
            counts = {**pool.counts, **result.counts}
            rec.counts = {"counts": dict(sorted(counts.items())), "balance": result.balance}
            rec.summary = summary_text(result, pool, cfg)
    return result


def _store(cat: Catalog, result: SampleResult, cfg: SampleConfig, run_id: int) -> None:
    with cat.tx() as con:
        con.execute("DELETE FROM triplets")
        con.executemany(
            "INSERT INTO triplets (triplet_id, seed, query_item_id, query_concept, query_country,"
            " query_language, query_text, semantic_item_id, cultural_item_id,"
            " non_relevant_item_id, run_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                (t.triplet_id, cfg.seed, t.query_item_id, t.query_concept, t.query_country,
                 t.query_language, t.query_text, t.semantic_item_id, t.cultural_item_id,
                 t.non_relevant_item_id, run_id)
                for t in result.triplets
            ],
        )


def summary_text(result: SampleResult, pool: Pool, cfg: SampleConfig) -> str:
    """The one-screen summary of a sampling run."""
    c = result.counts
    lines = [
        f"triplets: {c['triplets']} from {c['anchors']} kept images x {cfg.per_image} "
        f"(seed {cfg.seed}, distinct language {'on' if cfg.distinct_language else 'off'}"
        + (f", semantic and non-relevant candidates from {','.join(cfg.candidate_countries)}"
           if cfg.candidate_countries else "") + ")",
        f"untagged images (never cultural/non-relevant): "
        f"{sum(pool.counts[k] for k in ('tags_untagged', 'tags_failed', 'tags_bad_json'))}",
    ]
    skipped = {k: v for k, v in sorted(c.items()) if k.startswith("skipped_")}
    if skipped:
        lines.append("anchors without a triplet: " + ", ".join(f"{k[8:]}={v}" for k, v in skipped.items()))
    for role, st in result.balance.items():
        lines.append(
            f"{role:>12}: {st['distinct_images']} distinct images, "
            f"max {st['max_uses_per_image']} uses of one, {len(st['by_country'])} countries, "
            f"{len(st['by_concept'])} concepts"
        )
    return "\n".join(lines)


def read_workdir_triplets(cat: Catalog, pool: Pool) -> tuple[list[dict], dict]:
    """The catalog's triplets as release rows and their sampling settings (``seed``: the rows'
    one seed, else None); a gone item becomes ``missing-item-<id>``, which validation reports."""
    by_item = pool.by_item()
    rows: list[dict] = []
    seeds: set[int] = set()
    run_ids: set[int] = set()
    for r in cat.query("SELECT * FROM triplets ORDER BY triplet_id"):
        seeds.add(int(r["seed"]))
        if r["run_id"] is not None:
            run_ids.add(int(r["run_id"]))
        row = {k: r[k] for k in ("triplet_id", "query_concept", "query_country",
                                  "query_language", "query_text")}
        for role in ("query", "semantic", "cultural", "non_relevant"):
            im = by_item.get(int(r[f"{role}_item_id"]))
            row[f"{role}_image_id"] = im.image_id if im else f"missing-item-{r[f'{role}_item_id']}"
            row[f"{role}_concept"] = im.concept if im else None
            row[f"{role}_country"] = im.country if im else None
        rows.append({k: row.get(k) for k in TRIPLET_COLUMNS})
    order = release_order()
    rows.sort(key=lambda r: order(r["query_country"], r["query_concept"], r["triplet_id"]))
    params = run_params(cat, run_ids)
    sampling = {"seed": seeds.pop() if len(seeds) == 1 else None,
                "per_image": params.get("per_image"),
                "distinct_language": bool(params.get("distinct_language", True))}
    if params.get("candidate_countries") is not None:
        sampling["candidate_countries"] = list(params["candidate_countries"])
    return rows, sampling


def run_params(cat: Catalog, run_ids: set[int] | None = None) -> dict:
    """The recorded settings of the last sampling run of ``run_ids`` (default: the table's)."""
    if run_ids is None:
        run_ids = {int(r[0]) for r in cat.query(
            "SELECT DISTINCT run_id FROM triplets WHERE run_id IS NOT NULL")}
    params: dict = {}
    for rid in sorted(run_ids):
        p = cat.query("SELECT params_json FROM stage_runs WHERE run_id=?", (rid,))
        if p:
            params = json.loads(p[0]["params_json"] or "{}")
    return params


def validate_workdir(workdir: str | Path | WorkDir | None) -> tuple[list[Violation], list[dict]]:
    """Every rule on the work dir's stored triplets; returns (violations, the rows)."""
    with Catalog.open(workdir) as cat:
        pool = load_pool(cat)
        rows, sampling = read_workdir_triplets(cat, pool)
    if not rows:  # nothing sampled: no seed to miss
        sampling["seed"] = 0
    return check_sampled(rows, pool_image_infos(pool), sampling), rows
