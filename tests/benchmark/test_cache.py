"""The embedding cache at scale: batches persisted as they come, shards, shard files and their
merge, concurrent writer processes, and unusable cache dirs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchmark import registry
from benchmark.cache import CacheError, EmbeddingCache, Shard, embed_cached
from benchmark.cache_merge import merge_shards
from core.files import sha256_text
from tests.benchmark.cache_helpers import passes, vector

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def counting(batch: int = 4):
    """The Counting user adapter, and the list its forward passes are recorded in."""
    adapter = registry.load_model("tests.benchmark.cache_helpers:Counting")
    adapter.text_batch_size = adapter.image_batch_size = batch
    calls: list[int] = []
    inner = adapter._encode_text_batch

    def spy(texts, role):
        calls.append(len(texts))
        return inner(texts, role)

    adapter._encode_text_batch = spy
    return adapter, calls


def items(n: int) -> tuple[list[str], list[str]]:
    texts = [f"text {i}" for i in range(n)]
    return texts, [sha256_text(t) for t in texts]


def embed(adapter, texts, keys, cache):
    return embed_cached(adapter, "text", "query", keys, lambda idx: [texts[i] for i in idx],
                        cache)


def rows(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
    finally:
        con.close()


# -- batches are stored as they are computed --------------------------------------------------
def test_each_batch_is_stored_before_the_next_is_computed(tmp_path):
    adapter, calls = counting(batch=4)
    texts, keys = items(10)
    cache = EmbeddingCache(tmp_path)
    loaded: list[int] = []

    def load(idx):
        if len(loaded) == 2:  # the third batch fails (a crash in the middle of a run)
            raise RuntimeError("boom")
        loaded.append(len(idx))
        return [texts[i] for i in idx]

    with pytest.raises(RuntimeError, match="boom"):
        embed_cached(adapter, "text", "query", keys, load, cache)
    assert cache.count() == 8  # two batches of 4 survived
    emb, st = embed(adapter, texts, keys, cache)
    assert (st.cached, st.embedded) == (8, 2) and calls == [4, 4, 2]
    assert np.allclose(emb, np.stack([vector(t.encode()) for t in texts]))


@pytest.mark.slow
def test_sigkill_mid_run_costs_at_most_one_batch(tmp_path):
    """A real run killed with SIGKILL between batches: the rerun embeds only what was not
    stored, and the stored part is all but at most the one batch in flight."""
    passes_1, passes_2 = tmp_path / "passes1", tmp_path / "passes2"
    cmd = [sys.executable, "-m", "benchmark", "run", "--model",
           "tests.benchmark.cache_helpers:Counting", "--task", "3xcm", "--dataset",
           str(ROOT / "data" / "synthetic-3xcm"), "--batch-size", "8", "--cache-dir",
           str(tmp_path / "cache"), "--output-dir", str(tmp_path / "out"), "-q"]
    env = dict(ENV, XCM_TEST_PASSES=str(passes_1), XCM_TEST_SLEEP="0.15")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(passes(passes_1)) < 12 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.kill()
    proc.wait()
    assert proc.returncode == -9
    done_before_kill = sum(passes(passes_1))
    stored = rows(tmp_path / "cache" / "embeddings.sqlite")
    assert done_before_kill - 8 <= stored <= done_before_kill
    env = dict(ENV, XCM_TEST_PASSES=str(passes_2))
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    total = 67 + 185  # unique query texts and candidate images of the synthetic release
    assert sum(passes(passes_2)) == total - stored  # nothing stored is embedded again
    assert "results:" in res.stderr


# -- shards ------------------------------------------------------------------------------------
def test_shard_parse_and_partition():
    assert Shard.parse("2/5") == Shard(2, 5) and str(Shard(2, 5)) == "2/5"
    for bad in ("5/5", "-1/3", "1", "a/b", "1/0", "1/2/3"):
        with pytest.raises(ValueError, match="--shard"):
            Shard.parse(bad)
    _, keys = items(3000)
    owners = [[s for s in range(4) if Shard(s, 4).owns(k)] for k in keys]
    assert all(len(o) == 1 for o in owners)  # every item in exactly one shard
    sizes = np.bincount([o[0] for o in owners], minlength=4)
    assert sizes.min() > 600  # balanced (expected 750 each)
    assert Shard(1, 4).owns("not a hash") in (True, False)  # any key works
    assert [Shard(s, 4).owns(keys[0]) for s in range(4)] == [
        Shard(s, 4).owns(keys[0]) for s in range(4)]  # stable


def test_shards_fill_the_cache_then_scoring_does_no_forward_pass(tmp_path):
    adapter, calls = counting(batch=5)
    texts, keys = items(40)
    embedded = 0
    for s in range(3):
        emb, st = embed(adapter, texts, keys, EmbeddingCache(tmp_path, shard=Shard(s, 3)))
        assert len(emb) == 0  # a shard run returns nothing to score
        assert st.embedded + st.other_shards + st.cached == 40
        embedded += st.embedded
    assert embedded == 40 and sum(calls) == 40  # each item embedded exactly once
    calls.clear()
    emb, st = embed(adapter, texts, keys, EmbeddingCache(tmp_path))
    assert calls == [] and st.cached == 40 and emb.shape == (40, 8)
    # a second pass of a shard finds its part cached: nothing to do
    _, st = embed(adapter, texts, keys, EmbeddingCache(tmp_path, shard=Shard(0, 3)))
    assert calls == [] and st.embedded == 0


def test_shard_files_merge_idempotently(tmp_path):
    adapter, calls = counting(batch=7)
    texts, keys = items(30)
    with EmbeddingCache(tmp_path) as main:
        embed(adapter, texts[:5], keys[:5], main)  # already in the main file
    calls.clear()
    for s in range(2):
        c = EmbeddingCache(tmp_path, shard=Shard(s, 2), shard_file=True)
        assert c.path == tmp_path / "shards" / f"shard-{s}-of-2.sqlite"
        embed(adapter, texts, keys, c)
        c.close()
    assert sum(calls) == 25  # the 5 in the main file were read, not embedded
    assert rows(tmp_path / "embeddings.sqlite") == 5
    first = merge_shards(tmp_path)
    assert [(r.source.name, r.added) for r in first] == [
        ("shard-0-of-2.sqlite", first[0].rows), ("shard-1-of-2.sqlite", first[1].rows)]
    assert sum(r.rows for r in first) == 25 and rows(tmp_path / "embeddings.sqlite") == 30
    again = merge_shards(tmp_path)
    assert [r.added for r in again] == [0, 0]  # idempotent
    calls.clear()
    emb, st = embed(adapter, texts, keys, EmbeddingCache(tmp_path))
    assert calls == [] and np.allclose(emb, np.stack([vector(t.encode()) for t in texts]))


def test_merge_rejects_a_bad_shard_file(tmp_path):
    bad = tmp_path / "junk.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CacheError, match="not a readable embedding cache"):
        merge_shards(tmp_path / "cache", [bad])
    with pytest.raises(CacheError, match="does not exist"):
        merge_shards(tmp_path / "cache", [tmp_path / "missing.sqlite"])


def _damage(path: Path, shape: str, data: bytes, where: str = "rowid IN "
            "(SELECT rowid FROM emb ORDER BY rowid LIMIT 2)") -> None:
    con = sqlite3.connect(path)
    con.execute(f"UPDATE emb SET shape=?, data=? WHERE {where}", (shape, data))
    con.commit()
    con.close()


@pytest.mark.parametrize("shape, data", [("[8]", b"\x00" * 7), ("[8]", b"\x00" * 36),
                                         ('"x"', b"\x00" * 32), ("[-8]", b""), ("[2, 2, 2]", b"\x00" * 32)])
def test_rows_that_do_not_fit_their_shape_are_left_out_of_a_merge(tmp_path, caplog, shape, data):
    """Merge keeps only rows whose bytes fit their shape (one warning); the run embeds the
    left-out items again and scores them exactly."""
    adapter, calls = counting(batch=4)
    texts, keys = items(10)
    c = EmbeddingCache(tmp_path, shard=Shard(0, 1), shard_file=True)
    embed(adapter, texts, keys, c)
    c.close()
    _damage(c.path, shape, data)
    with caplog.at_level("WARNING", logger="benchmark.cache"):
        res = merge_shards(tmp_path)
    assert [(r.rows, r.added, r.bad) for r in res] == [(10, 8, 2)]
    assert len([r for r in caplog.records if "do not fit their shape" in r.message]) == 1
    calls.clear()
    emb, st = embed(adapter, texts, keys, EmbeddingCache(tmp_path))
    assert sum(calls) == 2 and st.cached == 8 and st.embedded == 2
    assert np.allclose(emb, np.stack([vector(t.encode()) for t in texts]))


def test_a_bad_row_read_from_the_cache_is_embedded_again_with_one_warning(tmp_path, caplog):
    adapter, calls = counting(batch=4)
    texts, keys = items(6)
    embed(adapter, texts, keys, EmbeddingCache(tmp_path))
    _damage(tmp_path / "embeddings.sqlite", "[8]", b"\x00" * 5)
    calls.clear()
    with caplog.at_level("WARNING", logger="benchmark.cache"):
        emb, st = embed(adapter, texts, keys, EmbeddingCache(tmp_path))
    assert sum(calls) == 2 and st.embedded == 2
    assert np.allclose(emb, np.stack([vector(t.encode()) for t in texts]))
    assert len([r for r in caplog.records if "do not fit their shape" in r.message]) == 1
    calls.clear()
    embed(adapter, texts, keys, EmbeddingCache(tmp_path))
    assert calls == []  # the re-embedded rows replaced the bad ones


# -- many writer processes ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("sharded", [True, False])
def test_four_concurrent_writer_processes(tmp_path, sharded):
    """4 processes write one WAL cache at once, a commit every 2 items: no lost rows, no
    'database is locked'. Sharded: each item is embedded once; unsharded: all 4 write every
    item (INSERT OR REPLACE over each other)."""
    n, start = 400, tmp_path / "go"
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tests.benchmark.cache_helpers", "write", str(tmp_path / "c"),
         str(n), f"{i}/4" if sharded else "-", "2", str(start)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(4)]
    time.sleep(0.5)
    start.touch()
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err
    stats = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    if sharded:
        assert sum(s["embedded"] for s in stats) == n
    cache = EmbeddingCache(tmp_path / "c")
    assert cache.count() == n
    texts = [f"item{i}" for i in range(n)]
    got = cache.get_many(registry_ns(), [sha256_text(t) for t in texts])
    assert len(got) == n
    assert all(np.array_equal(got[sha256_text(t)], vector(t.encode())) for t in texts)


def registry_ns() -> str:
    from benchmark.cache import namespace

    return namespace(registry.load_model("tests.benchmark.cache_helpers:Counting"), "text",
                     "query")


# -- unusable cache dirs -----------------------------------------------------------------------
def test_cache_dir_that_is_a_file_or_corrupt(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(CacheError, match="is a file"):
        EmbeddingCache(f)
    d = tmp_path / "corrupt"
    d.mkdir()
    (d / "embeddings.sqlite").write_bytes(b"\x00garbage" * 512)
    with pytest.raises(CacheError, match="not a readable embedding cache"):
        EmbeddingCache(d)
    other = tmp_path / "other"
    other.mkdir()
    con = sqlite3.connect(other / "embeddings.sqlite")
    con.execute("CREATE TABLE emb (a, b)")
    con.commit()
    con.close()
    with pytest.raises(CacheError, match="not an embedding cache"):
        EmbeddingCache(other)


def test_damaged_pages_found_on_reading_are_a_cache_error(tmp_path):
    """A valid header over damaged data pages: the error names the file, no sqlite traceback."""
    adapter, _ = counting(batch=50)
    texts, keys = items(400)
    with EmbeddingCache(tmp_path) as c:
        embed(adapter, texts, keys, c)
    db = tmp_path / "embeddings.sqlite"
    raw = bytearray(db.read_bytes())
    page = 4096
    for off in range(2 * page, len(raw), page):  # keep page 1 (header, schema) intact
        raw[off : off + 64] = b"\xff" * 64
    db.write_bytes(bytes(raw))
    with pytest.raises(CacheError, match="corrupt|not a readable"):
        with EmbeddingCache(tmp_path) as c:
            embed(adapter, texts, keys, c)


def test_the_cache_and_the_adapter_batch_through_one_loop(tmp_path, monkeypatch):
    """embed_cached and encode_texts both run Adapter.encode_batches (one batching loop): the
    same batches, the same float32 rows, and a bad role refused the same way."""
    from benchmark.models.base import Adapter

    seen: list[tuple[str, int]] = []
    loop = Adapter.encode_batches

    def spy(self, modality, role, n, load, batch_size=None, progress=True):
        seen.append((modality, n))
        yield from loop(self, modality, role, n, load, batch_size, progress)

    monkeypatch.setattr(Adapter, "encode_batches", spy)
    adapter, calls = counting(batch=2)
    texts, keys = items(5)
    direct = adapter.encode_texts(texts, role="query")
    assert calls == [2, 2, 1] and seen == [("text", 5)]
    cached, stats = embed(adapter, texts, keys, EmbeddingCache(tmp_path / "c"))
    assert calls == [2, 2, 1, 2, 2, 1] and seen == [("text", 5), ("text", 5)]
    assert stats.embedded == 5 and cached.dtype == direct.dtype == np.float32
    np.testing.assert_array_equal(cached, direct)
    for call in (lambda: adapter.encode_texts(texts, role="q"),
                 lambda: embed_cached(adapter, "text", "q", ["k"], lambda ix: ["t"], None)):
        with pytest.raises(ValueError, match="role must be one of"):
            call()
