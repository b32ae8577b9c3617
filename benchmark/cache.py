"""On-disk embedding cache: every unique text and image is embedded once per model.

The key of an embedding is (namespace, content sha256), where the namespace is the sha256 of
the model name, checkpoint, revision, adapter version, modality, role, the model's
conventions for that modality and role (prompt, instruction, preprocessing) and, for models
with conventions profiles, the resolved profile record (``--conventions reference|authors``).
Change any of them and the old vectors are simply not found. Storage: one SQLite file per cache dir
(``embeddings.sqlite``, WAL), float32 blobs with their shape; multi-vector embeddings store
their (L, d) token matrix. Location: ``--cache-dir``, ``$XCM_CACHE_DIR``, else
``~/.cache/xcm3``.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.embeddings import Embeddings, MultiVector, concat
from benchmark.files import sha256_text
from benchmark.models.base import Adapter

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    env = os.environ.get("XCM_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "xcm3"


def namespace(adapter: Adapter, modality: str, role: str) -> str:
    """Cache namespace of (model, revision, adapter version, modality, conventions).

    The role (query / document) enters the key only when the adapter's conventions differ
    between the two roles: by the adapter contract, ``conventions`` names everything that
    shapes an embedding, so an image embedded as a query and as a document with the same
    conventions is the same vector and is embedded once.
    """
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
    profile = getattr(adapter, "profile", None)
    if profile is not None:  # a profile change never reuses the other profile's vectors
        key["profile"] = profile.cache_key()
    blob = json.dumps(
        key,
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return sha256_text(blob)


class EmbeddingCache:
    """SQLite-backed (namespace, content sha256) -> float32 array store."""

    def __init__(self, root: str | os.PathLike[str] | None = None):
        self.root = Path(root) if root else default_cache_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = self.root / "embeddings.sqlite"
        self.con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute(
            "CREATE TABLE IF NOT EXISTS emb (ns TEXT NOT NULL, sha TEXT NOT NULL, "
            "shape TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (ns, sha))"
        )

    def close(self) -> None:
        self.con.close()

    def get_many(self, ns: str, shas: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(shas))
        for s in range(0, len(uniq), 900):
            chunk = uniq[s : s + 900]
            marks = ",".join("?" * len(chunk))
            rows = self.con.execute(
                f"SELECT sha, shape, data FROM emb WHERE ns=? AND sha IN ({marks})", (ns, *chunk)
            ).fetchall()
            for sha, shape, data in rows:
                out[sha] = np.frombuffer(data, np.float32).reshape(json.loads(shape))
        return out

    def put_many(self, ns: str, items: dict[str, np.ndarray]) -> None:
        rows = [
            (ns, sha, json.dumps(list(a.shape)), np.ascontiguousarray(a, np.float32).tobytes())
            for sha, a in items.items()
        ]
        self.con.execute("BEGIN IMMEDIATE")
        try:
            self.con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?, ?)", rows)
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")


@dataclass
class EmbedStats:
    """What one embedding call did: items asked, unique, found in cache, embedded, seconds."""

    requested: int = 0
    unique: int = 0
    cached: int = 0
    embedded: int = 0
    seconds: float = 0.0
    by_call: list[dict[str, Any]] = field(default_factory=list)

    def add(self, other: EmbedStats) -> None:
        self.requested += other.requested
        self.unique += other.unique
        self.cached += other.cached
        self.embedded += other.embedded
        self.seconds += other.seconds


def embed_cached(
    adapter: Adapter,
    modality: str,
    role: str,
    keys: Sequence[str],
    load: Callable[[list[int]], list[Any]],
    cache: EmbeddingCache | None,
) -> tuple[Embeddings, EmbedStats]:
    """Embeddings for ``keys`` (content sha256 per item) in order, embedding only what the cache
    lacks. ``load(indices)`` returns the raw items (texts or PIL images) for those positions,
    so images are decoded only when they must be embedded. Duplicate keys are embedded once.
    """
    t0 = time.perf_counter()
    stats = EmbedStats(requested=len(keys))
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    stats.unique = len(first)
    ns = namespace(adapter, modality, role)
    found = cache.get_many(ns, list(first)) if cache is not None else {}
    stats.cached = len(found)
    missing = [k for k in first if k not in found]
    if missing:
        items = load([first[k] for k in missing])
        encode = adapter.encode_texts if modality == "text" else adapter.encode_images
        emb = encode(items, role=role)
        rows = emb.to_list() if isinstance(emb, MultiVector) else list(np.asarray(emb, np.float32))
        new = dict(zip(missing, rows, strict=True))
        if cache is not None:
            cache.put_many(ns, new)
        found.update(new)
        stats.embedded = len(missing)
    ordered = [found[k] for k in keys]
    stats.seconds = time.perf_counter() - t0
    if adapter.multi_vector or (ordered and np.asarray(ordered[0]).ndim == 2):
        return MultiVector.from_list(ordered), stats
    if not ordered:
        return concat([]), stats
    return np.stack(ordered).astype(np.float32), stats
