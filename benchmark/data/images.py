"""Image stores: content hashes up front, decoding only when an image must be embedded.

Folder datasets hash every file to find its cached embeddings; a :class:`FileHashMemo` (one
per embedding cache, opened by the run and passed to the loaders) remembers those hashes by
path, size and mtime, so a second run reads only the files that changed.

:func:`open_image` is the one gate every image passes before it is decoded, here and in the
builder's download validation: it reads the header only and refuses an image whose declared
pixel count exceeds the cap (:class:`ImageRefused`) before a single pixel is decoded. Pillow's
``Image.MAX_IMAGE_PIXELS`` is not the cap: it sets Pillow's *warning* level, and Pillow raises
only at twice that, so a 16000x16000 PNG (256 Mpx, 31 KB on disk, 4 GB decoded) would pass it.
"""

from __future__ import annotations

import io
import logging
import os
import sqlite3
import stat
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.data import DataError
from benchmark.files import create_shared, sha256_bytes

log = logging.getLogger(__name__)

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")
MAX_PIXELS = 178_956_970  # the evaluator's cap (Pillow's own error level, stated explicitly)


class ImageRefused(DataError):
    """An image refused unopened: its header declares more pixels than the cap."""

    def __init__(self, label: str, detail: str):
        super().__init__(f"refused image {label}: {detail} (decompression-bomb cap)")
        self.label, self.detail = label, detail


def open_image(data: bytes, label: str = "image", max_pixels: int = MAX_PIXELS) -> Any:
    """The PIL image of ``data`` opened from its header only (nothing decoded yet), after
    checking width x height against ``max_pixels``.

    Raises :class:`ImageRefused` over the cap (Pillow's own bomb error, raised at open above
    its limit, becomes the same refusal) and :class:`DataError` for bytes Pillow cannot
    identify (``__cause__`` holds Pillow's exception).
    """
    from PIL import Image

    with warnings.catch_warnings():  # our cap decides, not Pillow's warning level
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data))
        except Image.DecompressionBombError as e:
            raise ImageRefused(label, str(e).split(",", 1)[0]) from None
        except Exception as e:  # noqa: BLE001 - whatever the parser says, it is not an image
            raise DataError(f"undecodable image {label}: {type(e).__name__}: {e}") from e
    width, height = im.size
    if width * height > max_pixels:
        im.close()
        raise ImageRefused(
            label, f"{width}x{height} = {width * height} pixels exceeds the cap {max_pixels}")
    return im


def decode_image(data: bytes, label: str, max_pixels: int = MAX_PIXELS) -> Any:
    """Decode bytes to an RGB PIL image, or raise :class:`ImageRefused` (over the pixel cap,
    never decoded) or :class:`DataError` naming ``label``."""
    im = open_image(data, label, max_pixels)
    try:
        with im:
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
        """Decode every image in ``image_ids``; raise one DataError counting the images refused
        (over the pixel cap, never decoded) and the undecodable ones."""
        refused: list[str] = []
        bad: list[str] = []
        for iid in image_ids:
            try:
                decode_image(self.read(iid), iid)
            except ImageRefused as e:
                refused.append(f"{iid} ({e.detail})")
            except DataError:
                bad.append(iid)
        parts = []
        if refused:
            parts.append(f"{len(refused)} image(s) refused over the decompression-bomb cap of "
                         f"{MAX_PIXELS} pixels, first: {', '.join(refused[:3])}")
        if bad:
            parts.append(f"{len(bad)} undecodable image(s), first: {', '.join(bad[:5])}")
        if parts:
            raise DataError("; ".join(parts))

    @classmethod
    def from_bytes(cls, items: dict[str, bytes]) -> ImageStore:
        shas = {k: sha256_bytes(v) for k, v in items.items()}
        data = dict(items)
        return cls(list(items), shas, data.__getitem__)

    @classmethod
    def from_folder(cls, folder: Path, wanted: set[str] | None = None,
                    hash_memo: FileHashMemo | None = None) -> ImageStore:
        """Images named ``<image_id>.<ext>`` in ``folder`` (recursively, first path wins);
        ``hash_memo`` spares re-reading files hashed before."""
        if not folder.is_dir():
            raise DataError(f"--images: not a folder: {folder}")
        found: dict[str, tuple[str, os.stat_result]] = {}
        for dirpath, dirnames, filenames in os.walk(str(folder.absolute())):
            dirnames.sort()
            for name in sorted(filenames):
                stem, ext = os.path.splitext(name)
                if ext.lower() not in IMAGE_EXTS or (wanted is not None and stem not in wanted):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    found.setdefault(stem, (path, st))
        paths = {k: v[0] for k, v in found.items()}
        if hash_memo is not None:
            shas = hash_memo.sha256_many(found)
        else:
            shas = {k: sha256_bytes(_read(p)) for k, p in paths.items()}
        return cls(list(paths), shas, lambda k: _read(paths[k]))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class FileHashMemo:
    """sha256 of files remembered by (absolute path, size, mtime_ns) in a small SQLite file.

    Folder datasets (the authors' CSV + ``--images``, XM3600) would otherwise re-read and
    re-hash every image on every run just to find their cached embeddings; with the memo a
    second run stats the files and reads only those that changed.
    """

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = self._open(path)
        except sqlite3.DatabaseError as e:  # only a memo: start it anew, say so once
            log.warning("%s is not a usable file-hash memo (%s): starting it anew (files are "
                        "hashed again once)", path, e)
            for p in (path, path.with_name(path.name + "-wal"),
                      path.with_name(path.name + "-shm")):
                p.unlink(missing_ok=True)
            self.con = self._open(path)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        create_shared(path)  # SQLite alone would make it 0644 whatever the umask
        con = sqlite3.connect(path, timeout=60, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER,"
                        " mtime_ns INTEGER, sha256 TEXT NOT NULL)")
            con.execute("SELECT COUNT(*) FROM files").fetchone()
        except sqlite3.DatabaseError:
            con.close()
            raise
        return con

    def sha256_many(self, files: dict[str, tuple[str, os.stat_result]]) -> dict[str, str]:
        """sha256 per key of ``{key: (absolute path, its stat)}``."""
        known = {r[0]: r[1:] for r in self.con.execute("SELECT path, size, mtime_ns, sha256 "
                                                       "FROM files")}
        out: dict[str, str] = {}
        new: list[tuple[str, int, int, str]] = []
        for key, (p, st) in files.items():
            ap = str(p)
            hit = known.get(ap)
            if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
                out[key] = hit[2]
                continue
            sha = sha256_bytes(_read(p))
            out[key] = sha
            new.append((ap, st.st_size, st.st_mtime_ns, sha))
        if new:
            self.con.execute("BEGIN IMMEDIATE")
            self.con.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", new)
            self.con.execute("COMMIT")
        return out


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
