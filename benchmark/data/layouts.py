"""Which 3XCM layout a source is in, decided once by its configs and columns: :func:`open_xcm`.

In order: ``--triplets-csv FILE --images DIR`` (the authors' CSV); configs ``triplets`` and
``images`` (our release); config ``image_metadata``, or one config with its columns (the
authors' published layout). Anything else is one :class:`~core.errors.DataError` line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from benchmark.data.dataset import XCMDataset
from benchmark.data.images import FileHashMemo
from benchmark.data.published import REQUIRED_IMAGE_COLUMNS, load_published
from benchmark.data.xcm import load_authors_csv, load_release
from core import hub as hf
from core.errors import DataError


class XCMSourceLike(Protocol):
    """What names a 3XCM source (the task configs have these fields)."""

    dataset: str | None
    revision: str | None
    triplets_csv: Path | None
    images: Path | None


@dataclass(frozen=True)
class XCMSource:
    """A 3XCM source named outside a task config (the report's gallery, tests)."""

    dataset: str | None = None
    revision: str | None = None
    triplets_csv: Path | None = None
    images: Path | None = None


def open_xcm(source: XCMSourceLike, hash_memo: FileHashMemo | None = None) -> XCMDataset:
    """The 3XCM dataset ``source`` names, in whichever layout it is (module docstring); the
    query texts are applied later (:func:`benchmark.data.query_texts.with_texts`)."""
    if source.triplets_csv and source.images:
        if source.dataset:
            raise DataError("give --dataset or --images (with --triplets-csv), not both")
        return load_authors_csv(source.triplets_csv, source.images, hash_memo=hash_memo,
                                with_texts=False)
    if source.dataset:
        return _open_hub_layout(str(source.dataset), source.revision, source.triplets_csv)
    if source.triplets_csv:
        raise DataError("--triplets-csv needs --images DIR (files named <image_id>.<ext>) or "
                        "--dataset in the authors' published layout")
    raise DataError("3xcm needs --dataset PATH_OR_HUB_ID or --triplets-csv FILE --images DIR")


def _open_hub_layout(path_or_id: str, revision: str | None,
                     triplets_csv: Path | None) -> XCMDataset:
    """Layouts 2-4: a folder or hub id, by its configs and columns."""
    names = hf.config_names(path_or_id, revision)
    if {"triplets", "images"} <= set(names):
        if triplets_csv is not None:
            raise DataError(f"--triplets-csv with --dataset: {path_or_id} is a release (configs "
                            "triplets and images), which has its own triplets")
        return load_release(path_or_id, revision)
    if "image_metadata" in names:
        images = hf.load_split(path_or_id, "image_metadata", None, revision)
        bench = None
        if "benchmark" in names and triplets_csv is None:
            bench = hf.load_split(path_or_id, "benchmark", None, revision)
        return load_published(path_or_id, images, bench, triplets_csv, revision)
    if len(names) == 1:
        split = hf.load_split(path_or_id, names[0], None, revision)
        if set(REQUIRED_IMAGE_COLUMNS) <= set(split.column_names):
            return load_published(path_or_id, split, None, triplets_csv, revision)
        found = f"config {names[0]!r} with columns {', '.join(split.column_names)}"
    else:
        found = f"configs {', '.join(names)}"
    raise DataError(
        f"--dataset {path_or_id}: not a 3XCM layout ({found}); expected a release (configs "
        "triplets and images) or the authors' published layout (config image_metadata with "
        f"{', '.join(REQUIRED_IMAGE_COLUMNS)}; optional config benchmark)")
