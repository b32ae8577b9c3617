"""Exact top-k retrieval: each query's k best pool items by cosine (or inner product) or MaxSim.

Order: score descending, then pool index ascending, ties included: (float32 score, index) is
packed into one int64 key (:func:`pack_keys`), so selecting the k largest keys is exact. CPU
single vectors go through faiss (ties at the cut recomputed), a GPU through chunked
``torch.topk``; everything else the chunked numpy path.
"""

from __future__ import annotations

import functools
import mmap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.embeddings import (
    Device,
    Embeddings,
    MultiVector,
    as_multi,
    check_finite,
    maxsim_block,
)
from core.devices import cpu_threads
from core.vectors import l2_normalize

DEFAULT_CHUNK = 16384
DEFAULT_QUERY_BLOCK = 4096
MAXSIM_BUDGET = 1 << 26  # floats in one MaxSim token-score block (256 MB in float32)
TIE_BREAK = "score descending, then pool index ascending (a stable full sort)"
BACKENDS = ("auto", "torch", "faiss", "numpy")
IDX_MASK = np.int64(0xFFFFFFFF)
Scorer = Callable[[int, int, int, int], Any]  # (qs, qe, ds, de) -> (qe-qs, de-ds) scores


@dataclass
class TopK:
    """``scores`` (n_q, k) float32 and ``indices`` (n_q, k) int64 into the pool, best first."""

    scores: np.ndarray
    indices: np.ndarray


def pack_keys(scores: Any, idx: Any, xp: Any = np) -> Any:
    """Int64 keys ordered as (score, -index) of float32 scores and indices < 2**32 - 1, in
    numpy or (``xp=torch``) torch: the upper half an order-preserving int of the score."""
    s = xp.asarray(scores, dtype=xp.float32) + 0.0  # -0.0 -> +0.0
    b = xp.asarray(s.view(xp.int32), dtype=xp.int64)
    b = xp.where(b >= 0, b, b ^ 0x7FFFFFFF)
    return (b << 32) | (0xFFFFFFFF - xp.asarray(idx, dtype=xp.int64))


def unpack_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float32 scores, int64 indices) of packed keys."""
    b = (keys >> 32).astype(np.int32)
    b = np.where(b >= 0, b, b ^ np.int32(0x7FFFFFFF))
    return b.view(np.float32), IDX_MASK - (keys & IDX_MASK)


class Backend(Device):
    """Where exact top-k runs: ``faiss`` or ``numpy`` on the CPU, ``torch`` on ``device``."""

    def __init__(self, name: str, device: str | None = None):
        if name not in BACKENDS:
            raise ValueError(f"unknown retrieval backend {name!r} ({', '.join(BACKENDS)})")
        super().__init__("numpy" if name in ("faiss", "numpy") else name, device)
        self.name = "torch" if self.torch is not None else "faiss" if name == "auto" else name


def get_backend(name: str | Backend = "auto", device: str | None = None) -> Backend:
    """``torch`` on ``device``, ``faiss``, ``numpy``, or ``auto``: torch when the device is a
    GPU (:func:`core.devices.torch_device`, which never imports torch for it), else faiss."""
    return name if isinstance(name, Backend) else Backend(name, device)


def _check(n_d: int, k: int) -> None:
    if not 1 <= k <= n_d:
        raise ValueError(f"k={k} exceeds the pool size {n_d}" if k > 0
                         else f"k must be >= 1, got {k}")


def exact_topk(
    queries: Embeddings, docs: Embeddings, k: int, *, chunk_size: int = DEFAULT_CHUNK,
    query_block: int = DEFAULT_QUERY_BLOCK, backend: str | Backend = "auto",
    device: str | None = None, normalize: bool = True, progress: bool = True,
    threads: int | None = None,
) -> TopK:
    """Exact top-k pool items for every query: cosine (``normalize``) / inner product, or
    MaxSim when either side is a :class:`MultiVector`. ``threads``: faiss's threads."""
    bk = get_backend(backend, device)
    if isinstance(queries, MultiVector) or isinstance(docs, MultiVector):
        return exact_maxsim_topk(as_multi(queries), as_multi(docs), k, chunk_size=chunk_size,
                                 query_block=query_block, backend=bk, progress=progress)
    q = np.asarray(queries, np.float32)
    d = np.ascontiguousarray(docs, np.float32)
    _check(len(d), k)
    check_finite(q, "query")
    sq = np.einsum("ij,ij->i", d, d) if d.size else np.zeros(len(d), np.float32)
    check_finite(d, "pool", sq)
    if normalize:
        q = l2_normalize(q)
        norms = np.sqrt(sq)
        if not np.all(np.abs(norms - 1) <= 1e-6):  # unit rows (the cache's) are used as they are
            d = _unit_copy(d, np.maximum(norms, np.float32(1e-12))[:, None], threads)
    if bk.name == "faiss":
        return _faiss_topk(q, d, k, threads)

    put_q = functools.lru_cache(1)(lambda qs, qe: bk.put(q[qs:qe]))  # once per query block

    def score(qs: int, qe: int, ds: int, de: int) -> Any:
        return put_q(qs, qe) @ bk.put(d[ds:de]).T

    return _chunked(score, len(q), len(d), k, chunk_size, query_block, progress, "retrieval")


def _unit_copy(d: np.ndarray, norms: np.ndarray, threads: int | None) -> np.ndarray:
    """``d / norms`` in row blocks on every core, into plain anonymous memory: numpy asks for
    huge pages for a big array, whose first touch stalls where the kernel compacts on demand."""
    out = np.frombuffer(mmap.mmap(-1, d.nbytes), np.float32).reshape(d.shape)
    step = -(-len(d) // 16)
    with ThreadPoolExecutor(threads or cpu_threads()) as ex:
        list(ex.map(lambda s: np.divide(d[s : s + step], norms[s : s + step],
                                        out=out[s : s + step]), range(0, len(d), step)))
    return out


def _faiss_topk(q: np.ndarray, d: np.ndarray, k: int, threads: int | None) -> TopK:
    """faiss's exact inner-product search of the top k+1; rows tied at the cut recomputed."""
    import faiss

    if threads:
        faiss.omp_set_num_threads(threads)
    kk = min(k + 1, len(d))
    s, i = faiss.knn(np.ascontiguousarray(q), d, kk, metric=faiss.METRIC_INNER_PRODUCT)
    scores, idx = unpack_keys(np.sort(pack_keys(s, i), axis=1)[:, ::-1])
    out = TopK(scores[:, :k].copy(), idx[:, :k].copy())
    tied = np.flatnonzero(scores[:, k - 1] == scores[:, k]) if kk > k else []
    if len(tied):  # faiss keeps an arbitrary part of a tie at its cut
        qt = q[tied]
        fix = _chunked(lambda qs, qe, ds, de: qt[qs:qe] @ d[ds:de].T, len(qt), len(d), k,
                       DEFAULT_CHUNK, 256, False, "ties")
        out.scores[tied], out.indices[tied] = fix.scores, fix.indices
    return out


def topk_by_function(
    score: Scorer, n_q: int, n_d: int, k: int, *, chunk_size: int = DEFAULT_CHUNK,
    query_block: int = DEFAULT_QUERY_BLOCK, progress: bool = True,
) -> TopK:
    """Exact top-k with any scorer: ``score(qs, qe, ds, de)`` -> (qe-qs, de-ds) numpy scores
    (e.g. an adapter's own ``similarity``)."""
    _check(n_d, k)
    return _chunked(lambda qs, qe, ds, de: np.asarray(score(qs, qe, ds, de), np.float32),
                    n_q, n_d, k, chunk_size, query_block, progress, "retrieval")


def exact_maxsim_topk(
    queries: MultiVector, docs: MultiVector, k: int, *, chunk_size: int = DEFAULT_CHUNK,
    query_block: int = 256, backend: str | Backend = "auto", device: str | None = None,
    progress: bool = True,
) -> TopK:
    """Exact MaxSim top-k: every query against every pool item, in token-bounded batches."""
    bk = get_backend(backend, device)
    _check(len(docs), k)
    lq, ld = queries.vectors.shape[1], docs.vectors.shape[1]
    qmask, dmask = queries.mask(), docs.mask()
    qblock = max(1, min(query_block, MAXSIM_BUDGET // max(1, lq * ld * 64)))
    sub = max(1, MAXSIM_BUDGET // max(1, qblock * lq * ld))  # docs per MaxSim sub-batch

    put_q = functools.lru_cache(1)(
        lambda qs, qe: (bk.put(queries.vectors[qs:qe]), bk.put(qmask[qs:qe])))

    def score(qs: int, qe: int, ds: int, de: int) -> Any:
        qv, qm = put_q(qs, qe)
        out = [maxsim_block(qv, qm, bk.put(docs.vectors[s : min(de, s + sub)]),
                            bk.put(dmask[s : min(de, s + sub)])) for s in range(ds, de, sub)]
        return out[0] if len(out) == 1 else (
            np.concatenate(out, axis=1) if bk.torch is None else bk.torch.cat(out, dim=1))

    return _chunked(score, len(queries), len(docs), k, chunk_size, qblock, progress, "maxsim")


def _chunked(
    score: Scorer, n_q: int, n_d: int, k: int, chunk_size: int, query_block: int,
    progress: bool, desc: str,
) -> TopK:
    """Top-k of each query block against the pool chunk by chunk: each chunk's keys merged
    into the running k (numpy partition, or torch.topk on the scores' device)."""
    from tqdm.auto import tqdm

    scores, indices = [np.zeros((0, k), np.float32)], [np.zeros((0, k), np.int64)]
    with tqdm(total=n_q * n_d, desc=desc, unit="score", unit_scale=True, leave=False,
              **({} if progress else {"disable": True})) as bar:
        for qs in range(0, n_q, query_block):
            qe, run = min(n_q, qs + query_block), None
            for ds in range(0, n_d, chunk_size):
                de = min(n_d, ds + chunk_size)
                run = _merge(run, score(qs, qe, ds, de), ds, k)
                bar.update((qe - qs) * (de - ds))
            run = run if isinstance(run, np.ndarray) else run.cpu().numpy()
            s, i = unpack_keys(np.sort(run, axis=1)[:, ::-1])
            scores.append(s.copy())
            indices.append(i)
    return TopK(np.concatenate(scores), np.concatenate(indices))


def _merge(run: Any, s: Any, ds: int, k: int) -> Any:
    """The k largest of the running keys and the keys of score block ``s`` (pool rows from
    ``ds``), unordered."""
    if isinstance(s, np.ndarray):
        keys = pack_keys(s, np.arange(ds, ds + s.shape[1]))
        both = keys if run is None else np.concatenate([run, keys], axis=1)
        return both if both.shape[1] <= k else np.partition(both, -k, axis=1)[:, -k:]
    import torch

    keys = pack_keys(s, torch.arange(ds, ds + s.shape[1], device=s.device), torch)
    both = keys if run is None else torch.cat([run, keys], dim=1)
    return both if both.shape[1] <= k else torch.topk(both, k, dim=1, sorted=False).values
