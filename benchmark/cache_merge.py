"""Fold ``ROOT/shards/shard-*.sqlite`` into ``ROOT/embeddings.sqlite`` (``benchmark cache merge``);
rows whose bytes do not fit their shape are left out and counted."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmark.cache import SHARD_DIR, CacheError, EmbeddingCache, _main_reader, row_vector

log = logging.getLogger(__name__)


@dataclass
class MergeResult:
    """One shard file merged: its rows, and how many of them were new to the main cache."""

    source: Path
    rows: int
    added: int
    bad: int = 0  # rows left out: their bytes do not fit their shape


def _merge_rows(con: sqlite3.Connection) -> tuple[int, int]:
    """Insert the attached shard's rows that fit their shape (new keys only): (added, bad)."""
    added = bad = 0
    cur = con.execute("SELECT ns, sha, shape, data FROM shard.emb")
    while rows := cur.fetchmany(1000):
        good = [r for r in rows if row_vector(r[2], r[3]) is not None]
        bad += len(rows) - len(good)
        added += con.executemany("INSERT OR IGNORE INTO main.emb VALUES (?, ?, ?, ?)",
                                 good).rowcount
    return added, bad


def merge_shards(root: str | os.PathLike[str] | None = None,
                 sources: Sequence[str | os.PathLike[str]] | None = None) -> list[MergeResult]:
    """Fold shard files (default: ``ROOT/shards/shard-*.sqlite``) into ``ROOT/embeddings.sqlite``;
    idempotent, one transaction per file."""
    cache = EmbeddingCache(root)
    files = ([Path(x) for x in sources] if sources is not None
             else sorted((cache.root / SHARD_DIR).glob("shard-*.sqlite")))
    out: list[MergeResult] = []
    try:
        for f in files:
            if not f.is_file():
                raise CacheError(f"shard file {f} does not exist")
            readers = _main_reader(f)  # a clear CacheError for a file that is no database
            for con in readers:
                con.close()
            if not readers:
                raise CacheError(f"{f} is not an embedding cache (no table emb)")
            cache.con.execute("ATTACH DATABASE ? AS shard", (str(f),))
            try:
                n = cache.con.execute("SELECT COUNT(*) FROM shard.emb").fetchone()[0]
                with cache.con:  # COMMIT, or ROLLBACK where SQLite has not already
                    cache.con.execute("BEGIN IMMEDIATE")
                    added, bad = _merge_rows(cache.con)
                if bad:
                    log.warning("%s: %d row(s) whose bytes do not fit their shape left out; "
                                "a run embeds those items again", f, bad)
            finally:
                cache.con.execute("DETACH DATABASE shard")
            out.append(MergeResult(f, int(n), int(added), bad))
            log.debug("merged %s: %d rows, %d new", f, n, out[-1].added)
    finally:
        cache.close()
    return out
