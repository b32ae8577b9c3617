"""MaxSim (late interaction) over padded multi-vector embeddings, batched."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from benchmark.models.base import MultiVector


def maxsim_scores(q: MultiVector, d: MultiVector, batch: int = 64) -> np.ndarray:
    """``s[i, j] = sum_t max_u <q_i,t , d_j,u>`` over valid (unpadded) tokens; (n_q, n_d).

    Computed with numpy in blocks of ``batch`` queries x ``batch`` documents so memory stays
    at ``batch * Lq * batch * Ld`` floats.
    """
    nq, nd = len(q), len(d)
    out = np.zeros((nq, nd), np.float32)
    if nq == 0 or nd == 0:
        return out
    qmask = np.arange(q.vectors.shape[1])[None, :] < q.lengths[:, None]  # (nq, Lq)
    dmask = np.arange(d.vectors.shape[1])[None, :] < d.lengths[:, None]  # (nd, Ld)
    for qs in range(0, nq, batch):
        qv = q.vectors[qs : qs + batch].astype(np.float32)
        qm = qmask[qs : qs + batch]
        for ds in range(0, nd, batch):
            dv = d.vectors[ds : ds + batch].astype(np.float32)
            dm = dmask[ds : ds + batch]
            # (bq, Lq, bd, Ld)
            sim = np.einsum("qtd,kud->qtku", qv, dv)
            sim = np.where(dm[None, None, :, :], sim, -np.inf)
            best = sim.max(axis=3)  # (bq, Lq, bd)
            best = np.where(qm[:, :, None], best, 0.0)
            out[qs : qs + batch, ds : ds + batch] = best.sum(axis=1)
    return out
