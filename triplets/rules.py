"""The triplet rules of a build: the evaluator's one rule set (:mod:`core.rules`), plus the
build record's rule ``seed_missing`` (no single sampling seed recorded; row id ``-``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.release import TRIPLET_COLUMNS
from core.rules import ROLES, Violation, summarize, triplet_violations

__all__ = ["TRIPLET_COLUMNS", "ImageInfo", "Violation", "check_sampled", "check_triplets",
           "summarize", "ROLES"]


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
    candidate_countries: Iterable[str] | None = None,
) -> list[Violation]:
    """Every violation of every row and of the build record, ordered by row then rule.

    ``images=None``: the rows carry each image's concept and country (the authors' file).
    ``candidate_countries``: where semantic and non-relevant candidates must come from.
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
    meta = shas = None
    if images is not None:
        meta = pd.DataFrame(
            [{"image_id": k, "concept": v.concept, "country": v.country,
              "tags": list(v.tags) if v.tags is not None else None} for k, v in images.items()],
            columns=["image_id", "concept", "country", "tags"],
        )
        shas = {k: v.sha256 for k, v in images.items() if v.sha256}
    out += triplet_violations(
        tr, meta, set(images) if images is not None else None, tags_known=tags_known,
        distinct_language=distinct_language, check_query_text=check_query_text, shas=shas)
    if candidate_countries is not None:
        allowed = set(candidate_countries)
        extra = [Violation(str(r["triplet_id"]), "candidate_country",
                           f"{role} candidate from {r.get(f'{role}_country')}, not one of the "
                           f"recorded candidate countries")
                 for r in rows for role in ("semantic", "non_relevant")
                 if r.get(f"{role}_country") not in allowed]
        order = {str(r["triplet_id"]): i for i, r in enumerate(rows)}
        out = sorted(out + extra, key=lambda v: (order.get(v.row_id, -1), v.rule))
    return out


def check_sampled(rows: Iterable[Mapping[str, object]], images: Mapping[str, ImageInfo] | None,
                  sampling: Mapping[str, Any]) -> list[Violation]:
    """:func:`check_triplets` of a build's rows under its recorded ``sampling`` settings."""
    return check_triplets(rows, images, tags_known=True,
                          distinct_language=bool(sampling.get("distinct_language", False)),
                          seed=sampling.get("seed"),
                          candidate_countries=sampling.get("candidate_countries"))
