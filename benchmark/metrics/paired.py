"""Paired bootstrap of an SP difference: the same triplets queried in two languages."""

from __future__ import annotations

import numpy as np


def sp_from_counts(sem: np.ndarray, cul: np.ndarray) -> np.ndarray:
    """SP per row (NaN where there is no semantic win)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sem > 0, cul / np.maximum(sem, 1), np.nan)


def paired_sp_difference(
    winner_a: np.ndarray, winner_b: np.ndarray, n_resamples: int = 1000, seed: int = 0,
) -> dict[str, float | int | None | list[float | None]]:
    """``SP_a - SP_b`` on the same triplets, with a 95% paired percentile bootstrap interval.

    ``winner_a[i]`` and ``winner_b[i]`` are the winner columns (0 sem, 1 cul, 2 non) of triplet
    i under conditions a and b. Each resample draws triplet indices with replacement once and
    evaluates both conditions on them, so the interval reflects the pairing. Resamples where
    either SP is undefined (no semantic win) are left out and counted.
    """
    winner_a, winner_b = np.asarray(winner_a), np.asarray(winner_b)
    if winner_a.shape != winner_b.shape:
        raise ValueError("paired winners must have the same shape")
    n = winner_a.size
    out: dict[str, float | int | None | list[float | None]] = {
        "n": int(n), "SP_a": None, "SP_b": None, "SP_diff": None, "SP_diff_ci95": [None, None],
        "undefined_resamples": 0,
    }
    if n == 0:
        return out
    ca, cb = np.bincount(winner_a, minlength=3), np.bincount(winner_b, minlength=3)
    sp_a = float(ca[1] / ca[0]) if ca[0] else None
    sp_b = float(cb[1] / cb[0]) if cb[0] else None
    out.update(SP_a=sp_a, SP_b=sp_b,
               SP_diff=(sp_a - sp_b) if sp_a is not None and sp_b is not None else None)
    if n_resamples <= 0:
        return out
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    wa, wb = winner_a[idx], winner_b[idx]
    d = (sp_from_counts((wa == 0).sum(1), (wa == 1).sum(1))
         - sp_from_counts((wb == 0).sum(1), (wb == 1).sum(1)))
    ok = np.isfinite(d)
    out["undefined_resamples"] = int((~ok).sum())
    if ok.any():
        lo, hi = np.percentile(d[ok], [2.5, 97.5])
        out["SP_diff_ci95"] = [float(lo), float(hi)]
    return out
