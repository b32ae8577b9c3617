"""On-disk embedding cache: every unique text and image is embedded once per model.

Key: (namespace, content sha256); the namespace hashes all that shapes an embedding
(:func:`namespace`). One SQLite file per cache dir (``embeddings.sqlite``, WAL); a :class:`Shard`
writes its own file, folded in by :mod:`benchmark.cache_merge` (README.md, "Scaling out").
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.embeddings import Embeddings, MultiVector, concat
from benchmark.models.base import Adapter
from core.files import create_shared, sha256_text

log = logging.getLogger(__name__)

DB_NAME = "embeddings.sqlite"
SHARD_DIR = "shards"
SCHEMA = ("CREATE TABLE IF NOT EXISTS emb (ns TEXT NOT NULL, sha TEXT NOT NULL, "
          "shape TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (ns, sha))")


class CacheError(Exception):
    """The cache dir or a cache file cannot be used (a user's setting or file, not our bug)."""


def default_cache_dir() -> Path:
    env = os.environ.get("XCM_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "xcm3"


def namespace(adapter: Adapter, modality: str, role: str) -> str:
    """Cache namespace of the model's identity, modality, conventions and profile; the role
    only where the adapter's conventions differ between the roles."""
    spec = adapter.spec
    conv = adapter.conventions(modality, role)
    other = adapter.conventions(modality, "document" if role == "query" else "query")
    role_key = role if conv != other else "any"
    key = {
        "name": spec.name,
        "checkpoint": spec.checkpoint,
        "revision": spec.revision,
        "adapter_version": spec.adapter_version,
        "modality": modality,
        "role": role_key,
        "conventions": conv,
    }
    if modality == "image":  # a decoder change (EXIF, 16-bit, alpha) changes the pictures
        from core.decode import DECODER_VERSION

        key["image_decoder"] = DECODER_VERSION
    profile = getattr(adapter, "profile", None)
    if profile is not None:  # a profile change never reuses the other profile's vectors
        key["profile"] = profile.cache_key()
    return sha256_text(json.dumps(key, sort_keys=True, ensure_ascii=False, default=str))


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based): the items whose content hash is ``index``
    modulo ``count``, a stable assignment that needs no coordination."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` with 0 <= I < N; ValueError with a one-line reason otherwise."""
        try:
            i, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise ValueError(f"--shard {text!r}: expected I/N, e.g. 0/4") from None
        if n < 1 or not 0 <= i < n:
            raise ValueError(f"--shard {text!r}: need 0 <= I < N (shards are numbered from 0)")
        return cls(i, n)

    def owns(self, key: str) -> bool:
        """Whether the item with content hash ``key`` (hex sha256) is in this shard."""
        try:
            h = int(key[:16], 16)
        except ValueError:  # not a hex digest: hash it
            h = int(sha256_text(key)[:16], 16)
        return h % self.count == self.index

    @property
    def label(self) -> str:
        return f"{self.index}-of-{self.count}"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def dir_problem(path: Path) -> str | None:
    """Why ``path`` cannot take new files, or None; probed with a real file (permission bits
    say nothing for root, or on a read-only mount)."""
    if path.exists() and not path.is_dir():
        return "is a file, not a folder"
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"is not writable ({e.strerror or e})"
    return None


def _check_dir(root: Path) -> None:
    if problem := dir_problem(root):
        raise CacheError(f"cache dir {root} {problem}: pass another --cache-dir, or --no-cache")


def check_cache_dir(root: Path) -> None:
    """One clear :class:`CacheError` when ``root`` cannot hold the cache: a file, not
    creatable, not writable, or an ``embeddings.sqlite`` that is not an embedding cache."""
    _check_dir(root)
    db = root / DB_NAME
    if db.exists():
        _open_db(db, wal=True).close()


def _open_writable(path: Path, wal: bool, wait_s: float = 60.0) -> sqlite3.Connection:
    """Connect, set the journal mode, create the schema; "database is locked" from the
    journal-mode switch (two processes opening a new cache; no busy handler) is retried."""
    deadline = time.monotonic() + wait_s
    while True:
        con = sqlite3.connect(path, timeout=wait_s, isolation_level=None)
        try:
            con.execute(f"PRAGMA journal_mode={'WAL' if wal else 'DELETE'}")
            # NORMAL: a commit survives a killed process (not a power cut) without an fsync.
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(SCHEMA)
            return con
        except sqlite3.OperationalError as e:
            con.close()
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _open_db(path: Path, *, wal: bool, immutable: bool = False) -> sqlite3.Connection:
    """An embedding-cache connection (schema created when writable); CacheError when the
    file is not one."""
    try:
        if immutable:
            uri = f"{path.resolve().as_uri()}?immutable=1"  # no locks, no -wal/-shm files
            con = sqlite3.connect(uri, uri=True, isolation_level=None)
        else:
            create_shared(path)  # SQLite alone would make it 0644 whatever the umask
            con = _open_writable(path, wal)
        cols = [r[1] for r in con.execute("PRAGMA table_info(emb)")]
    except sqlite3.DatabaseError as e:
        raise CacheError(f"{path} is not a readable embedding cache ({e}); move it away or "
                         f"pass another --cache-dir") from None
    if cols != ["ns", "sha", "shape", "data"] and not (immutable and not cols):
        con.close()
        raise CacheError(f"{path} is not an embedding cache (table emb has columns {cols})")
    return con


def _main_reader(path: Path) -> list[sqlite3.Connection]:
    """The main file for a shard that writes its own: immutable (no locks: safe on NFS while no
    one writes it); rows still in its WAL are not seen, hence the warning."""
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        log.warning("%s has rows not yet checkpointed (a writer is running or was killed): "
                    "this shard does not see them; a run or `cache merge` on the machine "
                    "that wrote it folds them in", path)
    con = _open_db(path, wal=True, immutable=True)
    if not con.execute("SELECT 1 FROM sqlite_master WHERE name='emb'").fetchone():
        con.close()
        return []
    return [con]


class EmbeddingCache:
    """SQLite-backed (namespace, content sha256) -> float32 array store; with ``shard``, this
    process fills only its shard file and reads the main one as immutable."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *,
                 shard: Shard | None = None, shard_file: bool = False):
        self.root = Path(root) if root else default_cache_dir()
        _check_dir(self.root)  # (the files are checked as they are opened)
        self.shard = shard
        self.main_path = self.root / DB_NAME
        self.readers: list[sqlite3.Connection] = []
        if shard_file:
            if shard is None:
                raise ValueError("shard_file needs a shard")
            self.path = self.root / SHARD_DIR / f"shard-{shard.label}.sqlite"
            self.path.parent.mkdir(exist_ok=True)
            self.con = _open_db(self.path, wal=False)
            if self.main_path.exists():
                self.readers += _main_reader(self.main_path)
        else:
            self.path = self.main_path
            self.con = _open_db(self.path, wal=True)

    def close(self) -> None:
        for con in [self.con, *self.readers]:
            con.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def has_many(self, ns: str, shas: Sequence[str]) -> set[str]:
        """The ``shas`` the cache holds under ``ns`` (keys only: no vector is read)."""
        rows = self._select(ns, shas, "sha, shape, length(data)")
        return {sha for sha, (shape, n) in rows.items() if row_size_fits(shape, n)}

    def get_many(self, ns: str, shas: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        bad = 0
        for sha, (shape, data) in self._select(ns, shas, "sha, shape, data").items():
            a = row_vector(shape, data)
            if a is None:
                bad += 1
            else:
                out[sha] = a
        if bad:
            log.warning("%s: %d cached row(s) of %s whose bytes do not fit their shape; "
                        "embedding them again", self.path, bad, ns)
        return out

    def _select(self, ns: str, shas: Sequence[str], cols: str) -> dict[str, tuple[Any, ...]]:
        """``{sha: the other selected columns}`` over the written file, then the readers; a
        damaged page found on reading is a CacheError."""
        out: dict[str, tuple[Any, ...]] = {}
        uniq = list(dict.fromkeys(shas))
        try:
            for con in [self.con, *self.readers]:
                want = [s for s in uniq if s not in out]
                for s in range(0, len(want), 900):
                    chunk = want[s : s + 900]
                    marks = ",".join("?" * len(chunk))
                    for row in con.execute(f"SELECT {cols} FROM emb WHERE ns=? AND sha IN "
                                           f"({marks})", (ns, *chunk)):
                        out[row[0]] = tuple(row[1:])
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as e:
            raise CacheError(f"{self.path} is corrupt ({e}); move it away or pass another "
                             f"--cache-dir") from None
        return out

    def put_many(self, ns: str, items: dict[str, np.ndarray]) -> None:
        rows = [
            (ns, sha, json.dumps(list(a.shape)), np.ascontiguousarray(a, np.float32).tobytes())
            for sha, a in items.items()
        ]
        with self.con:  # COMMIT, or ROLLBACK where SQLite has not already (a full disk)
            self.con.execute("BEGIN IMMEDIATE")
            self.con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?, ?)", rows)

    def count(self) -> int:
        """Rows in the file this cache writes."""
        return int(self.con.execute("SELECT COUNT(*) FROM emb").fetchone()[0])


def row_size_fits(shape: Any, n_bytes: Any) -> bool:
    """Does a row's ``shape`` (JSON list of non-negative ints) describe ``n_bytes`` of float32?"""
    try:
        dims = json.loads(shape)
    except (TypeError, ValueError):
        return False
    if (not isinstance(dims, list) or not 1 <= len(dims) <= 2
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)):
        return False
    return isinstance(n_bytes, int) and int(np.prod(dims)) * 4 == n_bytes


def row_vector(shape: Any, data: Any) -> np.ndarray | None:
    """A row's float32 array, or None when its bytes do not fit its shape."""
    if not isinstance(data, bytes) or not row_size_fits(shape, len(data)):
        return None
    return np.frombuffer(data, np.float32).reshape(json.loads(shape))


@dataclass
class EmbedStats:
    """What one embedding call did: items asked, unique, found in cache, embedded, left to
    other shards, seconds (``vars()`` of it is a results file's record)."""

    requested: int = 0
    unique: int = 0
    cached: int = 0
    embedded: int = 0
    other_shards: int = 0
    seconds: float = 0.0


def embed_cached(
    adapter: Adapter,
    modality: str,
    role: str,
    keys: Sequence[str],
    load: Callable[[list[int]], list[Any]],
    cache: EmbeddingCache | None,
) -> tuple[Embeddings, EmbedStats]:
    """Embeddings for ``keys`` (content sha256 per item) in order, embedding only what the
    cache lacks, each batch stored as it comes; ``load(indices)`` gives the raw items. A
    sharded cache embeds its shard's missing items and returns nothing."""
    t0 = time.perf_counter()
    stats = EmbedStats(requested=len(keys))
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    stats.unique = len(first)
    ns = namespace(adapter, modality, role)
    shard = cache.shard if cache is not None else None
    if shard is not None:  # a shard run needs only which keys exist, not the vectors
        have = cache.has_many(ns, list(first))
        found: dict[str, np.ndarray] = {}
    else:
        found = cache.get_many(ns, list(first)) if cache is not None else {}
        have = set(found)
    stats.cached = len(have)
    missing = [k for k in first if k not in have]
    if shard is not None:
        mine = [k for k in missing if shard.owns(k)]
        stats.other_shards = len(missing) - len(mine)
        missing = mine
    if missing:  # one adapter batch at a time (the one batching loop), each stored as it comes
        batches = adapter.encode_batches(modality, role, len(missing),
                                         lambda a, b: load([first[k] for k in missing[a:b]]))
        for s, emb in batches:
            rows = emb.to_list() if isinstance(emb, MultiVector) else list(emb)
            new = dict(zip(missing[s : s + len(rows)], rows, strict=True))
            if cache is not None:
                cache.put_many(ns, new)
            if shard is None:
                found.update(new)
        stats.embedded = len(missing)
    stats.seconds = time.perf_counter() - t0
    if shard is not None:
        log.info("shard %s: %d %ss embedded, %d cached, %d left to other shards", shard,
                 stats.embedded, modality, stats.cached, stats.other_shards)
        return concat([]), stats
    ordered = [found[k] for k in keys]
    if adapter.spec.similarity == "maxsim" or (ordered and np.asarray(ordered[0]).ndim == 2):
        return MultiVector.from_list(ordered), stats
    if not ordered:
        return concat([]), stats
    return np.stack(ordered).astype(np.float32), stats

