"""The triplet rules of DESIGN.md, checked row by row, each violation named by row id and rule.

The rules every 3XCM source must meet are defined once, in the evaluator
(:func:`benchmark.data.xcm.triplet_violations`): ``semantic_same_country``,
``cultural_same_concept``, ``non_relevant_same_concept``, ``non_relevant_same_country``,
``semantic_other_concept`` / ``cultural_other_country`` (where the rows carry those columns, as
the authors' file does), ``unknown_<role>_image_id`` (an image id that is not an image),
``<role>_image_concept`` / ``<role>_image_country`` (a column disagrees with the image's own
record) and ``<role>_tagged_with_query_concept``. :func:`check_triplets` runs those and adds the
rules of a build (this package samples to them):

=======================  =========================================================================
rule                     a row violates it when
=======================  =========================================================================
duplicate_triplet_id     its id occurs more than once
query_text_empty         the query text is empty (builds and releases)
query_language           the query language is not the query country's native language
semantic_language        (distinct-language builds) the semantic country shares the query
                         country's language (USA/UK/AUS, ESP/ARG, PRT/BRA)
cultural_untagged        (tagged sources) the cultural image has no valid tags
non_relevant_untagged    (tagged sources) the non-relevant image has no valid tags
distinct_images          two of the four images are the same id or have the same bytes
seed_missing             (work dir, release) no single sampling seed is recorded (row id ``-``)
=======================  =========================================================================
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from benchmark import tables
from benchmark.data.xcm import TRIPLET_COLUMNS, Violation, triplet_violations

__all__ = ["TRIPLET_COLUMNS", "ImageInfo", "Violation", "check_triplets", "summarize", "ROLES"]

ROLES = ("query", "semantic", "cultural", "non_relevant")


@dataclass(frozen=True)
class ImageInfo:
    """What the rules need to know about one image."""

    concept: str
    country: str
    tags: tuple[str, ...] | None = None  # None: no valid tags
    sha256: str | None = None


def violation_line(v: Violation) -> str:
    return f"{v.row_id}\t{v.rule}\t{v.detail}".rstrip()


def check_triplets(
    rows: Iterable[Mapping[str, object]],
    images: Mapping[str, ImageInfo] | None,
    *,
    tags_known: bool,
    distinct_language: bool,
    seed: int | None = None,
    seed_required: bool = True,
    check_query_text: bool = True,
) -> list[Violation]:
    """Every violation of every row: the evaluator's rules plus the build's (module docstring).

    ``images=None``: the rows carry every image's concept and country in their own columns
    (``semantic_concept``, ``cultural_country``, ... as in the authors' file); image existence
    is then the caller's check. Output is ordered by row, then rule.
    """
    import pandas as pd

    rows = [dict(r) for r in rows]
    out: list[Violation] = []
    if seed_required and seed is None:
        out.append(Violation("-", "seed_missing", "no single sampling seed recorded"))
    if not rows:
        return out
    tr = pd.DataFrame(rows)
    tr["triplet_id"] = tr["triplet_id"].astype(str)
    meta = None
    if images is not None:
        meta = pd.DataFrame(
            [{"image_id": k, "concept": v.concept, "country": v.country,
              "tags": list(v.tags) if v.tags is not None else None} for k, v in images.items()],
            columns=["image_id", "concept", "country", "tags"],
        )
    found = triplet_violations(tr, meta, set(images) if images is not None else None)
    found.extend(_build_rules(rows, images, tags_known, distinct_language, check_query_text))
    order = {str(r["triplet_id"]): i for i, r in enumerate(rows)}
    found.sort(key=lambda v: (order.get(v.row_id, -1), v.rule))
    return out + found


def _build_rules(
    rows: list[dict],
    images: Mapping[str, ImageInfo] | None,
    tags_known: bool,
    distinct_language: bool,
    check_query_text: bool,
) -> list[Violation]:
    langs: dict[str, str] = {}
    for c in tables.countries():
        for key in (c.code, c.label, c.name, c.authors_name):
            langs[key] = c.language
    ids = Counter(str(r["triplet_id"]) for r in rows)
    out: list[Violation] = []
    for r in rows:
        rid, qk = str(r["triplet_id"]), r["query_country"]

        def add(rule: str, detail: str, rid: str = rid) -> None:
            out.append(Violation(rid, rule, detail))

        if ids[rid] > 1:
            add("duplicate_triplet_id", f"{ids[rid]} rows")
        if check_query_text and not str(r.get("query_text") or "").strip():
            add("query_text_empty", "empty query text")
        if r.get("query_language") is not None and langs.get(qk) != r["query_language"]:
            add("query_language", f"{r['query_language']} is not the language of {qk}")
        sk = r.get("semantic_country")
        if distinct_language and sk is not None and sk != qk and langs.get(sk) == langs.get(qk):
            add("semantic_language", f"{sk} shares {qk}'s language {langs.get(qk)}")
        if images is None:
            continue
        if tags_known:
            for role in ("cultural", "non_relevant"):
                im = images.get(str(r[f"{role}_image_id"]))
                if im is not None and not im.tags:
                    add(f"{role}_untagged", f"{r[f'{role}_image_id']} has no tags")
        four = [str(r[f"{role}_image_id"]) for role in ROLES]
        shas = [images[i].sha256 for i in four if i in images and images[i].sha256]
        if len(set(four)) < 4:
            add("distinct_images", f"repeated image id among {four}")
        elif len(set(shas)) < len(shas):
            add("distinct_images", "two of the images have the same bytes (sha256)")
    return out


def summarize(violations: Iterable[Violation]) -> Counter:
    """Violations counted by rule."""
    return Counter(v.rule for v in violations)
