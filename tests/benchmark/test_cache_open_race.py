"""Several processes opening one new embedding cache at once (``--devices`` jobs share one
cache dir): each gets a working cache, none a "database is locked" refusal."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from benchmark import cache


def _open(path: str) -> str:
    try:
        cache._open_db(Path(path), wal=True).close()
        return "ok"
    except cache.CacheError as e:
        return str(e)


def test_processes_opening_a_new_cache_at_once_all_get_it(tmp_path):
    ctx = mp.get_context("fork")
    with ctx.Pool(6) as pool:
        for i in range(15):
            path = str(tmp_path / f"c{i}" / "embeddings.sqlite")
            Path(path).parent.mkdir()
            got = pool.map(_open, [path] * 12)
            assert got == ["ok"] * 12, (i, [g for g in got if g != "ok"][:1])
