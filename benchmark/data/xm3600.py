"""Crossmodal-3600 (XM3600): 3,600 images, captions in 36 languages, three layouts.

The official ``captions.jsonl``, the hub's ``mteb/xm3600`` and the authors' copy (docs/xm3600.md,
"Data") all give the same :class:`XM3600`: images sorted by id and the caption pool in a
canonical order, so tie-breaking by pool position does not depend on the layout.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.data.images import FileHashMemo, ImageStore
from core import datatables
from core.errors import DataError
from core.files import sha256_bytes
from core.hub import cache_kwargs, check_spec, image_bytes_reader, one_line
from core.text import StrictDictReader

log = logging.getLogger(__name__)

HUB_ID = "mteb/xm3600"
HUB_REVISION = "536cd45bbfe53de9b08c0483bb4a76a4bd3673fa"  # the revision MTEB pins
HUB_COLUMNS = ["image_id", "image", "captions", "image_locale"]
AUTHORS_COLUMNS = ["image_key", "image", "captions"]
AUTHORS_LOCALES = "authors/xm3600-image-locales.csv"
ALIASES = {"iw": "he", "nb": "no", "tl": "fil"}


@dataclass
class XM3600:
    """Images (the queries) and the mixed-language caption pool."""

    image_ids: list[str]
    locales: list[str]  # per image: its "image/locale"
    images: ImageStore
    captions: list[str]  # the pool, canonical order
    caption_image: np.ndarray  # (n_captions,) int: index into image_ids
    caption_language: list[str]  # (n_captions,) language code
    dataset_id: str
    source_format: str  # official / hub / authors
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """sha256 over image ids, locales, image content hashes and the caption pool."""
        h = hashlib.sha256()
        for iid, loc in zip(self.image_ids, self.locales, strict=True):
            h.update(f"{iid}\t{loc}\t{self.images.sha256[iid]}\n".encode())
        for i, lang, text in zip(self.caption_image, self.caption_language, self.captions,
                                 strict=True):
            h.update(f"{self.image_ids[i]}\t{lang}\t{text}\n".encode())
        return h.hexdigest()


class _Collector:
    """Validates (image, language, captions) triples and builds the canonical pool."""

    def __init__(self, what: str):
        self.what = what
        self.codes = [lang.code for lang in datatables.languages()]
        self.known = set(self.codes)
        self.by_image: dict[str, dict[str, list[str]]] = {}
        self.locales: dict[str, str] = {}
        self.dropped = 0
        self.aliased: dict[str, int] = {}

    def lang(self, code: Any, where: str) -> str:
        c = str(code)
        if c in ALIASES:
            self.aliased[c] = self.aliased.get(c, 0) + 1
            c = ALIASES[c]
        if c not in self.known:
            raise DataError(f"{self.what}: {where}: language {code!r} is not one of the 36 "
                            "XM3600 languages of data/xm3600_languages.csv")
        return c

    def image(self, key: Any, locale: Any, where: str) -> str:
        if not isinstance(key, str) or not key.strip():
            raise DataError(f"{self.what}: {where}: missing or empty image key")
        loc = self.lang(locale, where) if locale is not None else ""
        if key in self.locales and self.locales[key] != loc:
            raise DataError(f"{self.what}: {where}: image {key} has two locales "
                            f"({self.locales[key]!r}, {loc!r})")
        self.locales[key] = loc
        self.by_image.setdefault(key, {})
        return key

    def add(self, key: str, lang: str, captions: Any, where: str) -> None:
        if isinstance(captions, str) or not isinstance(captions, list | tuple):
            raise DataError(f"{self.what}: {where}: captions of {lang!r} must be a list of strings")
        good = [c for c in captions if isinstance(c, str) and c.strip()]
        self.dropped += len(captions) - len(good)
        self.by_image[key].setdefault(lang, []).extend(good)

    def build(self, store: ImageStore, dataset_id: str, source_format: str) -> XM3600:
        ids = sorted(self.by_image)
        texts: list[str] = []
        owner: list[int] = []
        langs: list[str] = []
        for i, iid in enumerate(ids):
            per = self.by_image[iid]
            for code in self.codes:
                for text in per.get(code, []):
                    texts.append(text)
                    owner.append(i)
                    langs.append(code)
        notes: dict[str, Any] = {"dropped_captions": self.dropped}
        if self.aliased:
            notes["language_aliases"] = {f"{a}->{ALIASES[a]}": n for a, n in self.aliased.items()}
        if self.dropped:
            log.warning("%s: dropped %d empty or non-string captions", self.what, self.dropped)
        if not texts:
            raise DataError(f"{self.what}: no captions found")
        return XM3600(ids, [self.locales[i] for i in ids], store, texts,
                      np.asarray(owner, np.int64), langs, dataset_id, source_format, notes)


def load_official(path: str | Path, images_dir: str | Path | None = None,
                  hash_memo: FileHashMemo | None = None) -> XM3600:
    """The official layout: ``path`` is the folder holding ``captions.jsonl`` or that file."""
    path = Path(path)
    jsonl = path / "captions.jsonl" if path.is_dir() else path
    if not jsonl.is_file():
        raise DataError(f"XM3600: no captions.jsonl at {jsonl}")
    col = _Collector(jsonl.name)
    with jsonl.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{jsonl}: line {n}: not valid JSON ({e.msg})") from e
            if not isinstance(obj, dict):
                raise DataError(f"{jsonl}: line {n}: expected a JSON object")
            where = f"line {n}"
            if "image/key" in obj and obj["image/key"] in col.by_image:
                raise DataError(f"{jsonl}: {where}: image {obj['image/key']} listed twice")
            key = col.image(obj.get("image/key"), obj.get("image/locale"), where)
            for code, val in obj.items():
                if code.startswith("image/"):
                    continue
                if not isinstance(val, dict) or "caption" not in val:
                    raise DataError(f"{jsonl}: {where}: {code!r} has no \"caption\" list")
                col.add(key, col.lang(code, where), val["caption"], where)
    folder = Path(images_dir) if images_dir else jsonl.parent / "images"
    if not images_dir and not folder.is_dir():
        folder = jsonl.parent
    store = ImageStore.from_folder(folder, wanted=set(col.by_image), hash_memo=hash_memo)
    missing = sorted(set(col.by_image) - set(store.ids))
    if missing:
        raise DataError(f"XM3600: {len(missing)} of {len(col.by_image)} images listed in "
                        f"{jsonl.name} have no file <key>.jpg in {folder}; first: "
                        f"{', '.join(missing[:5])}")
    return col.build(store, str(jsonl.parent if jsonl.name == "captions.jsonl" else jsonl),
                     "official")


def load_hub(path_or_id: str, revision: str | None = None) -> XM3600:
    """A ``datasets`` folder or hub id: the ``mteb/xm3600`` layout (one split per language)
    or the authors' copy (one split, ``captions`` a {language: [captions]} mapping)."""
    if revision is None and path_or_id == HUB_ID:
        revision = HUB_REVISION
    check_spec(path_or_id, "XM3600")
    try:
        layout, data = _hub_data(path_or_id, revision)
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 - any loader failure is one clear line
        raise DataError(f"XM3600: cannot load {path_or_id!r}: {one_line(e)}") from e
    col = _Collector(str(path_or_id))
    did = f"{path_or_id}@{revision}" if revision else str(path_or_id)
    if layout == "authors":
        notes = _collect_authors(data, col)
        store = _hub_image_store(data.rename_column("image_key", "image_id"),
                                 set(col.by_image), str(path_or_id))
        ds = col.build(store, did, "authors")
        ds.notes.update(notes)
        return ds
    dd, first = data
    for split in sorted(dd):
        lang = col.lang(split, f"split {split!r}")
        for r, row in enumerate(dd[split]):
            where = f"split {split!r} row {r}"
            key = col.image(row["image_id"], row["image_locale"], where)
            col.add(key, lang, row["captions"], where)
    store = _hub_image_store(first, set(col.by_image), str(path_or_id))
    return col.build(store, did, "hub")


def _collect_authors(ds: Any, col: _Collector) -> dict[str, Any]:
    """Feed the authors' rows to ``col``; notes on where the locales came from."""
    has_locale = "image_locale" in ds.column_names
    locales = {}  # else image key -> locale, from their captions_index_key_native.csv copy
    if not has_locale:
        f = datatables.data_file(AUTHORS_LOCALES)
        reader = StrictDictReader(io.StringIO(f.text, newline=""), str(f.path), DataError)
        locales = {r["key"]: r["native"] for r in reader}
    cols = ["image_key", "captions"] + (["image_locale"] if has_locale else [])
    no_locale = 0
    for r, row in enumerate(ds.select_columns(cols)):
        where = f"row {r}"
        key = row["image_key"]
        if key in col.by_image:
            raise DataError(f"{col.what}: {where}: image {key} listed twice")
        loc = row["image_locale"] if has_locale else locales.get(key)
        no_locale += loc is None
        key = col.image(key, loc, where)
        caps = row["captions"]
        if isinstance(caps, list) and all(isinstance(p, list | tuple) and len(p) == 2 for p in caps):
            caps = dict(caps)  # an arrow map column reads as (key, value) pairs
        if not isinstance(caps, dict):
            raise DataError(f"{col.what}: {where}: captions must be a {{language: [captions]}} "
                            f"mapping, got {type(caps).__name__}")
        for code, texts in caps.items():
            if texts is not None:  # a struct field absent for this image
                col.add(key, col.lang(code, where), texts, where)
    source = "image_locale column" if has_locale else f"data/{AUTHORS_LOCALES}"
    return {"locale_source": source, "images_without_locale": no_locale}


def _hub_data(path_or_id: str, revision: str | None) -> tuple[str, Any]:
    """("authors", its one split) or ("hub", :func:`_hub_splits`), by the data's columns."""
    import datasets

    cache = cache_kwargs(path_or_id)
    builder = datasets.load_dataset_builder(path_or_id, revision=revision, **cache)
    files = getattr(builder.config, "data_files", None)
    columns = list(builder.info.features) if builder.info.features else None
    if columns is None and builder.name == "parquet" and files:
        columns = _parquet_columns(files[sorted(files)[0]])
    one_split = len(files or {}) <= 1  # the mteb layout has one split per language
    if (set(AUTHORS_COLUMNS) <= set(columns)) if columns is not None else one_split:
        dd = datasets.load_dataset(path_or_id, revision=revision, **cache)  # one split: loaded once
        first = next(iter(dd.values()))
        if set(AUTHORS_COLUMNS) <= set(first.column_names):
            if len(dd) != 1:
                raise DataError(f"XM3600: {path_or_id}: the authors' layout has one split, "
                                f"found {sorted(dd)}")
            return "authors", first
    return "hub", _hub_splits(path_or_id, revision, builder, cache)


def _hub_splits(path_or_id: str, revision: str | None, builder: Any,
                cache: dict[str, str]) -> tuple[Any, Any]:
    """(per-language caption splits, one split with images: parquet converts only its images)."""
    import datasets

    meta_cols = [c for c in HUB_COLUMNS if c != "image"]
    files = getattr(builder.config, "data_files", None)
    if builder.name == "parquet" and files:
        first = sorted(files)[0]
        schema = _parquet_columns(files[first])
        missing = [c for c in HUB_COLUMNS if schema is not None and c not in schema]
        if missing:
            raise DataError(f"XM3600: split {first!r} lacks columns {missing} (has {schema})")
        meta = datasets.load_dataset("parquet", data_files=dict(files), columns=meta_cols,
                                     **cache)
        imgs = datasets.load_dataset("parquet", data_files={first: files[first]}, split=first,
                                     columns=["image_id", "image"], **cache)
        return meta, imgs
    dd = datasets.load_dataset(path_or_id, revision=revision, **cache)
    if not isinstance(dd, datasets.DatasetDict) or not len(dd):
        raise DataError(f"XM3600: {path_or_id!r}: expected one split per language")
    for split in dd:
        missing = [c for c in HUB_COLUMNS if c not in dd[split].column_names]
        if missing:
            raise DataError(f"XM3600: split {split!r} lacks columns {missing} "
                            f"(has {dd[split].column_names})")
    return dd.select_columns(meta_cols), dd[sorted(dd)[0]]


def _parquet_columns(files: Any) -> list[str] | None:
    """Column names of the first parquet file when it is local (else None: checked later)."""
    first = next(iter(files), None)
    if first is None or not Path(str(first)).is_file():
        return None
    import pyarrow.parquet as pq

    return list(pq.read_schema(str(first)).names)


def _hub_image_store(ds: Any, wanted: set[str], what: str) -> ImageStore:
    """Image bytes of one split (every split carries the same images), read lazily."""
    ids, read = image_bytes_reader(ds, "image_id", f"XM3600: {what}")
    missing = sorted(wanted - set(ids))
    if missing:
        raise DataError(f"XM3600: {what}: {len(missing)} images have captions but no image; "
                        f"first: {', '.join(missing[:5])}")
    order = sorted(wanted)
    return ImageStore(order, {iid: sha256_bytes(read(iid)) for iid in order}, read)


def load_xm3600(
    spec: str | Path | None, images_dir: str | Path | None = None, revision: str | None = None,
    hash_memo: FileHashMemo | None = None,
) -> XM3600:
    """A ``captions.jsonl`` (or its folder) is the official layout; anything else a
    ``datasets`` folder or hub id (default ``mteb/xm3600``)."""
    if spec is None:
        return load_hub(HUB_ID, revision)
    p = Path(spec)
    if p.suffix == ".jsonl" or (p.is_dir() and (p / "captions.jsonl").is_file()):
        return load_official(p, images_dir, hash_memo)
    if p.suffix or (p.exists() and not p.is_dir()):
        raise DataError(f"XM3600: {spec}: expected captions.jsonl, a folder holding it, or a "
                        "datasets folder / hub id")
    return load_hub(str(spec), revision)
