"""The authors' published 3XCM (``Chula-AI/association_bias_benchmark``), as the hub holds it.

Config ``image_metadata`` (or a plain folder of its files); the triplets are its ``benchmark``
config, else ``--triplets-csv FILE``, else ``data/authors/xcm-bench.csv``. A triplet's query
text is its query image's ``concept_in_native``; country names become ISO codes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.data.dataset import (
    XCMDataset,
    referenced_ids,
    require_columns,
    unknown_ids_error,
)
from benchmark.data.images import ImageStore
from benchmark.data.xcm import authors_rows
from core import datatables
from core import hub as hf
from core.authors import AUTHORS_COLUMNS, country_codes, read_authors_frame
from core.errors import DataError
from core.files import sha256_bytes
from core.rules import (
    check_columns,
    check_not_empty,
    check_unique_images,
    raise_on_violations,
    triplet_violations,
)

log = logging.getLogger(__name__)

HUB_ID = "Chula-AI/association_bias_benchmark"
IMAGE_METADATA_COLUMNS = ["image", "image_id", "concept_id", "concept", "concept_in_native",
                          "concept_country", "country", "title"]
REQUIRED_IMAGE_COLUMNS = ["image", "image_id", "concept", "concept_in_native", "country"]
SHIPPED_TRIPLETS = "authors/xcm-bench.csv"


def _triplet_rows(what: str, bench: Any, triplets_csv: Path | None) -> tuple[pd.DataFrame, str]:
    """(triplets in release shape, where they came from)."""
    if triplets_csv is not None:
        return authors_rows(read_authors_frame(triplets_csv), str(triplets_csv)), str(triplets_csv)
    if bench is not None:
        src = f"{what} config benchmark"
        raw = bench.to_pandas()
        check_columns(raw, AUTHORS_COLUMNS, src)
        check_not_empty(len(raw), src)
        text = raw.astype(object).where(raw.notna(), "").astype(str)  # as their CSV reads
        return authors_rows(text, src), src
    path = datatables.data_path(SHIPPED_TRIPLETS)
    src = f"data/{SHIPPED_TRIPLETS}"
    log.info("%s has no benchmark config: triplets from %s", what, src)
    return authors_rows(read_authors_frame(path), src), src


def load_published(what: str, images: Any, bench: Any, triplets_csv: Path | None = None,
                   revision: str | None = None) -> XCMDataset:
    """The authors' published layout: ``images`` is the ``image_metadata`` split, ``bench``
    the ``benchmark`` split or None (then ``triplets_csv`` or the shipped file)."""
    src_images = f"{what} image_metadata"
    require_columns(images.column_names, REQUIRED_IMAGE_COLUMNS, src_images)
    cols = [c for c in IMAGE_METADATA_COLUMNS if c != "image" and c in images.column_names]
    meta = images.select_columns(cols).to_pandas()
    check_columns(meta, [c for c in REQUIRED_IMAGE_COLUMNS if c != "image"], src_images)
    if not len(meta):
        raise DataError(f"{src_images}: no images")
    meta["image_id"] = meta["image_id"].astype(str)
    check_unique_images(meta["image_id"].tolist(), src_images)
    meta["authors_country"] = meta["country"]
    countries = meta["country"].astype(str)
    meta["country"] = countries.map(country_codes(countries, src_images))
    tr, src_triplets = _triplet_rows(what, bench, triplets_csv)
    ids, read = hf.image_bytes_reader(images, "image_id", src_images)
    unknown_ids_error(tr, set(ids), src_triplets, src_images)
    term = dict(zip(meta["image_id"], meta["concept_in_native"], strict=True))
    tr["query_text"] = tr["query_image_id"].map(term)
    tr["query_text"] = tr["query_text"].where(tr["query_text"].notna(), "")
    raise_on_violations(triplet_violations(tr, meta[["image_id", "concept", "country"]],
                                           set(ids)), what)
    wanted = sorted(referenced_ids(tr))
    store = ImageStore(wanted, {iid: sha256_bytes(read(iid)) for iid in wanted}, read)
    did = f"{what}@{revision}" if revision else what
    notes = {"triplets_source": src_triplets, "images_in_dataset": len(ids)}
    return XCMDataset(tr, store, did, "published", meta, notes)
