"""The 3XCM dataset type every layout gives (:class:`XCMDataset`) and the helpers the layouts'
readers share: referenced image ids, column and id checks, country names to ISO codes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from benchmark.data.images import ImageStore
from core.errors import DataError
from core.release import TRIPLET_COLUMNS
from core.rules import IMAGE_ID_COLUMNS, first_items


@dataclass
class XCMDataset:
    """Validated triplets (``TRIPLET_COLUMNS``) plus the images they reference."""

    triplets: pd.DataFrame
    images: ImageStore
    dataset_id: str
    source_format: str  # release / published / authors-csv
    image_meta: pd.DataFrame | None = None  # image_id, concept, country (+ tags, + term)
    notes: dict[str, Any] = field(default_factory=dict)
    query_texts: dict[str, Any] = field(default_factory=dict)  # query_texts.provenance(...)

    @property
    def fingerprint(self) -> str:
        """sha256 over the triplet table and the content hash of every referenced image."""
        h = hashlib.sha256()
        h.update(self.triplets[TRIPLET_COLUMNS].to_csv(index=False).encode("utf-8"))
        for iid in sorted(referenced_ids(self.triplets)):
            h.update(f"{iid}\t{self.images.sha256[iid]}\n".encode())
        return h.hexdigest()


def referenced_ids(tr: pd.DataFrame) -> set[str]:
    return set(pd.unique(tr[IMAGE_ID_COLUMNS].to_numpy().ravel()))


def require_columns(columns: list[str], required: list[str], what: str) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise DataError(f"{what}: missing column(s) {', '.join(missing)}")


def unknown_ids_error(tr: pd.DataFrame, known: set[str], triplets: str, images: str) -> None:
    """One line naming the triplets' image ids that are not images of the dataset."""
    unknown = sorted(referenced_ids(tr) - known)
    if unknown:
        bad_rows = tr[~tr[IMAGE_ID_COLUMNS].isin(known).all(axis=1)]
        raise DataError(
            f"{len(unknown)} image id(s) of {triplets} not found in {images} "
            f"(first: {first_items(unknown)}); {len(bad_rows)} triplet(s) affected, first rows: "
            f"{first_items(bad_rows['triplet_id'].astype(str).tolist())}"
        )


