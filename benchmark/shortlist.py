"""Approximate multi-vector top-k: a shortlist of mean-pooled vectors (cosine, or the paper's
L2) reranked by exact MaxSim, and its agreement with exact lists (:func:`topk_agreement`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmark.embeddings import MultiVector, maxsim_block
from benchmark.retrieval import DEFAULT_CHUNK, Backend, TopK, exact_topk, get_backend

SHORTLIST_METRICS = ("cosine", "l2")
TIE_ORDERS = ("index", "shortlist")


def l2_shortlist_vectors(q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vectors whose inner product ranks by exact L2: ``[q, 1] . [2d, -|d|^2] = |q|^2 - |q - d|^2``."""
    q = np.asarray(q, np.float32)
    d = np.asarray(d, np.float32)
    qa = np.concatenate([q, np.ones((len(q), 1), np.float32)], axis=1)
    da = np.concatenate([2 * d, -np.einsum("ij,ij->i", d, d)[:, None]], axis=1)
    return qa, da.astype(np.float32)


def two_stage_topk(
    queries: MultiVector, docs: MultiVector, k: int, shortlist: int, *,
    chunk_size: int = DEFAULT_CHUNK, backend: str | Backend = "auto",
    device: str | None = None, progress: bool = True, shortlist_metric: str = "cosine",
    ties: str = "index",
) -> TopK:
    """Approximate MaxSim top-k: a ``shortlist`` by ``shortlist_metric`` (cosine or l2),
    reranked by MaxSim; ``ties`` by pool ``index`` or in ``shortlist`` order."""
    if shortlist < k:
        raise ValueError(f"shortlist {shortlist} must be >= k={k}")
    if shortlist_metric not in SHORTLIST_METRICS or ties not in TIE_ORDERS:
        raise ValueError(f"shortlist_metric in {SHORTLIST_METRICS}, ties in {TIE_ORDERS}")
    bk = get_backend(backend, device)
    qm, dm = queries.mean_pooled(), docs.mean_pooled()
    if shortlist_metric == "l2":
        qm, dm = l2_shortlist_vectors(qm, dm)
    short = exact_topk(qm, dm, min(shortlist, len(docs)), chunk_size=chunk_size, backend=bk,
                       progress=progress, normalize=shortlist_metric == "cosine")
    n_q = len(queries)
    scores = np.empty(short.indices.shape, np.float32)
    dmask_all = docs.mask()
    for i in range(n_q):
        q = queries.take([i])
        qv = bk.put(q.vectors)
        qm = bk.put(np.ones((1, q.vectors.shape[1]), bool))
        idx = short.indices[i]
        s = maxsim_block(qv, qm, bk.put(docs.vectors[idx]), bk.put(dmask_all[idx]))
        scores[i] = bk.get(s)[0]
    tie_key = short.indices if ties == "index" else np.broadcast_to(
        np.arange(short.indices.shape[1]), short.indices.shape)
    order = np.lexsort((tie_key, -scores), axis=-1)[:, :k]  # score desc, then the tie key
    return TopK(np.take_along_axis(scores, order, 1), np.take_along_axis(short.indices, order, 1))


def topk_agreement(approx: np.ndarray, exact: np.ndarray, ks: list[int]) -> dict[str, Any]:
    """Per k, ``overlap@k`` (mean |A_k & E_k| / k), ``same_set@k`` and ``same_list@k`` shares."""
    out: dict[str, Any] = {"n_queries": int(exact.shape[0])}
    for k in ks:
        a, e = approx[:, :k], exact[:, :k]
        inter = np.array([len(np.intersect1d(x, y)) for x, y in zip(a, e, strict=True)])
        out[f"overlap@{k}"] = float((inter / k).mean()) if len(inter) else float("nan")
        out[f"same_set@{k}"] = float((inter == k).mean()) if len(inter) else float("nan")
        out[f"same_list@{k}"] = float((a == e).all(axis=1).mean()) if len(inter) else float("nan")
    return out
