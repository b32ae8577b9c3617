"""The authors' triplet file (``xcm-bench.csv``): its columns, its reader and its mapping to the
release's triplet columns; the triplet tools and the evaluator both read it through here."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from core import datatables
from core.errors import DataError
from core.rules import check_not_empty, first_items
from core.text import StrictDictReader

AUTHORS_COLUMNS = [
    "query_index", "query_image_id", "query_concept", "query_country",
    "semantically_relevant_candidate_image_id", "semantically_relevant_candidate_concept",
    "semantically_relevant_candidate_country", "culturally_relevant_candidate_image_id",
    "culturally_relevant_candidate_concept", "culturally_relevant_candidate_country",
    "non_relevant_candidate_image_id", "non_relevant_candidate_concept",
    "non_relevant_candidate_country",
]


def country_codes(names: set[str] | pd.Series, what: str) -> dict[str, str]:
    """Country name (the authors', or code/label/English name) -> ISO alpha-3, or DataError."""
    iso: dict[str, str] = {}
    bad = []
    for n in sorted(set(names)):
        try:
            iso[n] = datatables.country(n).code
        except datatables.TableError:
            bad.append(n)
    if bad:
        raise DataError(f"{what}: unknown country name(s) {first_items(bad)}")
    return iso


def read_authors_frame(path: Path) -> pd.DataFrame:
    """The authors' triplet file as strings (``dtype=str``, empty cells stay ``""``), with its
    :data:`AUTHORS_COLUMNS` and at least one row; any problem is one :class:`DataError` line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"authors' triplet file {path}: no such file")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = StrictDictReader(f, f"authors' triplet file {path}", DataError)
            raw = pd.DataFrame(list(reader), columns=reader.fieldnames or [], dtype=str)
    except (UnicodeDecodeError, csv.Error) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"authors' triplet file {path}: unreadable CSV ({msg})") from e
    missing = [c for c in AUTHORS_COLUMNS if c not in raw.columns]
    if missing:
        raise DataError(f"{path}: not the authors' triplet format (missing column(s) "
                        f"{', '.join(missing)})")
    check_not_empty(len(raw), str(path))
    return raw


def authors_to_triplets(raw: pd.DataFrame) -> pd.DataFrame:
    """Map the authors' columns to the release's (countries to ISO alpha-3)."""
    iso = country_codes(set(raw["query_country"])
                        | set(raw["semantically_relevant_candidate_country"])
                        | set(raw["culturally_relevant_candidate_country"])
                        | set(raw["non_relevant_candidate_country"]), "the authors' file")
    lang = {c.code: c.language for c in datatables.countries()}
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

