"""Exact top-k retrieval over a large pool: chunked score blocks with a running top-k.

The full query x pool score matrix is never built: queries are taken ``query_block`` at a
time and the pool ``chunk_size`` documents at a time, so memory stays at
``query_block * chunk_size`` scores (plus the inputs). For each chunk only the scores that can
still enter a query's top-k are kept: those above the query's current k-th best score (a
single comparison pass; when a row has too many, the chunk's own k-th largest score raises its
threshold first). The survivors are merged with the running lists.

Order and ties: a list is sorted by score (descending), then by pool index (ascending), so
the result equals the first k of a stable sort of each full score row, ties included.

Single vectors: cosine (rows unit-normalised, inner product). Multi-vectors
(:class:`~benchmark.embeddings.MultiVector`): exact MaxSim over the whole pool, in batches,
each chunk scored by :func:`benchmark.embeddings.maxsim_block` (the one MaxSim kernel);
:func:`benchmark.shortlist.two_stage_topk` is the cheaper, approximate shortlist-then-MaxSim
variant, whose agreement with the exact lists :func:`benchmark.shortlist.topk_agreement` measures.

Backends: ``torch`` (on ``device``), ``faiss`` (CPU) or ``numpy``; ``auto`` picks torch on a
GPU and faiss on the CPU, numpy where faiss does not import (:func:`get_backend`). All give the
same lists up to floating-point summation order. On the faiss backend single vectors go
through ``faiss.knn`` (the brute-force search of ``IndexFlatIP`` without copying the pool into
an index), pool block by pool block, for the top k+1, merged by score then index; a row whose k-th and (k+1)-th scores
tie is recomputed by the numpy path, so ties at the cut are broken by index as everywhere
(:func:`benchmark.faiss_search.faiss_topk`). The numpy path (:func:`benchmark.topk.dense_topk`: worker threads, each
a single-threaded sgemm of the query block against a small pool tile, then the same
threshold-and-merge selection) measured 1.2-1.9x faiss ``IndexFlatIP`` at 65k-261k pool rows
(``tests/perf/bench_retrieval.py``), hence faiss on the CPU. MaxSim and adapter-defined
similarities run the numpy selection on every CPU backend.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from benchmark.embeddings import (
    Embeddings,
    MultiVector,
    check_finite,
    l2_normalize,
    maxsim_block,
)
from benchmark.embeddings import as_multi as _multi  # exact_topk's name for it
from benchmark.faiss_search import DEFAULT_QUERY_BLOCK, faiss_topk
from benchmark.topk import (  # noqa: F401  (TopK, pack_keys, unpack_keys: this module's API)
    DENSE_TILE,
    EMPTY_KEY,
    TopK,
    cpu_threads,
    dense_topk,
    merge_topk,
    pack_keys,
    stable_rows,
    unpack_keys,
)
from core.devices import torch_device

log = logging.getLogger(__name__)

DEFAULT_CHUNK = 16384
MAXSIM_BUDGET = 1 << 26  # floats in one MaxSim token-score block (256 MB in float32)
TIE_BREAK = "score descending, then pool index ascending (a stable full sort)"


# -- backends -----------------------------------------------------------------------------------
class NumpyBackend:
    """Score blocks and candidate selection with numpy (also the host side of torch on CPU)."""

    name = "numpy"
    device = "cpu"

    def put(self, x: np.ndarray) -> Any:
        x = np.asarray(x)
        return np.ascontiguousarray(x, np.float32 if x.dtype.kind == "f" else x.dtype)

    def get(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def rows(self, s: Any, idx: np.ndarray) -> Any:
        return s[idx]

    def matmul_t(self, a: Any, b: Any) -> Any:
        return a @ b.T

    def mask_gt(self, s: Any, t: np.ndarray) -> Any:
        """``s > t`` row-wise (t: (rows,) float32)."""
        return s > t.astype(np.float32)[:, None]

    def count(self, mask: Any) -> np.ndarray:
        """Per row, the number of True."""
        return np.count_nonzero(mask, axis=1)

    def kth_largest(self, s: Any, k: int) -> np.ndarray:
        n = s.shape[1]
        return np.partition(s, n - k, axis=1)[:, n - k]

    def select(self, s: Any, mask: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, values) where ``mask`` is True, row-major."""
        flat = np.flatnonzero(mask)
        rows, cols = np.divmod(flat, s.shape[1])
        return rows, cols, s.reshape(-1)[flat]


class TorchBackend(NumpyBackend):
    """Products on ``device`` with torch. On the CPU the score block is handed to numpy (a
    zero-copy view), whose comparisons measured several times faster than torch's here."""

    name = "torch"

    def __init__(self, device: str = "cpu"):
        import torch

        self.torch = torch
        self.device = device
        self.on_cpu = torch.device(device).type == "cpu"

    def put(self, x: np.ndarray) -> Any:
        return self.torch.from_numpy(super().put(x)).to(self.device)

    def get(self, x: Any) -> np.ndarray:
        return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()

    def _t(self, x: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(x)).to(self.device)

    def rows(self, s: Any, idx: np.ndarray) -> Any:
        return s[idx] if isinstance(s, np.ndarray) else s[self._t(np.asarray(idx, np.int64))]

    def matmul_t(self, a: Any, b: Any) -> Any:
        out = a @ b.T
        return out.numpy() if self.on_cpu else out

    def mask_gt(self, s: Any, t: np.ndarray) -> Any:
        if isinstance(s, np.ndarray):
            return super().mask_gt(s, t)
        return s > self._t(t.astype(np.float32))[:, None]

    def count(self, mask: Any) -> np.ndarray:
        if isinstance(mask, np.ndarray):
            return super().count(mask)
        return self.get(mask.sum(dim=1, dtype=self.torch.int64))

    def kth_largest(self, s: Any, k: int) -> np.ndarray:
        st = self.torch.from_numpy(np.ascontiguousarray(s)) if isinstance(s, np.ndarray) else s
        return self.get(self.torch.topk(st, k, dim=1, sorted=False).values.amin(dim=1))

    def select(self, s: Any, mask: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if isinstance(s, np.ndarray):
            return super().select(s, mask)
        nz = self.torch.nonzero(mask)
        vals = self.get(s[nz[:, 0], nz[:, 1]])
        nz = self.get(nz)
        return nz[:, 0], nz[:, 1], vals


class FaissBackend(NumpyBackend):
    """Single-vector top-k with ``faiss.knn`` (:func:`faiss_topk`); everything else (MaxSim,
    adapter similarities) is the numpy backend's."""

    name = "faiss"

    def __init__(self) -> None:
        import faiss

        self.faiss = faiss
        self.version = faiss.__version__


BACKENDS = ("auto", "torch", "faiss", "numpy")


def _cpu_default() -> NumpyBackend:
    """faiss when it imports (a core dependency), else numpy."""
    try:
        return FaissBackend()
    except ImportError:
        log.info("faiss does not import: exact top-k on the CPU runs the numpy path")
        return NumpyBackend()


def get_backend(name: str = "auto", device: str | None = None) -> NumpyBackend:
    """``torch`` on ``device``, ``faiss``, ``numpy``, or ``auto``: torch when the device is a
    GPU (``device`` cuda*, or none given and torch sees one), else faiss (numpy where faiss
    does not import).

    On the CPU faiss is the default: the numpy path measured 1.2-1.9x faiss ``IndexFlatIP``
    (``tests/perf/bench_retrieval.py``), and torch's CPU product was up to 1.5x slower than
    numpy's under load on the shared 2-core machine this was built on.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown retrieval backend {name!r} ({', '.join(BACKENDS)})")
    if name == "numpy":
        return NumpyBackend()
    if name == "faiss":
        return FaissBackend()
    # (auto on a CPU device never imports torch: it alone adds ~0.5 GB of resident memory)
    dev = torch_device(name, device)
    return _cpu_default() if dev is None else TorchBackend(dev)


# -- the running top-k (keys, merging: benchmark.topk) ------------------------------------------
def _block_topk(
    bk: NumpyBackend, score: Callable[[int, int], Any], n_q: int, n_d: int, k: int,
    chunk_size: int, bar: tqdm | None = None,
) -> TopK:
    """Top-k of one query block against the pool; ``score(ds, de)`` -> (n_q, de-ds) scores.

    Per chunk, only scores > the row's current k-th best can enter (chunks come in index
    order, so an equal score loses the tie). A row with more than ``cap`` such scores first
    raises its threshold to just below the chunk's own k-th largest score; a row still over
    ``cap`` (massive ties) is resolved by a stable sort of that row alone.
    """
    run = np.full((n_q, k), EMPTY_KEY, np.int64)
    cap = max(4 * k, 64)
    for ds in range(0, n_d, chunk_size):
        de = min(n_d, ds + chunk_size)
        s = score(ds, de)
        t = unpack_keys(run[:, -1])[0].copy()
        fixed: list[tuple[np.ndarray, np.ndarray]] = []
        mask = bk.mask_gt(s, t)
        heavy = np.flatnonzero(bk.count(mask) > cap) if de - ds > cap else np.zeros(0, int)
        if heavy.size:
            sh = s if heavy.size == n_q else bk.rows(s, heavy)
            t[heavy] = np.nextafter(bk.kth_largest(sh, k), np.float32(-np.inf))
            mask = bk.mask_gt(s, t)
            still = heavy[bk.count(bk.rows(mask, heavy)) > cap]
            if still.size:  # massive ties: a stable sort of those rows alone
                t[still] = np.inf
                mask = bk.mask_gt(s, t)
                vals = bk.get(bk.rows(s, still))
                cols = stable_rows(vals, k)
                fixed.append((np.repeat(still, k),
                              pack_keys(np.take_along_axis(vals, cols, 1), cols + ds).ravel()))
        rows, cols, vals = bk.select(s, mask)
        keys = pack_keys(vals, cols + ds)
        if fixed:
            rows = np.concatenate([rows, fixed[0][0]])
            keys = np.concatenate([keys, fixed[0][1]])
            order = np.argsort(rows, kind="stable")
            rows, keys = rows[order], keys[order]
        run = merge_topk(run, rows, keys)
        if bar is not None:
            bar.update(n_q * (de - ds))
    scores, idx = unpack_keys(run)
    return TopK(scores.copy(), idx)


def _quiet(progress: bool) -> dict[str, Any]:
    """tqdm arguments: leave ``disable`` to tqdm (and $TQDM_DISABLE) unless progress is off."""
    return {} if progress else {"disable": True}


def _check(n_d: int, k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > n_d:
        raise ValueError(f"k={k} exceeds the pool size {n_d}")


def exact_topk(
    queries: Embeddings, docs: Embeddings, k: int, *, chunk_size: int = DEFAULT_CHUNK,
    query_block: int = DEFAULT_QUERY_BLOCK, backend: str | NumpyBackend = "auto",
    device: str | None = None, normalize: bool = True, progress: bool = True,
    threads: int | None = None,
) -> TopK:
    """Exact top-k pool items for every query: cosine (``normalize``) / inner product, or
    MaxSim when either side is a :class:`MultiVector`.

    On the numpy backend single vectors go through :func:`benchmark.topk.dense_topk`:
    ``threads`` workers (default: this process's cores), each a single-threaded sgemm of
    one query block against ``min(chunk_size, DENSE_TILE)`` pool items at a time."""
    bk = backend if isinstance(backend, NumpyBackend) else get_backend(backend, device)
    if isinstance(queries, MultiVector) or isinstance(docs, MultiVector):
        return exact_maxsim_topk(_multi(queries), _multi(docs), k, chunk_size=chunk_size,
                                 query_block=query_block, backend=bk, progress=progress)
    q = np.asarray(queries, np.float32)
    d = np.asarray(docs, np.float32)
    n_q, n_d = q.shape[0], d.shape[0]
    _check(n_d, k)
    check_finite(q, "query")
    if not (isinstance(bk, FaissBackend) and normalize):  # (there: checked from the norms)
        check_finite(d, "pool")
    if normalize:
        q = l2_normalize(q)
    with tqdm(total=n_q * n_d, desc="retrieval", unit="score", unit_scale=True, leave=False,
              **_quiet(progress)) as bar:
        if isinstance(bk, FaissBackend):
            return faiss_topk(bk, q, d, k, normalize=normalize, threads=threads,
                              query_block=query_block, on_block=bar.update)
        if type(bk) is NumpyBackend:
            return dense_topk(q, d, k, normalize=normalize, tile=min(chunk_size, DENSE_TILE),
                              query_block=query_block, threads=threads, on_tile=bar.update)
        parts: list[TopK] = []
        for qs in range(0, n_q, query_block):
            qb = bk.put(q[qs : qs + query_block])

            def score(ds: int, de: int, qb: Any = qb) -> Any:
                dc = l2_normalize(d[ds:de]) if normalize else d[ds:de]
                return bk.matmul_t(qb, bk.put(dc))

            parts.append(_block_topk(bk, score, len(q[qs : qs + query_block]), n_d, k,
                                     chunk_size, bar))
    return _concat(parts, k)


def topk_by_function(
    score: Callable[[int, int, int, int], Any], n_q: int, n_d: int, k: int, *,
    chunk_size: int = DEFAULT_CHUNK, query_block: int = DEFAULT_QUERY_BLOCK,
    progress: bool = True,
) -> TopK:
    """Exact top-k with any scorer: ``score(qs, qe, ds, de)`` -> (qe-qs, de-ds) numpy scores
    (e.g. an adapter's own ``similarity``), on the numpy backend."""
    _check(n_d, k)
    bk = NumpyBackend()
    parts: list[TopK] = []
    with tqdm(total=n_q * n_d, desc="retrieval", unit="score", unit_scale=True, leave=False,
              **_quiet(progress)) as bar:
        for qs in range(0, n_q, query_block):
            qe = min(n_q, qs + query_block)
            parts.append(_block_topk(
                bk, lambda ds, de, qs=qs, qe=qe: np.asarray(score(qs, qe, ds, de), np.float32),
                qe - qs, n_d, k, chunk_size, bar))
    return _concat(parts, k)


def exact_maxsim_topk(
    queries: MultiVector, docs: MultiVector, k: int, *, chunk_size: int = DEFAULT_CHUNK,
    query_block: int = 256, backend: str | NumpyBackend = "auto", device: str | None = None,
    progress: bool = True,
) -> TopK:
    """Exact MaxSim top-k: every query against every pool item, in token-bounded batches."""
    bk = backend if isinstance(backend, NumpyBackend) else get_backend(backend, device)
    n_q, n_d = len(queries), len(docs)
    _check(n_d, k)
    lq, ld = queries.vectors.shape[1], docs.vectors.shape[1]
    qmask_all, dmask_all = queries.mask(), docs.mask()
    qblock = max(1, min(query_block, MAXSIM_BUDGET // max(1, lq * ld * 64)))
    sub = max(1, MAXSIM_BUDGET // max(1, qblock * lq * ld))  # docs per MaxSim sub-batch
    parts: list[TopK] = []
    with tqdm(total=n_q * n_d, desc="maxsim", unit="score", unit_scale=True, leave=False,
              **_quiet(progress)) as bar:
        for qs in range(0, n_q, qblock):
            qv = bk.put(queries.vectors[qs : qs + qblock])
            qm = bk.put(qmask_all[qs : qs + qblock])

            def score(ds: int, de: int, qv: Any = qv, qm: Any = qm) -> Any:
                out = []
                for s in range(ds, de, sub):
                    e = min(de, s + sub)
                    out.append(backend_maxsim(bk, qv, qm, bk.put(docs.vectors[s:e]),
                                       bk.put(dmask_all[s:e])))
                return out[0] if len(out) == 1 else _cat(bk, out)

            parts.append(_block_topk(bk, score, qv.shape[0], n_d, k, chunk_size, bar))
    return _concat(parts, k)


# -- helpers --------------------------------------------------------------------------------------
def backend_maxsim(bk: NumpyBackend, qv: Any, qm: Any, dv: Any, dm: Any) -> Any:
    """:func:`maxsim_block` on the backend's arrays; torch on the CPU hands numpy on (as the
    backend's own products do)."""
    out = maxsim_block(qv, qm, dv, dm)
    return bk.get(out) if getattr(bk, "on_cpu", False) else out


def _cat(bk: NumpyBackend, parts: list[Any]) -> Any:
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=1)
    return bk.torch.cat(parts, dim=1)


def _concat(parts: list[TopK], k: int) -> TopK:
    if not parts:
        return TopK(np.zeros((0, k), np.float32), np.zeros((0, k), np.int64))
    return TopK(np.concatenate([p.scores for p in parts]), np.concatenate([p.indices for p in parts]))
