"""MaxSim (late interaction) over padded multi-vector embeddings, batched.

``s[i, j] = sum_t max_u <q_i,t , d_j,u>`` over the valid (unpadded) tokens of query ``i`` and
document ``j`` (ColBERT; ColPali's ``score_multi_vector``, but with document padding masked
instead of scored as zero vectors). Computed in blocks of queries x documents so memory stays
bounded: with torch on its default device (the GPU when there is one), else with numpy. Both
paths give the same numbers (float32 sums; tests compare them with a naive loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from benchmark.models.base import MultiVector

# Elements of one (queries x query tokens x documents x document tokens) block: 2^25 float32
# = 128 MiB, small enough for any GPU and for the CPU.
BLOCK_ELEMENTS = 1 << 25


def _blocks(n_q: int, lq: int, n_d: int, ld: int, batch: int) -> tuple[int, int]:
    """Query and document block sizes whose score block fits in :data:`BLOCK_ELEMENTS`."""
    bq = max(1, min(batch, n_q))
    bd = max(1, min(n_d, BLOCK_ELEMENTS // max(1, bq * max(lq, 1) * max(ld, 1))))
    return bq, bd


def maxsim_scores(
    q: MultiVector, d: MultiVector, batch: int = 64, device: str | None = None,
    backend: str = "auto",
) -> np.ndarray:
    """(n_q, n_d) float32 MaxSim scores.

    Args:
        q, d: padded multi-vectors (``vectors`` (n, L, dim), ``lengths`` (n,)).
        batch: queries per block (documents per block follow from :data:`BLOCK_ELEMENTS`).
        device: torch device; default ``cuda`` when available, else ``cpu``.
        backend: ``"torch"``, ``"numpy"`` or ``"auto"`` (torch when importable).
    """
    nq, nd = len(q), len(d)
    out = np.zeros((nq, nd), np.float32)
    if nq == 0 or nd == 0:
        return out
    if backend in ("auto", "torch"):
        try:
            import torch  # noqa: F401
        except ImportError:
            if backend == "torch":
                raise
        else:
            return _maxsim_torch(q, d, out, batch, device)
    return _maxsim_numpy(q, d, out, batch)


def _masks(mv: MultiVector) -> np.ndarray:
    return np.arange(mv.vectors.shape[1])[None, :] < np.asarray(mv.lengths)[:, None]


def _maxsim_numpy(q: MultiVector, d: MultiVector, out: np.ndarray, batch: int) -> np.ndarray:
    qmask, dmask = _masks(q), _masks(d)
    bq, bd = _blocks(len(q), q.vectors.shape[1], len(d), d.vectors.shape[1], batch)
    for qs in range(0, len(q), bq):
        qv = q.vectors[qs : qs + bq].astype(np.float32)
        qm = qmask[qs : qs + bq]
        for ds in range(0, len(d), bd):
            dv = d.vectors[ds : ds + bd].astype(np.float32)
            dm = dmask[ds : ds + bd]
            sim = np.einsum("qtd,kud->qtku", qv, dv)  # (bq, Lq, bd, Ld)
            sim = np.where(dm[None, None, :, :], sim, -np.inf)
            best = sim.max(axis=3)  # (bq, Lq, bd)
            best = np.where(qm[:, :, None], best, 0.0)
            out[qs : qs + bq, ds : ds + bd] = best.sum(axis=1)
    # a document with no tokens scores 0 (not -inf)
    out[:, np.asarray(d.lengths) == 0] = 0.0
    return out


def _maxsim_torch(q: MultiVector, d: MultiVector, out: np.ndarray, batch: int, device: Any) -> np.ndarray:
    import torch

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    bq, bd = _blocks(len(q), q.vectors.shape[1], len(d), d.vectors.shape[1], batch)
    qmask, dmask = torch.from_numpy(_masks(q)), torch.from_numpy(_masks(d))
    neg = torch.tensor(float("-inf"), device=dev)
    with torch.inference_mode():
        for ds in range(0, len(d), bd):
            dv = torch.from_numpy(np.ascontiguousarray(d.vectors[ds : ds + bd], np.float32)).to(dev)
            dm = dmask[ds : ds + bd].to(dev)
            for qs in range(0, len(q), bq):
                qv = torch.from_numpy(np.ascontiguousarray(q.vectors[qs : qs + bq], np.float32)).to(dev)
                qm = qmask[qs : qs + bq].to(dev)
                sim = torch.einsum("qtd,kud->qtku", qv, dv)
                sim = torch.where(dm[None, None, :, :], sim, neg)
                best = sim.amax(dim=3)
                best = torch.where(qm[:, :, None], best, torch.zeros((), device=dev))
                out[qs : qs + bq, ds : ds + bd] = best.sum(dim=1).cpu().numpy()
    out[:, np.asarray(d.lengths) == 0] = 0.0
    return out


def maxsim_pairs(
    q: MultiVector, d: MultiVector, batch: int = 256, device: str | None = None,
    backend: str = "auto",
) -> np.ndarray:
    """Row-wise MaxSim ``s[i] = maxsim(q[i], d[i])`` (n,) float32: the triplet scorer's case,
    without computing the n x n matrix whose diagonal it needs."""
    n = len(q)
    if len(d) != n:
        raise ValueError(f"maxsim_pairs: {n} queries but {len(d)} documents")
    out = np.zeros(n, np.float32)
    if n == 0:
        return out
    lq, ld = q.vectors.shape[1], d.vectors.shape[1]
    b = max(1, min(batch, BLOCK_ELEMENTS // max(1, lq * ld)))
    qmask, dmask = _masks(q), _masks(d)
    use_torch = backend == "torch"
    if backend == "auto":
        try:
            import torch  # noqa: F401

            use_torch = True
        except ImportError:
            use_torch = False
    if use_torch:
        import torch

        dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        with torch.inference_mode():
            for s in range(0, n, b):
                qv = torch.from_numpy(np.ascontiguousarray(q.vectors[s : s + b], np.float32)).to(dev)
                dv = torch.from_numpy(np.ascontiguousarray(d.vectors[s : s + b], np.float32)).to(dev)
                sim = torch.einsum("btd,bud->btu", qv, dv)
                sim = sim.masked_fill(~torch.from_numpy(dmask[s : s + b]).to(dev)[:, None, :], float("-inf"))
                best = sim.amax(dim=2).masked_fill(~torch.from_numpy(qmask[s : s + b]).to(dev), 0.0)
                out[s : s + b] = best.sum(dim=1).cpu().numpy()
    else:
        for s in range(0, n, b):
            sim = np.einsum("btd,bud->btu", q.vectors[s : s + b].astype(np.float32),
                            d.vectors[s : s + b].astype(np.float32))
            sim = np.where(dmask[s : s + b][:, None, :], sim, -np.inf)
            best = np.where(qmask[s : s + b], sim.max(axis=2), 0.0)
            out[s : s + b] = best.sum(axis=1)
    out[np.asarray(d.lengths) == 0] = 0.0
    return out
