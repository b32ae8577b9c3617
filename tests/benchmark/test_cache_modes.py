"""The embedding cache and the file-hash memo follow the umask: under umask 002 a group that
shares the cache dir can write them (SQLite alone creates a database 0644)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from benchmark.cache import EmbeddingCache
from benchmark.data.images import FileHashMemo


@pytest.fixture
def umask_002() -> Iterator[None]:
    old = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_embedding_cache_and_its_wal_are_group_writable(tmp_path: Path, umask_002: None) -> None:
    cache = EmbeddingCache(tmp_path / "c")
    cache.put_many("ns", {"a" * 64: np.ones(3, np.float32)})
    made = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert made and all(_mode(tmp_path / "c" / n) == 0o664 for n in made), [
        (n, oct(_mode(tmp_path / "c" / n))) for n in made]
    cache.close()


def test_file_hash_memo_is_group_writable(tmp_path: Path, umask_002: None) -> None:
    memo = FileHashMemo(tmp_path / "filehash.sqlite")
    assert _mode(tmp_path / "filehash.sqlite") == 0o664
    memo.con.close()


def test_umask_022_still_gives_0644(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        EmbeddingCache(tmp_path / "c").close()
    finally:
        os.umask(old)
    assert _mode(tmp_path / "c" / "embeddings.sqlite") == 0o644
