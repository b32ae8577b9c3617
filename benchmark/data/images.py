"""Image stores: content hashes up front, decoding only when an image must be embedded."""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.data import DataError

log = logging.getLogger(__name__)

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")
MAX_PIXELS = 178_956_970  # Pillow's default decompression-bomb limit, stated explicitly


def decode_image(data: bytes, label: str) -> Any:
    """Decode bytes to an RGB PIL image or raise :class:`DataError` naming ``label``."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            return im.convert("RGB")
    except Exception as e:  # noqa: BLE001 - any decoder failure is bad data
        raise DataError(f"undecodable image {label}: {type(e).__name__}: {e}") from e


@dataclass
class ImageStore:
    """``image_id -> bytes`` with sha256 per id. ``source`` says where bytes come from."""

    ids: list[str]
    sha256: dict[str, str]
    reader: Callable[[str], bytes]

    def __contains__(self, image_id: str) -> bool:
        return image_id in self.sha256

    def read(self, image_id: str) -> bytes:
        return self.reader(image_id)

    def load(self, image_ids: Sequence[str]) -> LazyImages:
        """A lazy sequence of decoded images (decoded batch by batch while embedding)."""
        return LazyImages(self, list(image_ids))

    def check_decodable(self, image_ids: Sequence[str]) -> None:
        """Decode every image in ``image_ids``; raise one DataError counting all failures."""
        bad: list[str] = []
        for iid in image_ids:
            try:
                decode_image(self.read(iid), iid)
            except DataError:
                bad.append(iid)
        if bad:
            raise DataError(
                f"{len(bad)} undecodable image(s), first: {', '.join(bad[:5])}"
            )

    @classmethod
    def from_bytes(cls, items: dict[str, bytes]) -> ImageStore:
        shas = {k: hashlib.sha256(v).hexdigest() for k, v in items.items()}
        data = dict(items)
        return cls(list(items), shas, data.__getitem__)

    @classmethod
    def from_folder(cls, folder: Path, wanted: set[str] | None = None) -> ImageStore:
        """Images named ``<image_id>.<ext>`` in ``folder`` (recursively)."""
        if not folder.is_dir():
            raise DataError(f"--images: not a folder: {folder}")
        paths: dict[str, Path] = {}
        for p in sorted(folder.rglob("*")):
            if p.suffix.lower() in IMAGE_EXTS and p.is_file():
                if wanted is None or p.stem in wanted:
                    paths.setdefault(p.stem, p)
        shas = {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in paths.items()}
        return cls(list(paths), shas, lambda k: paths[k].read_bytes())


class LazyImages(Sequence):
    """Sequence of PIL images decoded on access (slices decode only their items)."""

    def __init__(self, store: ImageStore, ids: list[str]):
        self.store, self.ids = store, ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [decode_image(self.store.read(x), x) for x in self.ids[i]]
        return decode_image(self.store.read(self.ids[i]), self.ids[i])
