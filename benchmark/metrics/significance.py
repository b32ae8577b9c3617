"""Is a difference between two models real? Paired bootstraps and the Holm correction.

Two models scored on the same items (3XCM triplets; XM3600 query images) are compared by
resampling the items with replacement and evaluating BOTH models on each resample (a paired
bootstrap): the spread of the difference then reflects only what varies between the models,
not the luck of the draw of the items, which both share.

- 3XCM (:func:`paired_association`): each triplet has a pair of outcomes (winner of model a,
  winner of model b; 0 semantic, 1 cultural, 2 non-relevant), one of 9 joint categories.
  Resampling N triplets and counting the joint categories is the same as drawing the 9
  counts from Multinomial(N, observed joint shares), which is what is computed (exact, and
  fast for any N). From each resample's counts: ``ΔM_k = M_k(a) - M_k(b)`` for k in sem, cul,
  non and ``ΔSP = SP(a) - SP(b)``. Resamples where either SP is undefined (no semantic win)
  are left out of ΔSP and counted.
- XM3600 (:func:`paired_means`): per query image one value per metric and model; a resample
  draws the images once (multinomial weights over the images) and the difference of the two
  means of every metric is taken on it.
- Interval: the 2.5th and 97.5th percentiles of the resampled differences (``ci95``).
- p-value (two-sided, H0: no difference): twice the share of resampled differences on the
  far side of 0, ``p = min(1, 2 (1 + min(#{d*_b <= 0}, #{d*_b >= 0})) / (1 + B))``: the
  level at which the percentile interval just reaches 0, so ``p < 0.05`` exactly when the
  95% interval (nearly) excludes 0, also for the skewed ratio SP. ``p`` is never 0 (at
  least ``2 / (1 + B)``); with ``d = 0`` it is 1.
- :func:`holm`: Holm's step-down adjustment of m p-values (family-wise error rate): the
  i-th smallest is multiplied by ``m - i + 1``, then made monotone and capped at 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

ALPHA = 0.05
WIN_KEYS = ("M_sem", "M_cul", "M_non")


def p_value(observed: float, resampled: np.ndarray) -> float:
    """Two-sided bootstrap p-value of H0 "no difference" (see the module docstring)."""
    d = np.asarray(resampled, np.float64)
    d = d[np.isfinite(d)]
    if observed == 0:
        return 1.0
    tail = min(int((d <= 0).sum()), int((d >= 0).sum()))
    return float(min(1.0, 2 * (1 + tail) / (1 + d.size)))


def interval(resampled: np.ndarray) -> list[float | None]:
    """95% percentile interval of the finite resampled values ([None, None] if none)."""
    d = np.asarray(resampled, np.float64)
    d = d[np.isfinite(d)]
    if not d.size:
        return [None, None]
    lo, hi = np.percentile(d, [2.5, 97.5])
    return [float(lo), float(hi)]


def _difference(observed: float | None, resampled: np.ndarray) -> dict[str, Any]:
    if observed is None or not np.isfinite(observed):
        return {"diff": None, "ci95": [None, None], "p": None}
    finite = np.isfinite(resampled)
    if not finite.any():
        return {"diff": float(observed), "ci95": [None, None], "p": None}
    return {"diff": float(observed), "ci95": interval(resampled),
            "p": p_value(float(observed), resampled)}


def _rates(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(win rates (..., 3), SP (...)) of model a and b from joint counts (..., 9) laid out
    as ``3 * winner_a + winner_b``; SP NaN where there is no semantic win."""
    c = counts.reshape(*counts.shape[:-1], 3, 3).astype(np.float64)
    wa, wb = c.sum(axis=-1), c.sum(axis=-2)
    n = c.sum(axis=(-1, -2))[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ma, mb = wa / n, wb / n
        sa = np.where(wa[..., 0] > 0, wa[..., 1] / wa[..., 0], np.nan)
        sb = np.where(wb[..., 0] > 0, wb[..., 1] / wb[..., 0], np.nan)
    return ma - mb, sa - sb


def paired_counts(
    winner_a: np.ndarray, winner_b: np.ndarray, n_resamples: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """ΔSP and ΔM_sem/cul/non of one set of paired triplet outcomes (see module docstring).

    Returns ``{"n", "SP": {a, b, diff, ci95, p}, "M_sem": {...}, "M_cul", "M_non",
    "SP_undefined_resamples"}`` (``a``, ``b``: each model's value on these triplets).
    """
    wa, wb = np.asarray(winner_a, np.int64), np.asarray(winner_b, np.int64)
    if wa.shape != wb.shape or wa.ndim != 1:
        raise ValueError("paired winners must be 1-d arrays of the same length")
    if wa.size and (min(wa.min(), wb.min()) < 0 or max(wa.max(), wb.max()) > 2):
        raise ValueError("winners must be 0 (semantic), 1 (cultural) or 2 (non-relevant)")
    n = int(wa.size)
    out: dict[str, Any] = {"n": n}
    if n == 0:
        out.update({k: {"a": None, "b": None, **_difference(None, np.empty(0))}
                    for k in ("SP", *WIN_KEYS)})
        out["SP_undefined_resamples"] = 0
        return out
    joint = np.bincount(3 * wa + wb, minlength=9)
    ca, cb = joint.reshape(3, 3).sum(axis=1), joint.reshape(3, 3).sum(axis=0)
    dm, dsp = _rates(joint)
    rng = np.random.default_rng(seed)
    draws = (rng.multinomial(n, joint / n, size=n_resamples) if n_resamples > 0
             else np.empty((0, 9), np.int64))
    bm, bsp = _rates(draws)
    out["SP"] = {"a": float(ca[1] / ca[0]) if ca[0] else None,
                 "b": float(cb[1] / cb[0]) if cb[0] else None,
                 **_difference(float(dsp) if np.isfinite(dsp) else None, bsp)}
    out["SP_undefined_resamples"] = int((~np.isfinite(bsp)).sum())
    for j, key in enumerate(WIN_KEYS):
        out[key] = {"a": float(ca[j] / n), "b": float(cb[j] / n),
                    **_difference(float(dm[j]), bm[:, j])}
    return out


def paired_association(
    winner_a: np.ndarray, winner_b: np.ndarray, groups: np.ndarray | None = None,
    n_resamples: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """``{"overall": paired_counts(...), "by_group": {label: paired_counts(...)}}``; each
    group (e.g. the query country) is resampled within itself, with its own seed."""
    from benchmark.metrics.association import group_seed

    out: dict[str, Any] = {"overall": paired_counts(winner_a, winner_b, n_resamples, seed)}
    if groups is not None:
        labels = np.asarray(groups).astype(str)
        wa, wb = np.asarray(winner_a), np.asarray(winner_b)
        out["by_group"] = {
            str(g): paired_counts(wa[labels == g], wb[labels == g], n_resamples,
                                  group_seed(seed, f"paired:{g}"))
            for g in dict.fromkeys(labels)}
    return out


def paired_means(
    values_a: dict[str, np.ndarray], values_b: dict[str, np.ndarray],
    n_resamples: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """Per metric: ``{"a", "b", "diff", "ci95", "p"}`` of ``mean(a) - mean(b)`` over paired
    items (one resample of the items shared by every metric); plus ``n``."""
    names = [k for k in values_a if k in values_b]
    if not names:
        return {"n": 0}
    a = np.column_stack([np.asarray(values_a[k], np.float64) for k in names])
    b = np.column_stack([np.asarray(values_b[k], np.float64) for k in names])
    if a.shape != b.shape:
        raise ValueError("paired values must have the same number of items")
    n = a.shape[0]
    out: dict[str, Any] = {"n": int(n)}
    if n == 0:
        return out | {k: {"a": None, "b": None, **_difference(None, np.empty(0))} for k in names}
    d = a - b
    rng = np.random.default_rng(seed)
    boot = np.empty((max(n_resamples, 0), len(names)))
    step = max(1, 2_000_000 // max(n, 1))  # resamples per block: bounded memory
    for s in range(0, boot.shape[0], step):
        m = min(step, boot.shape[0] - s)
        w = rng.multinomial(n, np.full(n, 1.0 / n), size=m).astype(np.float64)
        boot[s:s + m] = (w @ d) / n
    for j, k in enumerate(names):
        out[k] = {"a": float(a[:, j].mean()), "b": float(b[:, j].mean()),
                  **_difference(float(d[:, j].mean()), boot[:, j])}
    return out


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the input order (None stays None and is not counted)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = running
    return out
