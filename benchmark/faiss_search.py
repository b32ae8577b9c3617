"""Exact single-vector top-k on the CPU with faiss: the search behind the ``faiss`` backend of
:func:`benchmark.retrieval.exact_topk`.

The pool goes block by block through ``faiss.knn`` (the brute-force search of ``IndexFlatIP``
without copying the pool into an index), each block normalised into one reused buffer
(:class:`_UnitBlocks`), for the top k+1, merged by packed (score, index) keys; a row whose k-th
and (k+1)-th scores tie is recomputed by :func:`benchmark.topk.dense_topk`, so ties at the cut
are broken by pool index as everywhere. faiss's own sgemm block is widened for the search
(:func:`_database_bs`) where memory stays within what ``IndexFlatIP`` holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np

from benchmark.embeddings import check_finite
from benchmark.topk import EMPTY_KEY, TopK, cpu_threads, dense_topk, pack_keys, unpack_keys

DEFAULT_QUERY_BLOCK = 4096
FAISS_POOL_BLOCK = 16384  # pool rows per faiss.knn call (one reused normalised buffer)
FAISS_DATABASE_BS = 4096  # faiss's pool rows per sgemm (its default 1024; measured below)


def faiss_topk(
    bk: Any, q: np.ndarray, d: np.ndarray, k: int, *, normalize: bool,
    threads: int | None = None, query_block: int = DEFAULT_QUERY_BLOCK,
    on_block: Callable[[int], Any] | None = None, pool_block: int = FAISS_POOL_BLOCK,
) -> TopK:
    """Exact top-k of unit (``q`` already normalised) queries by inner product with faiss.

    The pool goes ``pool_block`` rows at a time through ``faiss.knn`` (normalised into one
    reused buffer by :class:`_UnitBlocks`, reading the pool once: a fresh full-size copy costs
    more in page faults than the search saves), each block's k+1 best merged into a running
    k+1 by packed (score, index) keys. faiss's own sgemm blocks take ``FAISS_DATABASE_BS`` pool
    rows (its default 1024 measured 8 % slower at 65k rows, 39 % at 261k under load; the lists are the
    same, each score being one dot product either way). A row
    whose k-th score is above its (k+1)-th holds every item scoring at least its k-th, so
    its first k equal a stable full sort's. A row where they tie (faiss keeps an arbitrary
    subset of a tie at its cut) is recomputed by :func:`benchmark.topk.dense_topk`.
    """
    faiss = bk.faiss
    if threads:
        faiss.omp_set_num_threads(threads)
    d = np.ascontiguousarray(d, np.float32)
    kk = min(k + 1, len(d))
    # never a full copy of the pool (at most half of it), so memory stays under faiss's own
    # search, which holds one (IndexFlatIP's) plus its sgemm block
    step = max(kk, min(pool_block, -(-len(d) // 2)))
    unit = _UnitBlocks(d, min(step, len(d)), threads or cpu_threads()) if normalize else None
    run = np.full((len(q), kk), EMPTY_KEY, np.int64)
    with _blas_database_bs(faiss, _database_bs(faiss, q, d, step if normalize else 0)):
        for ds in range(0, len(d), step):
            de = min(len(d), ds + step)
            blk = unit.block(ds, de) if unit is not None else d[ds:de]
            kb = min(kk, de - ds)
            for qs in range(0, len(q), query_block):
                qb = np.ascontiguousarray(q[qs : qs + query_block], np.float32)
                s, i = faiss.knn(qb, blk, kb, metric=faiss.METRIC_INNER_PRODUCT)
                both = np.concatenate([run[qs : qs + len(qb)], pack_keys(s, i + ds)], axis=1)
                run[qs : qs + len(qb)] = np.sort(both, axis=1)[:, ::-1][:, :kk]
                if on_block is not None:
                    on_block(len(qb) * (de - ds))
    if unit is not None:
        unit.close()
    scores, idx = unpack_keys(run)
    out = TopK(scores[:, :k].copy(), idx[:, :k].copy())
    if kk > k:
        tied = np.flatnonzero(scores[:, k - 1] == scores[:, k])
        if tied.size:
            dn = unit.full() if unit is not None else d
            fix = dense_topk(q[tied], dn, k, normalize=False, threads=threads)
            out.scores[tied], out.indices[tied] = fix.scores, fix.indices
    return out


def _database_bs(faiss: Any, q: np.ndarray, d: np.ndarray, buffer_rows: int) -> int:
    """``FAISS_DATABASE_BS`` where what this search holds beyond its inputs (the unit queries,
    the normalising buffer, faiss's larger sgemm block) stays within what ``IndexFlatIP``
    holds for the same search (a copy of the pool and its default sgemm block); else faiss's
    default."""
    default = faiss.cvar.distance_compute_blas_database_bs
    qbs = min(len(q), faiss.cvar.distance_compute_blas_query_bs)
    ours = q.nbytes + buffer_rows * d.shape[1] * 4 + qbs * FAISS_DATABASE_BS * 4
    theirs = d.nbytes + qbs * default * 4
    return FAISS_DATABASE_BS if ours <= theirs else default


@contextmanager
def _blas_database_bs(faiss: Any, bs: int) -> Iterator[None]:
    """faiss's pool rows per sgemm block (``distance_compute_blas_database_bs``: 1024 by
    default) set for one search, restored after."""
    old = faiss.cvar.distance_compute_blas_database_bs
    faiss.cvar.distance_compute_blas_database_bs = bs
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_database_bs = old


class _UnitBlocks:
    """The pool's rows unit-normalised block by block into one reused buffer, in one read
    of the pool: ``threads`` workers each take a share of the block's rows, ``SUB_ROWS`` at a
    time (a piece that stays in cache), compute their norms (the finite check) and scale them
    (by 1 / max(norm, 1e-12): zero rows stay zero). A block whose rows are all unit already
    (within 1e-6: cached embeddings are) is searched in place, unscaled."""

    SUB_ROWS = 256

    def __init__(self, d: np.ndarray, rows: int, threads: int):
        self.d = d
        self.buf = np.empty((rows, d.shape[1]), np.float32)
        self.inv = np.ones(len(d), np.float32)
        self.in_place: list[tuple[int, int]] = []
        self.threads = max(1, threads)
        self.pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def block(self, ds: int, de: int) -> np.ndarray:
        share = -(-(de - ds) // self.threads)
        parts = [(s, min(de, s + share)) for s in range(ds, de, share)]
        if self.pool is None:
            skipped = [self._scale(s, e, ds) for s, e in parts]
        else:
            skipped = list(self.pool.map(lambda p: self._scale(*p, ds), parts))
        unit = [r for rs in skipped for r in rs]
        if sum(b - a for a, b in unit) == de - ds:
            self.in_place.append((ds, de))
            return self.d[ds:de]
        for a, b in unit:  # a mixed block: its unit pieces are scaled too
            np.multiply(self.d[a:b], self.inv[a:b, None], out=self.buf[a - ds : b - ds])
        return self.buf[: de - ds]

    def _scale(self, s: int, e: int, ds: int) -> list[tuple[int, int]]:
        """Rows s..e scaled into the buffer (offset ds), ``SUB_ROWS`` at a time; the pieces
        that were all unit are left unwritten and returned."""
        unit = []
        for a in range(s, e, self.SUB_ROWS):
            b = min(e, a + self.SUB_ROWS)
            x = self.d[a:b]
            sq = np.einsum("ij,ij->i", x, x)
            if not np.isfinite(sq).all():
                check_finite(self.d, "pool")  # the message counts the whole pool's bad rows
            inv = (1 / np.maximum(np.sqrt(sq), np.float32(1e-12))).astype(np.float32)
            self.inv[a:b] = inv
            if np.all(np.abs(inv - 1) <= 1e-6):
                unit.append((a, b))
            else:
                np.multiply(x, inv[:, None], out=self.buf[a - ds : b - ds])
        return unit

    def full(self) -> np.ndarray:
        """The whole pool as the search saw it (blocks in place unscaled, the rest scaled)."""
        out = self.d * self.inv[:, None]
        for ds, de in self.in_place:
            out[ds:de] = self.d[ds:de]
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
