"""3XCM triplets and images: our release and the authors' CSV, read and validated.

The checks are the shared rule set of :mod:`core.rules` (as ``python -m triplets validate``);
any problem is one :class:`DataError` line naming the first offending rows and counting all.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.data import query_texts
from benchmark.data.dataset import (  # noqa: F401  (re-exported: the dataset type's old home)
    XCMDataset,
    referenced_ids,
    require_columns,
    unknown_ids_error,
)
from benchmark.data.images import FileHashMemo, ImageStore
from core import hub as hf
from core.authors import authors_to_triplets, read_authors_frame
from core.build_record import read_build_record
from core.errors import DataError
from core.files import sha256_bytes
from core.release import (  # noqa: F401  (IMAGE_COLUMNS: re-exported)
    IMAGE_COLUMNS,
    PROVENANCE_COLUMNS,
    TRIPLET_COLUMNS,
    load_configs,
)
from core.rules import (
    check_columns,
    check_not_empty,
    check_tags,
    check_unique_images,
    image_bytes_violation,
    raise_on_image_violations,
    raise_on_violations,
    triplet_violations,
)

log = logging.getLogger(__name__)


# -- the release -------------------------------------------------------------------------------
def _release_image_shas(ids: list[str], read: Any, meta: pd.DataFrame, what: str) -> dict[str, str]:
    """sha256 of every image's embedded bytes, checked by rule ``image_bytes``."""
    want = dict(zip(meta["image_id"], meta["sha256"], strict=True)) if "sha256" in meta else {}
    shas: dict[str, str] = {}
    bad = []
    for iid in ids:
        try:
            data = read(iid)
        except DataError:
            data = None
        digest = sha256_bytes(data) if data else None
        if "sha256" in meta and (v := image_bytes_violation(iid, data, want.get(iid), digest)):
            bad.append(v)
        elif digest is None:
            raise DataError(f"{what}: image {iid} has no embedded bytes")
        if digest:
            shas[iid] = digest
    raise_on_image_violations(bad, what)
    return shas


def _clean_provenance(tr: pd.DataFrame) -> pd.DataFrame:
    """Sources as text, reviewers as integers >= 0; a bad cell: ``unmatched``, 0 reviewers."""
    n = pd.to_numeric(tr["query_term_reviewers"], errors="coerce")
    src = tr["query_term_source"].where(tr["query_term_source"].notna(), "").astype(str)
    bad = n.isna() | (n < 0) | (n != n.round()) | (src.str.strip() == "")
    if bad.any():
        log.warning("%d triplet(s) with an unreadable query_term_source / query_term_reviewers: "
                    "counted as unmatched", int(bad.sum()))
    out = tr.copy()
    out["query_term_source"] = src.where(~bad, "unmatched")
    out["query_term_reviewers"] = n.where(~bad, 0).astype(int)
    return out


def load_release(path_or_id: str, revision: str | None = None) -> XCMDataset:
    """The ``triplets`` and ``images`` configs, checked with the release validator's rules."""
    what = str(path_or_id)
    hf.check_spec(what)
    tr, imgs = load_configs(what, revision)
    check_columns(tr, TRIPLET_COLUMNS, f"{what} triplets")
    check_not_empty(len(tr), f"{what} triplets")
    prov = [c for c in PROVENANCE_COLUMNS if c in tr.columns]
    tr = tr[TRIPLET_COLUMNS + (PROVENANCE_COLUMNS if len(prov) == 2 else [])].astype(
        {"triplet_id": str})
    if len(prov) == 2:
        tr = _clean_provenance(tr)
    require_columns(imgs.column_names, ["image_id", "image"], f"{what} images")
    meta_cols = [c for c in ("image_id", "concept", "country", "tags", "sha256")
                 if c in imgs.column_names]
    meta = imgs.select_columns(meta_cols).to_pandas()
    check_columns(meta, ["image_id", "concept", "country"], f"{what} images")
    meta["image_id"] = meta["image_id"].astype(str)
    check_unique_images(meta["image_id"].tolist(), f"{what} images")
    if "tags" in meta:
        check_tags(meta["image_id"], meta["tags"], f"{what} images", meta["concept"])
    ids, read = hf.image_bytes_reader(imgs, "image_id", f"{what} images", embedded_only=True)
    shas = _release_image_shas(ids, read, meta, f"{what} images")
    sampling = read_build_record(what).get("sampling") or {}  # a local build.json, else {}
    raise_on_violations(triplet_violations(
        tr, meta, set(ids), tags_known="tags" in meta, check_query_text=True, shas=shas,
        distinct_language=bool(sampling.get("distinct_language", False))), what)
    did = f"{what}@{revision}" if revision else what
    return XCMDataset(tr, ImageStore(ids, shas, read), did, "release", meta,
                      {"build_record": bool(sampling)})


# -- the authors' CSV ---------------------------------------------------------------------------


def authors_rows(raw: pd.DataFrame, what: str) -> pd.DataFrame:
    """The authors' rows in release shape, checked with the triplet rules (not the audit of
    their id encoding: a file in their format with other ids is scored)."""
    tr = authors_to_triplets(raw)
    raise_on_violations(triplet_violations(tr), what)
    return tr


def load_authors_csv(
    csv_path: str | Path, images_dir: str | Path, queries_csv: str | Path | None = None,
    hash_memo: FileHashMemo | None = None, *, with_texts: bool = True,
) -> XCMDataset:
    """The authors' ``xcm-bench.csv`` with images from a folder and, ``with_texts``, query texts."""
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise DataError(f"--triplets-csv: no such file {csv_path}")
    tr = authors_rows(read_authors_frame(csv_path), str(csv_path))
    store = ImageStore.from_folder(Path(images_dir), referenced_ids(tr), hash_memo)
    unknown_ids_error(tr, set(store.ids), csv_path.name, str(images_dir))
    ds = XCMDataset(tr, store, str(csv_path.resolve()), "authors-csv")
    if not with_texts:
        return ds
    return query_texts.with_query_table(ds, query_texts.read_file(Path(queries_csv)) if queries_csv
                                        else query_texts.default_table())


