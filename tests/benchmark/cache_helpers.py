"""Helpers the cache and launch tests run in other processes (not collected: no ``test_``).

- :class:`Counting`: a user adapter whose vectors are a hash of the content, and which
  appends one line per forward pass (the number of items) to ``$XCM_TEST_PASSES`` and sleeps
  ``$XCM_TEST_SLEEP`` seconds per pass, so a test can count passes and kill mid-run.
- :class:`Rendezvous`: a user adapter that waits in its constructor until
  ``$XCM_TEST_RENDEZVOUS_N`` processes have reached it (files in ``$XCM_TEST_RENDEZVOUS``):
  two launched jobs finish only if they really run at the same time.
- ``python -m tests.benchmark.cache_helpers write CACHE_DIR N SHARD|- BATCH START_FILE``:
  one writer process of the concurrency test (waits for START_FILE, then embeds N items).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

DIM = 8


def vector(content: bytes) -> np.ndarray:
    """The deterministic vector of some content."""
    seed = int.from_bytes(hashlib.sha256(content).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _image_bytes(im: Any) -> bytes:
    return np.asarray(im.convert("RGB")).tobytes()


class Counting:
    """Content-hash vectors; one line per forward pass in ``$XCM_TEST_PASSES``."""

    def _pass(self, n: int) -> None:
        path = os.environ.get("XCM_TEST_PASSES")
        if path:
            with open(path, "a") as f:
                f.write(f"{n}\n")
        time.sleep(float(os.environ.get("XCM_TEST_SLEEP", "0")))

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        out = np.stack([vector(t.encode()) for t in texts])
        self._pass(len(texts))
        return out

    def encode_images(self, images: list[Any]) -> np.ndarray:
        out = np.stack([vector(_image_bytes(im)) for im in images])
        self._pass(len(images))
        return out


def passes(path: Path) -> list[int]:
    """The forward passes recorded in a ``$XCM_TEST_PASSES`` file (items per pass)."""
    if not path.exists():
        return []
    return [int(x) for x in path.read_text().split()]


class Rendezvous(Counting):
    """Waits (up to 60 s) until ``$XCM_TEST_RENDEZVOUS_N`` processes have arrived."""

    def __init__(self) -> None:
        where = Path(os.environ["XCM_TEST_RENDEZVOUS"])
        need = int(os.environ.get("XCM_TEST_RENDEZVOUS_N", "2"))
        (where / str(os.getpid())).touch()
        deadline = time.monotonic() + 60
        while len(list(where.iterdir())) < need:
            if time.monotonic() > deadline:
                raise RuntimeError("rendezvous: the other jobs never started")
            time.sleep(0.05)


def write(cache_dir: str, n: str, shard: str, batch: str, start_file: str) -> dict[str, Any]:
    """One concurrent writer: embed items ``item0..item{n-1}`` (its shard, or all)."""
    from benchmark import registry
    from benchmark.cache import EmbeddingCache, Shard, embed_cached
    from core.files import sha256_text

    adapter = registry.load_model("tests.benchmark.cache_helpers:Counting")
    adapter.text_batch_size = int(batch)
    texts = [f"item{i}" for i in range(int(n))]
    cache = EmbeddingCache(cache_dir, shard=None if shard == "-" else Shard.parse(shard))
    deadline = time.monotonic() + 60
    while not Path(start_file).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    _, st = embed_cached(adapter, "text", "query", [sha256_text(t) for t in texts],
                         lambda idx: [texts[i] for i in idx], cache)
    cache.close()
    return {"embedded": st.embedded, "cached": st.cached, "other_shards": st.other_shards}


if __name__ == "__main__":
    if sys.argv[1] == "write":
        sys.stdout.write(json.dumps(write(*sys.argv[2:7])) + "\n")
