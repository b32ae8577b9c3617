"""Embeddings as arrays, and the one implementation of each way to compare them.

Single vectors: float32 ``(n, d)``, cosine of unit rows; multi-vectors: a :class:`MultiVector`
of zero-padded ``(n, L, d)`` tokens and their ``lengths``, compared by ColPali's MaxSim
(padding masked; a document with no tokens scores 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.devices import torch_device
from core.vectors import l2_normalize

# Elements of one (queries x query tokens x documents x document tokens) score block: 2^25
# float32 = 128 MiB, small enough for any GPU and for the CPU.
BLOCK_ELEMENTS = 1 << 25


@dataclass
class MultiVector:
    """Padded multi-vector embeddings: ``vectors`` (n, L, d) float32, ``lengths`` (n,) int."""

    vectors: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @classmethod
    def from_list(cls, items: Sequence[np.ndarray]) -> MultiVector:
        """Pad a list of (L_i, d) arrays to (n, max L, d) with zeros."""
        if not items:
            return cls(np.zeros((0, 0, 0), np.float32), np.zeros(0, np.int64))
        d = items[0].shape[-1]
        max_len = max(int(a.shape[0]) for a in items)
        out = np.zeros((len(items), max_len, d), np.float32)
        for i, a in enumerate(items):
            out[i, : a.shape[0]] = a
        return cls(out, np.array([a.shape[0] for a in items], np.int64))

    def to_list(self) -> list[np.ndarray]:
        return [self.vectors[i, : int(n)] for i, n in enumerate(self.lengths)]

    def take(self, idx: Sequence[int] | np.ndarray) -> MultiVector:
        idx = np.asarray(idx, dtype=np.int64)
        lengths = self.lengths[idx]
        max_len = int(lengths.max()) if len(lengths) else 0
        return MultiVector(self.vectors[idx, :max_len], lengths)

    def mask(self) -> np.ndarray:
        """(n, L) bool: True at real tokens, False at padding."""
        return np.arange(self.vectors.shape[1])[None, :] < np.asarray(self.lengths)[:, None]

    def mean_pooled(self) -> np.ndarray:
        """One vector per item: the mean of its valid token vectors (for analysis)."""
        s = (self.vectors * self.mask()[..., None]).sum(axis=1)
        return (s / np.maximum(self.lengths[:, None], 1)).astype(np.float32)


Embeddings = np.ndarray | MultiVector


def take(emb: Embeddings, idx: Sequence[int] | np.ndarray) -> Embeddings:
    """Rows ``idx`` of single- or multi-vector embeddings."""
    if isinstance(emb, MultiVector):
        return emb.take(idx)
    return emb[np.asarray(idx, dtype=np.int64)]


def as_multi(e: Embeddings) -> MultiVector:
    """Multi-vectors as they are; single vectors as one-token multi-vectors."""
    if isinstance(e, MultiVector):
        return e
    e = np.asarray(e, np.float32)
    return MultiVector(e[:, None, :], np.ones(e.shape[0], np.int64))


def concat(parts: Sequence[Embeddings]) -> Embeddings:
    """Concatenate batches of single- or multi-vector embeddings."""
    if not parts:
        return np.zeros((0, 0), np.float32)
    if isinstance(parts[0], MultiVector):
        return MultiVector.from_list([v for p in parts for v in p.to_list()])  # type: ignore[union-attr]
    return np.concatenate([np.asarray(p, np.float32) for p in parts], axis=0)


def check_finite(x: np.ndarray, what: str, sq: np.ndarray | None = None) -> None:
    """Raise on a row holding NaN/inf; one pass over the squared norms ``sq``, no temporary."""
    if sq is None:
        sq = np.einsum("ij,ij->i", x, x) if x.ndim == 2 and x.size else np.zeros(len(x))
    bad = ~np.isfinite(sq)
    if bad.any():
        bad[bad] = ~np.isfinite(x[bad]).all(axis=1)
    if bad.any():
        raise ValueError(f"{int(bad.sum())} {what} vector(s) contain NaN/inf, first row "
                         f"{int(np.flatnonzero(bad)[0])}")


def cosine_similarity(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """(n, m) cosine similarities of the rows of ``q`` and ``d``, float32."""
    return l2_normalize(q) @ l2_normalize(d).T


def cosine_pairs(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Row-wise cosine ``s[i] = cos(q[i], d[i])`` (n,) float32."""
    q, d = np.asarray(q, np.float32), np.asarray(d, np.float32)
    dots = np.einsum("ij,ij->i", q, d)
    norms = np.sqrt(np.einsum("ij,ij->i", q, q) * np.einsum("ij,ij->i", d, d))
    return (dots / np.maximum(norms, np.float32(1e-12))).astype(np.float32)


# -- MaxSim --------------------------------------------------------------------------------------
def _late_interaction(sim: Any, q_keep: Any, d_keep: Any) -> Any:
    """Max over valid document tokens (last axis), then sum over valid query tokens (axis 1)."""
    if isinstance(sim, np.ndarray):
        best = np.where(d_keep, sim, np.float32(-np.inf)).max(axis=-1)
        return np.where(q_keep, best, np.float32(0.0)).sum(axis=1, dtype=np.float32)
    best = sim.masked_fill(~d_keep, float("-inf")).amax(dim=-1)
    return best.masked_fill(~q_keep, 0.0).sum(dim=1)


def maxsim_block(qv: Any, qm: Any, dv: Any, dm: Any) -> Any:
    """(bq, bd) MaxSim of padded token blocks and their masks (True = real token); all numpy
    or all torch on one device."""
    bq, lq, dim = qv.shape
    bd, ld, _ = dv.shape
    if ld == 0:
        return qv.new_zeros((bq, bd)) if not isinstance(qv, np.ndarray) else np.zeros((bq, bd), np.float32)
    sim = (qv.reshape(bq * lq, dim) @ dv.reshape(bd * ld, dim).T).reshape(bq, lq, bd, ld)
    out = _late_interaction(sim, qm[:, :, None], dm[None, None])
    out[:, ~dm.any(1)] = 0.0
    return out


def _pairs_block(qv: Any, qm: Any, dv: Any, dm: Any) -> Any:
    """(b,) row-wise MaxSim of two equally long padded token blocks."""
    if dv.shape[1] == 0:
        return np.zeros(qv.shape[0], np.float32) if isinstance(qv, np.ndarray) else qv.new_zeros(qv.shape[0])
    out = _late_interaction(qv @ dv.swapaxes(1, 2), qm, dm[:, None, :])
    out[~dm.any(1)] = 0.0
    return out


class Device:
    """Moves numpy blocks to the backend (torch on a device, or numpy itself) and back."""

    def __init__(self, backend: str, device: str | None):
        if backend not in ("auto", "torch", "numpy"):
            raise ValueError(f"unknown MaxSim backend {backend!r} (auto, torch, numpy)")
        self.torch: Any = None
        self.device = torch_device(backend, device)  # auto: torch on a GPU, numpy on the CPU
        if self.device is not None:
            import torch

            self.torch = torch
            self.dev = torch.device(self.device)
        self.device = self.device or "cpu"

    def put(self, x: np.ndarray) -> Any:
        x = np.ascontiguousarray(x, np.float32 if x.dtype.kind == "f" else x.dtype)
        return x if self.torch is None else self.torch.from_numpy(x).to(self.dev)

    def get(self, x: Any) -> np.ndarray:
        return x if isinstance(x, np.ndarray) else x.cpu().numpy()


def maxsim(
    q: MultiVector, d: MultiVector, *, batch: int = 64, device: str | None = None,
    backend: str = "auto",
) -> np.ndarray:
    """(n_q, n_d) float32 MaxSim scores, in blocks of ``batch`` queries and as many documents
    as keep a block within :data:`BLOCK_ELEMENTS` scores."""
    nq, nd = len(q), len(d)
    out = np.zeros((nq, nd), np.float32)
    if nq == 0 or nd == 0:
        return out
    lq, ld = max(q.vectors.shape[1], 1), max(d.vectors.shape[1], 1)
    bq = max(1, min(batch, nq))
    bd = max(1, min(nd, BLOCK_ELEMENTS // (bq * lq * ld)))
    dev = Device(backend, device)
    qmask, dmask = q.mask(), d.mask()
    for ds in range(0, nd, bd):  # (tensors made from numpy: no autograd graph to avoid)
        dv, dm = dev.put(d.vectors[ds : ds + bd]), dev.put(dmask[ds : ds + bd])
        for qs in range(0, nq, bq):
            s = maxsim_block(dev.put(q.vectors[qs : qs + bq]), dev.put(qmask[qs : qs + bq]),
                             dv, dm)
            out[qs : qs + bq, ds : ds + bd] = dev.get(s)
    return out


def maxsim_pairs(
    q: MultiVector, d: MultiVector, *, batch: int = 256, device: str | None = None,
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
    lq, ld = max(q.vectors.shape[1], 1), max(d.vectors.shape[1], 1)
    b = max(1, min(batch, BLOCK_ELEMENTS // (lq * ld)))
    dev = Device(backend, device)
    qmask, dmask = q.mask(), d.mask()
    for s in range(0, n, b):
        block = _pairs_block(dev.put(q.vectors[s : s + b]), dev.put(qmask[s : s + b]),
                             dev.put(d.vectors[s : s + b]), dev.put(dmask[s : s + b]))
        out[s : s + b] = dev.get(block)
    return out
