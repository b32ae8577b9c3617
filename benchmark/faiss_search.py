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
FAISS_POOL_BLOCK = 1 << 19  # most pool rows per faiss.knn call on a pool that needs scaling
FAISS_DATABASE_BS = 4096  # faiss's pool rows per sgemm (its default 1024; measured below)


def faiss_topk(
    bk: Any, q: np.ndarray, d: np.ndarray, k: int, *, normalize: bool,
    threads: int | None = None, query_block: int = DEFAULT_QUERY_BLOCK,
    on_block: Callable[[int], Any] | None = None, pool_block: int | None = None,
) -> TopK:
    """Exact top-k of unit (``q`` already normalised) queries by inner product with faiss.

    With ``normalize`` the pool's norms are read first (:class:`_UnitBlocks`: one threaded
    pass, the finite check). A pool searched as it is (not ``normalize``, or every row unit
    already: cached embeddings are) goes through one ``faiss.knn`` call over the whole pool,
    in place: each query's selection runs once over all rows. Otherwise the pool goes half
    of it at a time (at most ``FAISS_POOL_BLOCK`` rows; never a full copy, so memory stays
    under ``IndexFlatIP``'s, which holds one), each half scaled into one reused buffer (two
    halves measured 10-15 % less CPU time than 16k-row blocks at 261k rows: each block
    restarts faiss's per-query selection),
    its k+1 best merged into a running k+1 by packed (score, index) keys. ``pool_block``
    forces blocks of that size. faiss's own sgemm blocks take ``FAISS_DATABASE_BS`` pool rows
    where memory allows (:func:`_database_bs`; its default 1024 measured 8 % slower at 65k
    rows on an Intel Xeon, 1-3 % faster on an AMD EPYC: machine-dependent, within noise on
    the latter; the lists are the same, each score being one dot product either way). A row whose
    k-th score is above its (k+1)-th holds every item scoring at least its k-th, so its first
    k equal a stable full sort's. A row where they tie (faiss keeps an arbitrary subset of a
    tie at its cut) is recomputed by :func:`benchmark.topk.dense_topk`, which normalises the
    pool tile by tile (a full normalised copy measured 3 GB more at 1M rows, where ties at
    the cut occur in random data).
    """
    faiss = bk.faiss
    if threads:
        faiss.omp_set_num_threads(threads)
    d = np.ascontiguousarray(d, np.float32)
    kk = min(k + 1, len(d))
    unit = _UnitBlocks(d, threads or cpu_threads()) if normalize else None
    in_place = unit is None or unit.all_unit
    if pool_block is not None:
        step = max(kk, pool_block)
    elif in_place:
        step = len(d)
    else:
        step = max(kk, min(FAISS_POOL_BLOCK, -(-len(d) // 2)))
    step = min(step, len(d))
    buffer_rows = 0 if in_place else step
    run = np.full((len(q), kk), EMPTY_KEY, np.int64)
    with _blas_database_bs(faiss, _database_bs(faiss, q, d, buffer_rows)):
        for ds in range(0, len(d), step):
            de = min(len(d), ds + step)
            blk = unit.block(ds, de, step) if unit is not None else d[ds:de]
            kb = min(kk, de - ds)
            for qs in range(0, len(q), query_block):
                qb = np.ascontiguousarray(q[qs : qs + query_block], np.float32)
                s, i = faiss.knn(qb, blk, kb, metric=faiss.METRIC_INNER_PRODUCT)
                keys = pack_keys(s, i + ds)
                if ds:
                    both = np.concatenate([run[qs : qs + len(qb)], keys], axis=1)
                    keys = np.sort(both, axis=1)[:, ::-1][:, :kk]
                run[qs : qs + len(qb), : keys.shape[1]] = keys
                if on_block is not None:
                    on_block(len(qb) * (de - ds))
    if unit is not None:
        unit.close()
    scores, idx = unpack_keys(run)
    out = TopK(scores[:, :k].copy(), idx[:, :k].copy())
    if kk > k:
        tied = np.flatnonzero(scores[:, k - 1] == scores[:, k])
        if tied.size:  # tile by tile (normalised there): never a copy of the pool
            fix = dense_topk(q[tied], d, k, normalize=unit is not None and not unit.all_unit,
                             threads=threads)
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
    """The pool's norms in one threaded read (``threads`` workers, ``SUB_ROWS`` rows at a
    time: a piece that stays in cache), with the finite check; then the pool unit-normalised
    block by block into one reused buffer (rows scaled by 1 / max(norm, 1e-12): zero rows
    stay zero). A block whose rows are all unit already (within 1e-6: cached embeddings are)
    is searched in place, unscaled; ``all_unit`` says whether the whole pool is."""

    SUB_ROWS = 256

    def __init__(self, d: np.ndarray, threads: int):
        self.d = d
        self.buf: np.ndarray | None = None
        self.inv = np.ones(len(d), np.float32)
        self.unit_rows = np.ones(len(d), bool)
        self.threads = max(1, threads)
        self.pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None
        share = -(-len(d) // self.threads) if len(d) else 1
        parts = [(s, min(len(d), s + share)) for s in range(0, len(d), share)]
        if self.pool is None:
            for p in parts:
                self._norms(*p)
        else:
            list(self.pool.map(lambda p: self._norms(*p), parts))
        self.all_unit = bool(self.unit_rows.all())

    def _norms(self, s: int, e: int) -> None:
        for a in range(s, e, self.SUB_ROWS):
            b = min(e, a + self.SUB_ROWS)
            x = self.d[a:b]
            sq = np.einsum("ij,ij->i", x, x)
            if not np.isfinite(sq).all():
                check_finite(self.d, "pool")  # the message counts the whole pool's bad rows
            inv = (1 / np.maximum(np.sqrt(sq), np.float32(1e-12))).astype(np.float32)
            self.inv[a:b] = inv
            self.unit_rows[a:b] = np.all(np.abs(inv - 1) <= 1e-6)

    def block(self, ds: int, de: int, rows: int) -> np.ndarray:
        """Rows ds..de as searched: in place when all unit, else scaled into the buffer
        (``rows`` long, allocated once)."""
        if self.unit_rows[ds:de].all():
            return self.d[ds:de]
        if self.buf is None:
            self.buf = np.empty((rows, self.d.shape[1]), np.float32)
        share = -(-(de - ds) // self.threads)
        parts = [(s, min(de, s + share)) for s in range(ds, de, share)]
        if self.pool is None:
            for p in parts:
                self._scale(*p, ds)
        else:
            list(self.pool.map(lambda p: self._scale(*p, ds), parts))
        return self.buf[: de - ds]

    def _scale(self, s: int, e: int, ds: int) -> None:
        assert self.buf is not None
        for a in range(s, e, self.SUB_ROWS):
            b = min(e, a + self.SUB_ROWS)
            np.multiply(self.d[a:b], self.inv[a:b, None], out=self.buf[a - ds : b - ds])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
