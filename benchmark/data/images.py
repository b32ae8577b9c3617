"""Image stores: content hashes up front, decoding (by :mod:`core.decode`) only when an image
must be embedded. A :class:`FileHashMemo` lets a second run re-hash only the files that changed.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.decode import (
    MAX_FILE_BYTES,
    MAX_PIXELS,
    ImageRefused,
    decode_image,
    open_image,
    read_image_file,
)
from core.errors import DataError
from core.files import create_shared, sha256_bytes

log = logging.getLogger(__name__)

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")
__all__ = ["IMAGE_EXTS", "MAX_FILE_BYTES", "MAX_PIXELS", "FileHashMemo", "ImageRefused",
           "ImageStore", "LazyImages", "decode_image", "open_image"]


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
        """Decode every image in ``image_ids``; one DataError counts the refused and undecodable."""
        refused: dict[str, list[str]] = {}
        bad: list[str] = []
        for iid in image_ids:
            try:
                decode_image(self.read(iid), iid)
            except ImageRefused as e:
                refused.setdefault(e.kind, []).append(f"{iid} ({e.detail})")
            except DataError:
                bad.append(iid)
        raise_refusals(refused, bad)

    @classmethod
    def from_bytes(cls, items: dict[str, bytes]) -> ImageStore:
        shas = {k: sha256_bytes(v) for k, v in items.items()}
        data = dict(items)
        return cls(list(items), shas, data.__getitem__)

    @classmethod
    def from_folder(cls, folder: Path, wanted: set[str] | None = None,
                    hash_memo: FileHashMemo | None = None) -> ImageStore:
        """Images named ``<image_id>.<ext>`` in ``folder`` (recursively); two files for one id,
        or a file above :data:`MAX_FILE_BYTES` (never read), is one :class:`DataError`."""
        if not folder.is_dir():
            raise DataError(f"--images: not a folder: {folder}")
        found: dict[str, list[tuple[str, os.stat_result]]] = {}
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
                    found.setdefault(stem, []).append((path, st))
        _check_folder_files(found, folder)
        files = {k: v[0] for k, v in found.items()}
        paths = {k: v[0] for k, v in files.items()}
        if hash_memo is not None:
            shas = hash_memo.sha256_many(files)
        else:
            shas = {k: sha256_bytes(read_image_file(p, k)) for k, p in paths.items()}
        return cls(list(paths), shas, lambda k: read_image_file(paths[k], k))


def _check_folder_files(found: dict[str, list[tuple[str, os.stat_result]]], folder: Path) -> None:
    """One id, one file; no file above the size limit (refused from its ``stat``, unread)."""
    twice = {k: v for k, v in found.items() if len(v) > 1}
    if twice:
        k, v = next(iter(sorted(twice.items())))
        names = " and ".join(os.path.relpath(p, folder.absolute()) for p, _ in v)
        raise DataError(f"--images {folder}: {len(twice)} image id(s) with more than one file; "
                        f"first: {k}: {names} (keep one file per id)")
    big = sorted((k, v[0][1].st_size) for k, v in found.items()
                 if v[0][1].st_size > MAX_FILE_BYTES)
    if big:
        raise_refusals({"too_large": [f"{k} (file of {n} bytes)" for k, n in big]}, [])


def raise_refusals(refused: dict[str, list[str]], bad: list[str]) -> None:
    """One :class:`DataError` line for images refused (by kind) and undecodable ones."""
    limits = {"decompression_bomb": f"over the decompression-bomb cap of {MAX_PIXELS} pixels",
              "empty_image": "with no pixels (0x0)",
              "too_large": f"over the file size limit of {MAX_FILE_BYTES} bytes (not read)"}
    parts = [f"{len(v)} image(s) refused {limits[kind]}, first: {', '.join(v[:3])}"
             for kind, v in refused.items() if v]
    if bad:
        parts.append(f"{len(bad)} undecodable image(s), first: {', '.join(bad[:5])}")
    if parts:
        raise DataError("; ".join(parts))


class FileHashMemo:
    """sha256 of files remembered by (absolute path, size, mtime_ns) in a small SQLite file."""

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
            sha = sha256_bytes(read_image_file(p, key))
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
