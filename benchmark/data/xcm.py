"""3XCM triplets and images: the release format and the authors' CSV, validated.

Two inputs give the same :class:`XCMDataset`:

1. the release (DESIGN.md): configs ``triplets`` (split ``test``) and ``images`` loaded with
   ``datasets.load_dataset`` from a local folder or a hub id;
2. the authors' ``xcm-bench.csv`` (+ ``--images DIR`` of ``<image_id>.<ext>`` files, + query
   texts from ``--queries FILE`` (CSV concept, language, text) or ``data/queries.csv``).

The triplet rules are defined once here (:func:`triplet_violations`); the ``triplets``
validator reuses them. Any problem is a :class:`DataError` whose message names the first
offending rows and counts all of them.
"""

from __future__ import annotations

import csv
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark import tables
from benchmark.data import DataError
from benchmark.data.images import FileHashMemo, ImageStore
from benchmark.files import sha256_bytes

log = logging.getLogger(__name__)

TRIPLET_COLUMNS = [
    "triplet_id", "query_image_id", "query_concept", "query_country", "query_language",
    "query_text", "semantic_image_id", "semantic_country", "cultural_image_id",
    "cultural_concept", "non_relevant_image_id", "non_relevant_concept", "non_relevant_country",
]
IMAGE_COLUMNS = [
    "image_id", "image", "concept", "country", "query_language", "query_text", "search_rank",
    "source_url", "page_url", "title", "tags", "sha256", "width", "height",
]
AUTHORS_COLUMNS = [
    "query_index", "query_image_id", "query_concept", "query_country",
    "semantically_relevant_candidate_image_id", "semantically_relevant_candidate_concept",
    "semantically_relevant_candidate_country", "culturally_relevant_candidate_image_id",
    "culturally_relevant_candidate_concept", "culturally_relevant_candidate_country",
    "non_relevant_candidate_image_id", "non_relevant_candidate_concept",
    "non_relevant_candidate_country",
]
CANDIDATES = ("semantic", "cultural", "non_relevant")


@dataclass
class Violation:
    """One broken rule on one triplet."""

    row_id: str
    rule: str
    detail: str = ""


@dataclass
class XCMDataset:
    """Validated triplets (``TRIPLET_COLUMNS``) plus the images they reference."""

    triplets: pd.DataFrame
    images: ImageStore
    dataset_id: str
    source_format: str  # release / authors-csv
    image_meta: pd.DataFrame | None = None  # image_id, concept, country, tags (release only)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """sha256 over the triplet table and the content hash of every referenced image."""
        h = hashlib.sha256()
        h.update(self.triplets[TRIPLET_COLUMNS].to_csv(index=False).encode("utf-8"))
        for iid in sorted(referenced_ids(self.triplets)):
            h.update(f"{iid}\t{self.images.sha256[iid]}\n".encode())
        return h.hexdigest()


def referenced_ids(tr: pd.DataFrame) -> set[str]:
    cols = ["query_image_id", "semantic_image_id", "cultural_image_id", "non_relevant_image_id"]
    return set(pd.unique(tr[cols].to_numpy().ravel()))


def _first(items: list[str], n: int = 5) -> str:
    return ", ".join(items[:n]) + (" ..." if len(items) > n else "")


def require_columns(columns: list[str], required: list[str], what: str) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise DataError(f"{what}: missing column(s) {', '.join(missing)}")


# -- rules -------------------------------------------------------------------------------------
def triplet_violations(
    tr: pd.DataFrame, image_meta: pd.DataFrame | None = None, image_ids: set[str] | None = None,
) -> list[Violation]:
    """Every DESIGN.md rule each triplet breaks.

    Structural rules (always): semantic from another country; cultural with another concept;
    non-relevant with another concept and another country; and, where the columns exist
    (authors' file), semantic of the query concept and cultural of the query country.
    With ``image_ids``: the four images exist. With ``image_meta`` (image_id, concept,
    country, tags): each image's own concept/country match the triplet, and the query
    concept is not among the tags of the cultural or the non-relevant image.
    """
    out: list[Violation] = []
    rid = tr["triplet_id"].astype(str).to_numpy()
    qc, qk = tr["query_concept"].to_numpy(), tr["query_country"].to_numpy()

    def flag(mask: Any, rule: str) -> None:
        for i in mask.nonzero()[0]:
            out.append(Violation(str(rid[i]), rule))

    flag(tr["semantic_country"].to_numpy() == qk, "semantic_same_country")
    flag(tr["cultural_concept"].to_numpy() == qc, "cultural_same_concept")
    flag(tr["non_relevant_concept"].to_numpy() == qc, "non_relevant_same_concept")
    flag(tr["non_relevant_country"].to_numpy() == qk, "non_relevant_same_country")
    if "semantic_concept" in tr:
        flag(tr["semantic_concept"].to_numpy() != qc, "semantic_other_concept")
    if "cultural_country" in tr:
        flag(tr["cultural_country"].to_numpy() != qk, "cultural_other_country")
    if image_ids is not None:
        for col in ("query_image_id", "semantic_image_id", "cultural_image_id",
                    "non_relevant_image_id"):
            flag(~tr[col].isin(image_ids).to_numpy(), f"unknown_{col}")
    if image_meta is not None:
        out.extend(_meta_violations(tr, image_meta))
    return out


def _meta_violations(tr: pd.DataFrame, meta: pd.DataFrame) -> list[Violation]:
    m = meta.set_index("image_id")
    concept, country = m["concept"].to_dict(), m["country"].to_dict()
    tags = m["tags"].to_dict() if "tags" in m else {}
    out: list[Violation] = []
    for r in tr.itertuples(index=False):
        checks = [
            (concept.get(r.query_image_id), r.query_concept, "query_image_concept"),
            (country.get(r.query_image_id), r.query_country, "query_image_country"),
            (concept.get(r.semantic_image_id), r.query_concept, "semantic_image_concept"),
            (country.get(r.semantic_image_id), r.semantic_country, "semantic_image_country"),
            (concept.get(r.cultural_image_id), r.cultural_concept, "cultural_image_concept"),
            (country.get(r.cultural_image_id), r.query_country, "cultural_image_country"),
            (concept.get(r.non_relevant_image_id), r.non_relevant_concept,
             "non_relevant_image_concept"),
            (country.get(r.non_relevant_image_id), r.non_relevant_country,
             "non_relevant_image_country"),
        ]
        for have, want, rule in checks:
            if have is not None and have != want:
                out.append(Violation(str(r.triplet_id), rule, f"{have!r} != {want!r}"))
        for cand in ("cultural_image_id", "non_relevant_image_id"):
            t = tags.get(getattr(r, cand))
            if t is not None and r.query_concept in list(t):
                out.append(Violation(str(r.triplet_id), f"{cand[:-9]}_tagged_with_query_concept"))
    return out


def raise_on_violations(violations: list[Violation], what: str) -> None:
    if not violations:
        return
    rows = sorted({v.row_id for v in violations}, key=lambda x: (len(x), x))
    rules = sorted({v.rule for v in violations})
    raise DataError(
        f"{what}: {len(violations)} rule violation(s) in {len(rows)} triplet(s) "
        f"({', '.join(rules)}); first rows: {_first(rows)}"
    )


# -- the release -------------------------------------------------------------------------------
def load_release(path_or_id: str, revision: str | None = None) -> XCMDataset:
    """Load the ``triplets`` and ``images`` configs with ``datasets.load_dataset``."""
    import datasets

    local = Path(path_or_id)
    if not local.exists() and path_or_id.count("/") != 1:
        raise DataError(f"--dataset: {path_or_id!r} is neither a folder nor a hub id ORG/NAME")
    try:
        trip = datasets.load_dataset(path_or_id, "triplets", split="test", revision=revision)
        imgs = datasets.load_dataset(path_or_id, "images", revision=revision)
    except Exception as e:  # noqa: BLE001 - any loading failure is one clear line
        raise DataError(f"--dataset {path_or_id}: cannot load release: {type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else ''}") from e
    require_columns(trip.column_names, TRIPLET_COLUMNS, f"{path_or_id} triplets")
    split = next(iter(imgs.values()))
    require_columns(split.column_names, ["image_id", "image", "concept", "country"],
                    f"{path_or_id} images")
    tr = trip.to_pandas()[TRIPLET_COLUMNS].astype({"triplet_id": str})
    split = split.cast_column("image", datasets.Image(decode=False))
    table = split.data  # pyarrow (memory-mapped); bytes read per image on demand
    ids = [str(x) for x in table.column("image_id").to_pylist()]
    dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
    if dupes:
        raise DataError(f"{path_or_id} images: duplicate image_id(s): {_first(dupes)}")
    row = {iid: i for i, iid in enumerate(ids)}
    col = table.column("image")

    def read(iid: str) -> bytes:
        cell = col[row[iid]].as_py()
        data = cell.get("bytes") if cell else None
        if not data:
            raise DataError(f"{path_or_id} images: image {iid} has no embedded bytes")
        return data

    shas = {iid: sha256_bytes(read(iid)) for iid in ids}
    meta_cols = [c for c in ("image_id", "concept", "country", "tags") if c in split.column_names]
    meta = split.select_columns(meta_cols).to_pandas()
    meta["image_id"] = meta["image_id"].astype(str)
    store = ImageStore(ids, shas, read)
    ds = XCMDataset(tr, store, f"{path_or_id}@{revision}" if revision else str(path_or_id),
                    "release", meta)
    raise_on_violations(triplet_violations(tr, meta, set(ids)), f"{path_or_id}")
    return ds


# -- the authors' CSV --------------------------------------------------------------------------
def read_query_texts(path: Path | None) -> dict[tuple[str, str], str]:
    """(concept, language) -> query text, from ``--queries`` or ``data/queries.csv``."""
    if path is None:
        try:
            return tables.native_terms()
        except tables.TableError as e:
            raise DataError(f"no query texts: {e}; pass --queries FILE") from e
    if not path.is_file():
        raise DataError(f"--queries: no such file {path}")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        require_columns(list(reader.fieldnames or []), ["concept", "language", "text"], str(path))
        return {(r["concept"], r["language"]): r["text"] for r in reader if r["text"]}


def read_authors_frame(path: Path) -> pd.DataFrame:
    """The authors' triplet file as strings (``dtype=str``, empty cells stay ``""``), with its
    :data:`AUTHORS_COLUMNS` checked; any problem is one :class:`DataError` line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"authors' triplet file {path}: no such file")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as e:  # noqa: BLE001 - any parser failure is bad input
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"authors' triplet file {path}: unreadable CSV ({msg})") from e
    missing = [c for c in AUTHORS_COLUMNS if c not in raw.columns]
    if missing:
        raise DataError(f"{path}: not the authors' triplet format (missing column(s) "
                        f"{', '.join(missing)})")
    return raw


def load_authors_csv(
    csv_path: str | Path, images_dir: str | Path, queries: str | Path | None = None,
    hash_memo: FileHashMemo | None = None,
) -> XCMDataset:
    """The authors' ``xcm-bench.csv`` with images from a folder and native query texts
    (``hash_memo`` spares re-hashing image files seen before)."""
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise DataError(f"--triplets-csv: no such file {csv_path}")
    tr = authors_to_triplets(read_authors_frame(csv_path))
    texts = read_query_texts(Path(queries) if queries else None)
    keys = list(zip(tr["query_concept"], tr["query_language"], strict=True))
    missing = sorted({f"{c}/{lang}" for c, lang in keys if (c, lang) not in texts})
    if missing:
        raise DataError(f"no query text for {len(missing)} concept/language pair(s): "
                        f"{_first(missing)}")
    tr["query_text"] = [texts[k] for k in keys]
    wanted = referenced_ids(tr)
    store = ImageStore.from_folder(Path(images_dir), wanted, hash_memo)
    unknown = sorted(wanted - set(store.ids))
    if unknown:
        bad_rows = tr[~tr[["query_image_id", "semantic_image_id", "cultural_image_id",
                           "non_relevant_image_id"]].isin(set(store.ids)).all(axis=1)]
        raise DataError(
            f"{len(unknown)} image id(s) of {csv_path.name} not found in {images_dir} "
            f"(first: {_first(unknown)}); {len(bad_rows)} triplet(s) affected, first rows: "
            f"{_first(bad_rows['triplet_id'].tolist())}"
        )
    raise_on_violations(triplet_violations(tr), str(csv_path))
    return XCMDataset(tr, store, str(csv_path.resolve()), "authors-csv")


def authors_to_triplets(raw: pd.DataFrame) -> pd.DataFrame:
    """Map the authors' columns to the release's (countries to ISO alpha-3)."""
    names = sorted(set(raw["query_country"]) | set(raw["semantically_relevant_candidate_country"])
                   | set(raw["culturally_relevant_candidate_country"])
                   | set(raw["non_relevant_candidate_country"]))
    iso: dict[str, str] = {}
    bad = []
    for n in names:
        try:
            iso[n] = tables.country(n).code
        except tables.TableError:
            bad.append(n)
    if bad:
        raise DataError(f"unknown country name(s) in the authors' file: {_first(bad)}")
    lang = {c.code: c.language for c in tables.countries()}
    qk = raw["query_country"].map(iso)
    return pd.DataFrame({
        "triplet_id": raw["query_index"].astype(str),
        "query_image_id": raw["query_image_id"],
        "query_concept": raw["query_concept"],
        "query_country": qk,
        "query_language": qk.map(lang),
        "query_text": "",
        "semantic_image_id": raw["semantically_relevant_candidate_image_id"],
        "semantic_country": raw["semantically_relevant_candidate_country"].map(iso),
        "cultural_image_id": raw["culturally_relevant_candidate_image_id"],
        "cultural_concept": raw["culturally_relevant_candidate_concept"],
        "non_relevant_image_id": raw["non_relevant_candidate_image_id"],
        "non_relevant_concept": raw["non_relevant_candidate_concept"],
        "non_relevant_country": raw["non_relevant_candidate_country"].map(iso),
        "semantic_concept": raw["semantically_relevant_candidate_concept"],
        "cultural_country": raw["culturally_relevant_candidate_country"].map(iso),
    })
