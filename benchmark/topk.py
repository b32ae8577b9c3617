"""The running top-k of exact retrieval, and its tiled multi-threaded kernel for dense vectors.

Keys: a (score, pool index) pair is packed into one int64 whose order is (score ascending,
index descending): the upper 32 bits are the float32 score mapped to an order-preserving
int32, the lower 32 bits are ``2**32 - 1 - index``. The k largest keys of a row are its k best
items by (score descending, index ascending), so one integer sort or partition per row
replaces a lexicographic sort, and ties are exact.

:func:`dense_topk` is the CPU path of :func:`benchmark.retrieval.exact_topk` for single
vectors. ``threads`` workers (default: the cores this process may use) each run a
single-threaded sgemm of one query block against one pool tile of ``tile`` documents into a
preallocated buffer (a few MB, so the selection reads it from cache), keep only the scores
above the row's current k-th best (one comparison pass), and fold them into their own running
top-k in batches; the workers' lists are merged at the end. Every worker takes tiles in
ascending pool order, so a score equal to its current k-th best (a later index) can be
dropped at once. Measured on the RQ1 shapes (3,600 x 261,375 x 768, top-99) against faiss
``IndexFlatIP`` with the same threads: see ``tests/perf/bench_retrieval.py`` and the
README's scale-out section. Memory: ``threads x query_block x tile`` scores and as many mask
bytes, plus the normalised copy of one tile per worker; the pool is never copied.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

IDX_MASK = np.int64(0xFFFFFFFF)
DENSE_TILE = 1024  # pool items per score tile (measured: 1024 best of 512..4096 on the RQ1 shapes)


@dataclass
class TopK:
    """``scores`` (n_q, k) float32 and ``indices`` (n_q, k) int64 into the pool, best first."""

    scores: np.ndarray
    indices: np.ndarray


def pack_keys(scores: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Order-preserving int64 keys of (float32 score, pool index < 2**32 - 1)."""
    s = np.asarray(scores, np.float32) + np.float32(0.0)  # -0.0 -> +0.0
    b = s.view(np.int32).astype(np.int64)
    b = np.where(b >= 0, b, b ^ 0x7FFFFFFF)
    return (b << 32) | (IDX_MASK - np.asarray(idx, np.int64))


EMPTY_KEY = pack_keys(np.array([-np.inf], np.float32), np.array([IDX_MASK]))[0]  # (-inf, none)


def unpack_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float32 scores, int64 indices) of packed keys."""
    b = (keys >> 32).astype(np.int32)
    b = np.where(b >= 0, b, b ^ np.int32(0x7FFFFFFF))
    return b.view(np.float32), IDX_MASK - (keys & IDX_MASK)


def _dense_rows(run: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``run`` (b, k) with each row's candidate keys appended (padded with EMPTY_KEY);
    ``rows`` must be ascending."""
    b = run.shape[0]
    counts = np.bincount(rows, minlength=b)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    dense = np.full((b, int(counts.max())), EMPTY_KEY, np.int64)
    dense[rows, np.arange(rows.size) - starts[rows]] = keys
    return np.concatenate([run, dense], axis=1)


def merge_topk(run: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Merge candidate keys (with their row, rows ascending) into the running (b, k) keys,
    sorted best first; returns the new (b, k) keys."""
    k = run.shape[1]
    if rows.size == 0:
        return run
    both = np.sort(_dense_rows(run, rows, keys), axis=1)
    return both[:, : -k - 1 : -1]


def best_first(keys: np.ndarray, k: int) -> TopK:
    """The k largest keys of every row, best first, unpacked."""
    top = np.sort(keys, axis=1)[:, : -k - 1 : -1]
    scores, idx = unpack_keys(top)
    return TopK(scores.copy(), idx)


def stable_rows(s: np.ndarray, k: int) -> np.ndarray:
    """Column positions of the k best scores of each row (ties: lower column first)."""
    return np.argsort(-s, axis=1, kind="stable")[:, :k]


def cpu_threads() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# -- the tiled dense kernel --------------------------------------------------------------------
class Running:
    """One worker's running top-k of ``n_q`` rows: candidates above each row's k-th best are
    collected and folded in by a partition when they reach ``n_q * k`` (or after a tile that
    had to raise its thresholds), so the thresholds tighten without a merge per tile."""

    def __init__(self, n_q: int, k: int):
        self.k = k
        self.keys = np.full((n_q, k), EMPTY_KEY, np.int64)  # unordered within a row
        self.threshold = np.full(n_q, -np.inf, np.float32)
        self.cap = max(4 * k, 64)  # candidates of a row per tile before its threshold is raised
        self._rows: list[np.ndarray] = []
        self._keys: list[np.ndarray] = []
        self._pending = 0

    def offer(self, s: np.ndarray, offset: int, mask: np.ndarray) -> None:
        """Take the candidates of score tile ``s`` (n_q, n) whose pool indices start at
        ``offset``; ``mask`` is a (n_q, n) bool buffer.

        Rows are checked for more than ``cap`` candidates only when the tile has more
        candidates in all than the running lists hold (the first tiles; adversarial orders):
        that bounds the candidates a tile adds without a per-row count on every tile."""
        n = s.shape[1]
        np.greater(s, self.threshold[:, None], out=mask)
        raised = False
        if np.count_nonzero(mask) > self.keys.size and n > self.cap:
            heavy = np.flatnonzero(np.count_nonzero(mask, axis=1) > self.cap)
            if heavy.size:
                self._raise(s, heavy, offset, mask)
                raised = True
        flat = np.flatnonzero(mask)
        rows, cols = np.divmod(flat, n)
        self._add(rows, pack_keys(s.reshape(-1)[flat], cols + offset))
        if raised or self._pending > self.keys.size:
            self.fold()

    def _raise(self, s: np.ndarray, heavy: np.ndarray, offset: int, mask: np.ndarray) -> None:
        """Rows with more than ``cap`` candidates keep only scores >= the tile's own k-th
        largest; rows still over ``cap`` (massive ties) are resolved by a stable sort of that
        row alone. Rewrites ``mask`` for the remaining candidates."""
        n, k = s.shape[1], self.k
        t = self.threshold.copy()
        sh = s[heavy]
        kth = np.partition(sh, n - k, axis=1)[:, n - k]
        t[heavy] = np.maximum(t[heavy], np.nextafter(kth, np.float32(-np.inf)))
        still = heavy[np.count_nonzero(sh > t[heavy, None], axis=1) > self.cap]
        if still.size:
            vals = s[still]
            cols = stable_rows(vals, k)
            self._add(np.repeat(still, k),
                      pack_keys(np.take_along_axis(vals, cols, 1), cols + offset).ravel())
            t[still] = np.inf
        np.greater(s, t[:, None], out=mask)

    def _add(self, rows: np.ndarray, keys: np.ndarray) -> None:
        if rows.size:
            self._rows.append(rows)
            self._keys.append(keys)
            self._pending += rows.size

    def fold(self) -> None:
        """Fold the collected candidates into the running keys; tighten the thresholds."""
        if not self._pending:
            return
        rows, keys = np.concatenate(self._rows), np.concatenate(self._keys)
        order = np.argsort(rows, kind="stable")
        both = _dense_rows(self.keys, rows[order], keys[order])
        w = both.shape[1]
        self.keys = np.ascontiguousarray(np.partition(both, w - self.k, axis=1)[:, w - self.k :])
        self.threshold = unpack_keys(self.keys.min(axis=1))[0].copy()
        self._rows, self._keys, self._pending = [], [], 0


def dense_topk(
    q: np.ndarray, d: np.ndarray, k: int, *, normalize: bool, tile: int = DENSE_TILE,
    query_block: int = 4096, threads: int | None = None,
    on_tile: Callable[[int], Any] | None = None,
) -> TopK:
    """Exact top-k of inner products (cosine when ``normalize``: the pool is normalised tile
    by tile, ``q`` must already be) of float32 ``q`` (n_q, dim) against ``d`` (n_d, dim).
    ``on_tile(n_scores)`` is called after every tile (progress)."""
    from threadpoolctl import threadpool_limits

    n_q, n_d = q.shape[0], d.shape[0]
    tile = max(1, min(tile, n_d))
    n_tiles = -(-n_d // tile)
    workers = max(1, min(threads or cpu_threads(), n_tiles))
    parts: list[TopK] = []
    # One sgemm per worker thread: BLAS's own threads would only compete with them.
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        for qs in range(0, n_q, query_block):
            qb = np.ascontiguousarray(q[qs : qs + query_block])
            lock, nxt = threading.Lock(), iter(range(n_tiles))

            def next_tile(lock: threading.Lock = lock, nxt: Any = nxt) -> int | None:
                with lock:
                    return next(nxt, None)

            runs = list(pool.map(
                lambda _, qb=qb, nt=next_tile: _worker(qb, d, k, tile, nt, normalize, on_tile),
                range(workers)))
            parts.append(best_first(np.concatenate(runs, axis=1), k))
    if not parts:
        return TopK(np.zeros((0, k), np.float32), np.zeros((0, k), np.int64))
    return TopK(np.concatenate([p.scores for p in parts]),
                np.concatenate([p.indices for p in parts]))


def _worker(
    qb: np.ndarray, d: np.ndarray, k: int, tile: int, next_tile: Callable[[], int | None],
    normalize: bool, on_tile: Callable[[int], Any] | None,
) -> np.ndarray:
    """One worker: score the tiles it takes (ascending) into its own buffers; its (n_q, k)
    keys."""
    n_q, n_d = qb.shape[0], d.shape[0]
    run = Running(n_q, k)
    buf = np.empty((n_q, tile), np.float32)
    mask = np.empty((n_q, tile), bool)
    unit = np.empty((tile, d.shape[1]), np.float32)
    norms = np.empty(tile, np.float32)
    while (i := next_tile()) is not None:
        ds = i * tile
        de = min(n_d, ds + tile)
        n = de - ds
        dc = _unit_rows(d[ds:de], unit[:n], norms[:n]) if normalize else d[ds:de]
        if n == tile:
            s, m = np.matmul(qb, dc.T, out=buf), mask
        else:
            s, m = qb @ dc.T, np.empty((n_q, n), bool)
        run.offer(s, ds, m)
        if on_tile is not None:
            on_tile(n_q * n)
    run.fold()
    return run.keys


def _unit_rows(x: np.ndarray, out: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """:func:`~benchmark.embeddings.l2_normalize` of ``x`` into preallocated buffers (the
    same zero-row rule, one pass for the norms)."""
    np.einsum("ij,ij->i", x, x, out=norms)
    np.sqrt(norms, out=norms)
    np.maximum(norms, np.float32(1e-12), out=norms)
    return np.divide(x, norms[:, None], out=out)
