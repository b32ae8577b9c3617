"""The numbers a release's card and the datasheet quote, all computed from the catalog the
release was exported from; nothing is typed in by hand.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from builder.catalog import Catalog
from builder.statuses import TagStatus
from core import datatables
from triplets.pool import Pool


def _group(cat: Catalog, sql: str, *params: str) -> dict[str, int]:
    return {str(r[0]): int(r[1]) for r in cat.query(sql, params)}


def _ordered(counter: Counter) -> dict[str, int]:
    order = {c.code: i for i, c in enumerate(datatables.countries())}
    return {k: counter[k] for k in sorted(counter, key=lambda k: (order.get(k, 99), k))}


def tag_stats(cat: Catalog, pool: Pool) -> dict[str, Any]:
    """Tag coverage and shape over the released images."""
    tagged = [im for im in pool.images if im.tags]
    n = len(tagged)

    def share(count: int) -> float:
        return round(count / n, 4) if n else 0.0

    states = Counter(k[5:] for k in pool.counts if k.startswith("tags_"))
    by_state = {k: int(pool.counts[f"tags_{k}"]) for k in sorted(states)}
    models = [r[0] for r in cat.query(
        "SELECT DISTINCT model FROM tags WHERE status=? AND model IS NOT NULL ORDER BY model",
        (TagStatus.OK,))]
    prompts = [r[0] for r in cat.query(
        "SELECT DISTINCT prompt_sha FROM tags WHERE prompt_sha IS NOT NULL ORDER BY prompt_sha")]
    return {
        "images_by_tag_state": by_state,
        "tagged_images": n,
        "mean_tags_per_tagged_image": round(sum(len(im.tags) for im in tagged) / n, 3) if n else 0.0,
        "share_with_several_tags": share(sum(len(im.tags) > 1 for im in tagged)),
        "share_first_tag_is_crawl_concept": share(sum(im.tags[0] == im.concept for im in tagged)),
        "share_tags_include_crawl_concept": share(sum(im.concept in im.tags for im in tagged)),
        "tag_counts_top": dict(Counter(t for im in tagged for t in im.tags).most_common(20)),
        "models": models,
        "prompt_sha256": prompts,
        "tagging_failures": _group(
            cat, "SELECT status, COUNT(*) FROM tags WHERE status != ? GROUP BY status ORDER BY status",
            TagStatus.OK),
    }


def review_stats(cat: Catalog) -> dict[str, Any]:
    """Current human decisions: duplicate reviews by decision, other kinds by count."""
    out: dict[str, Any] = {}
    for r in cat.query(
        "SELECT kind, decision, COUNT(*) AS n, COUNT(DISTINCT annotator) AS a FROM reviews"
        " WHERE current=1 GROUP BY kind, decision ORDER BY kind, decision"
    ):
        entry = out.setdefault(r["kind"], {"annotations": 0, "decisions": {}})
        entry["annotations"] += int(r["n"])
        if r["kind"] == "duplicates":
            entry["decisions"][r["decision"]] = int(r["n"])
    for kind, entry in out.items():
        entry["annotators"] = int(cat.query(
            "SELECT COUNT(DISTINCT annotator) FROM reviews WHERE current=1 AND kind=?", (kind,))[0][0])
    return out


def release_numbers(cat: Catalog, pool: Pool, rows: list[dict], sampling: dict) -> dict[str, Any]:
    """Everything the card's "Numbers" section and the datasheet quote."""
    img_country = Counter(im.country for im in pool.images)
    img_concept = Counter(im.concept for im in pool.images)
    tri_country = Counter(r["query_country"] for r in rows)
    tri_concept = Counter(r["query_concept"] for r in rows)
    sha_cells = Counter(im.sha256 for im in pool.images)
    used = {r[f"{role}_image_id"] for r in rows
            for role in ("query", "semantic", "cultural", "non_relevant")}
    return {
        "images": len(pool.images),
        "images_in_triplets": len(used),
        "triplets": len(rows),
        "countries": len(img_country),
        "concepts": len(img_concept),
        "images_by_country": _ordered(img_country),
        "images_by_concept": dict(sorted(img_concept.items())),
        "triplets_by_country": _ordered(tri_country),
        "triplets_by_concept": dict(sorted(tri_concept.items())),
        "same_bytes_in_several_cells": sum(1 for n in sha_cells.values() if n > 1),
        "pool": {k: int(v) for k, v in sorted(pool.counts.items())},
        **{f"{table}_by_status": _group(
            cat, f"SELECT status, COUNT(*) FROM {table} GROUP BY status ORDER BY status")
           for table in ("concepts", "searches", "downloads", "items", "dedup_groups")},
        "reviews": review_stats(cat),
        "tags": tag_stats(cat, pool),
        "sampling": sampling,
    }


#: the columns of ``stage_runs`` that say which process ran it (``builder.liveness``)
PROCESS_COLUMNS = frozenset({"pid", "host", "proc_start"})


def stage_records(cat: Catalog) -> list[dict[str, Any]]:
    """Every stage run of the build, oldest first, without the machine's process details."""
    out = []
    for r in cat.query("SELECT * FROM stage_runs ORDER BY run_id"):
        rec = {k: r[k] for k in r.keys() if k not in PROCESS_COLUMNS}
        for key in ("params_json", "counts_json", "usage_json"):
            rec[key[:-5]] = json.loads(rec.pop(key) or "null")
        out.append(rec)
    return out
