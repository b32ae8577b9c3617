"""Readers that turn a release folder or the authors' CSV into rows for :mod:`triplets.rules`;
the table checks are the evaluator's (:mod:`core.rules`), with the same words.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from core import datatables
from core import release as fmt
from core.build_record import read_build_record
from core.errors import DataError
from core.rules import (
    authors_violations,
    check_columns,
    check_not_empty,
    check_tags,
    check_unique_images,
    image_bytes_violation,
)
from triplets.rules import TRIPLET_COLUMNS, ImageInfo, Violation, check_sampled

# -- release folder ------------------------------------------------------------------------------

def image_byte_violations(release: Path) -> list[Violation]:
    """Rule ``image_bytes`` per image row, reading the ``images`` shards one at a time."""
    import pyarrow.parquet as pq

    out: list[Violation] = []
    paths = fmt.config_paths(release, "images") if "images" in fmt.card_configs(release) else []
    for path in paths:
        t = pq.read_table(path, columns=["image_id", "image", "sha256"])
        for iid, cell, sha in zip(*(t.column(c).to_pylist() for c in ("image_id", "image", "sha256")),
                                  strict=True):
            v = image_bytes_violation(str(iid), (cell or {}).get("bytes"), sha, decode=True)
            if v is not None:
                out.append(v)
    return out


def read_release(release: Path) -> tuple[list[dict], dict[str, ImageInfo], dict]:
    """(triplet rows, image table, build record) of a release folder, table checks passed."""
    if not release.is_dir():
        raise DataError(f"--release: not a folder: {release}")
    what = str(release)
    trip = fmt.read_config_table(release, "triplets")
    check_columns(trip, TRIPLET_COLUMNS, f"{what} triplets")
    check_not_empty(len(trip), f"{what} triplets")
    img_cols = ["image_id", "concept", "country", "tags", "sha256"]
    imgs = fmt.read_config_table(release, "images", img_cols)
    check_columns(imgs, ["image_id", "concept", "country"], f"{what} images")
    imgs["image_id"] = imgs["image_id"].astype(str)
    check_unique_images(imgs["image_id"].tolist(), f"{what} images")
    if "tags" in imgs:
        check_tags(imgs["image_id"], imgs["tags"], f"{what} images", imgs["concept"])
    images = {
        r["image_id"]: ImageInfo(r["concept"], r["country"],
                                 tuple(r["tags"]) if _has_tags(r.get("tags")) else None,
                                 r.get("sha256"))
        for r in imgs.to_dict("records")
    }
    build = read_build_record(release)
    rows = trip[TRIPLET_COLUMNS].astype(object).where(trip[TRIPLET_COLUMNS].notna(), None)
    return rows.to_dict("records"), images, build


def release_violations(release: Path) -> tuple[list[dict], list[Violation]]:
    """(triplet rows, every rule broken): the rows under the build's recorded sampling, and the
    embedded image bytes."""
    rows, images, build = read_release(release)
    return rows, check_sampled(rows, images, build.get("sampling", {})) + image_byte_violations(release)


def _has_tags(t: object) -> bool:
    return t is not None and not isinstance(t, float) and len(t) > 0  # type: ignore[arg-type]


# -- the authors' CSV ----------------------------------------------------------------------------

@dataclass
class AuthorsFile:
    """Rows in release shape plus ``semantic_concept``/``cultural_country`` (check with ``images=None``)."""

    rows: list[dict]
    extra: list[Violation] = field(default_factory=list)
    same_language_semantic: int = 0
    conflicting_ids: list[str] = field(default_factory=list)  # one id, two labels (info)


def read_authors_csv(path: Path) -> AuthorsFile:
    """The authors' file mapped by the evaluator's reader, with their format's own rules; ids
    given two labels are listed (``conflicting_ids``), not blamed on a row (undecidable)."""
    from core.authors import authors_to_triplets, read_authors_frame
    from core.rules import AUTHORS_ROLES

    if not path.is_file():
        raise DataError(f"--authors-csv: no such file: {path}")
    raw = read_authors_frame(path)
    tr = authors_to_triplets(raw)
    lang = {c.code: c.language for c in datatables.countries()}
    out = AuthorsFile(rows=tr.to_dict("records"), extra=authors_violations(raw, tr))
    out.same_language_semantic = int(sum(
        lang[a] == lang[b] for a, b in zip(tr["semantic_country"], tr["query_country"], strict=True)
    ))
    labels: dict[str, set[tuple[str, str]]] = {}
    for rec, r in zip(raw.to_dict("records"), out.rows, strict=True):
        for role, prefix in AUTHORS_ROLES.items():
            concept = r["query_concept"] if role == "query" else rec[f"{prefix}_concept"]
            country = r["query_country"] if role == "query" else r[f"{role}_country"]
            labels.setdefault(rec[f"{prefix}_image_id"], set()).add((concept, country))
    out.conflicting_ids = sorted(iid for iid, lab in labels.items() if len(lab) > 1)
    return out


def counts_table(rows: list[dict]) -> str:
    """Triplets per query country and per query concept, as printable text."""
    by_country = Counter(r["query_country"] for r in rows)
    by_concept = Counter(r["query_concept"] for r in rows)
    lines = [f"{len(rows)} triplets, {len(by_country)} countries, {len(by_concept)} concepts", "",
             "per country:"]
    order = [c.code for c in datatables.countries()]
    for code in order + sorted(set(by_country) - set(order)):
        if by_country.get(code):
            lines.append(f"  {code:<5}{by_country[code]:>7}")
    lines += ["", "per concept:"]
    items = sorted(by_concept.items(), key=lambda kv: (-kv[1], kv[0]))
    for i in range(0, len(items), 3):
        lines.append("".join(f"  {c[:28]:<28}{n:>6}" for c, n in items[i:i + 3]))
    return "\n".join(lines)
