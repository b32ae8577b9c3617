"""Cluster separation of embeddings (silhouette) and its correlation with SP.

:func:`silhouette_by_label`: sklearn's silhouette on the raw embeddings (Euclidean, as the
authors; cosine offered), per label and overall. :func:`pearson`: r, p, n and a Fisher-z 95%
interval, with Spearman beside it; below :data:`EXPLORATORY_N` pairs marked ``exploratory``.
Degenerate inputs give ``None`` values with a ``reason``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

METRICS = ("euclidean", "cosine")
EXPLORATORY_N = 30  # below it a correlation's interval spans most of [-1, 1] at moderate r


def silhouette_by_label(
    x: np.ndarray, labels: Sequence[str] | np.ndarray, metric: str = "euclidean",
) -> dict[str, Any]:
    """Silhouette of every sample, averaged per label and overall (``reason`` when undefined)."""
    from sklearn.metrics import silhouette_samples

    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    x = np.asarray(x)
    labels = np.asarray(labels).astype(str)
    if x.ndim != 2 or x.shape[0] != labels.shape[0]:
        raise ValueError(f"x must be (n, d) with one label per row, got {x.shape} and "
                         f"{labels.shape[0]} labels")
    uniq, counts = np.unique(labels, return_counts=True)
    out: dict[str, Any] = {"metric": metric, "n": int(x.shape[0]), "n_labels": int(len(uniq)),
                           "overall": None,
                           "by_label": {str(u): {"n": int(c), "silhouette": None}
                                        for u, c in zip(uniq, counts, strict=True)}}
    if len(uniq) < 2 or len(uniq) >= x.shape[0]:
        out["reason"] = (f"silhouette needs 2 <= labels < samples; got {len(uniq)} label(s) "
                         f"for {x.shape[0]} sample(s)")
        log.warning("%s", out["reason"])
        return out
    s = silhouette_samples(x, labels, metric=metric).astype(np.float64)
    out["overall"] = float(s.mean())
    for u in uniq:
        out["by_label"][str(u)]["silhouette"] = float(s[labels == u].mean())
    return out


def _defined(v: Any, inf: bool = False) -> bool:
    ok = v is not None and isinstance(v, int | float | np.floating) and not math.isnan(float(v))
    return ok and (inf or math.isfinite(float(v)))


def pearson(x: Sequence[float | None], y: Sequence[float | None]) -> dict[str, Any]:
    """Pearson r, two-sided p, n and 95% interval over the finite pairs; Spearman rho and p
    over the defined pairs (``spearman``); ``exploratory`` below :data:`EXPLORATORY_N`."""
    from scipy.stats import pearsonr, spearmanr

    if len(x) != len(y):
        raise ValueError(f"x and y differ in length ({len(x)} != {len(y)})")
    pairs = [(float(a), float(b)) for a, b in zip(x, y, strict=True)
             if _defined(a) and _defined(b)]
    ranked = [(float(a), float(b)) for a, b in zip(x, y, strict=True)
              if _defined(a, True) and _defined(b, True)]
    out: dict[str, Any] = {"n": len(pairs), "r": None, "p": None, "ci95": [None, None],
                           "exploratory": len(pairs) < EXPLORATORY_N,
                           "spearman": {"n": len(ranked), "rho": None, "p": None}}
    if len(ranked) >= 3 and len({a for a, _ in ranked}) > 1 and len({b for _, b in ranked}) > 1:
        res = spearmanr(*np.array(ranked).T)
        out["spearman"].update(rho=float(res.statistic), p=float(res.pvalue))
    if len(pairs) < 3:
        out["reason"] = f"needs at least 3 defined pairs, got {len(pairs)}"
        return out
    a, b = np.array(pairs).T
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        out["reason"] = "a series is constant"
        return out
    res = pearsonr(a, b)
    out["r"], out["p"] = float(res.statistic), float(res.pvalue)
    if len(pairs) > 3:
        z, half = np.arctanh(np.clip(out["r"], -1 + 1e-15, 1 - 1e-15)), 1.959964 / math.sqrt(
            len(pairs) - 3)
        out["ci95"] = [float(np.tanh(z - half)), float(np.tanh(z + half))]
    return out


def correlation_text(c: dict[str, Any]) -> str:
    """One correlation for a table or a figure: r [95% CI], rho, Holm p of each, n."""
    def f(v: float | None, fmt: str = ".2f") -> str:
        return "-" if v is None else format(v, fmt)

    if c.get("r") is None:
        return f"r undefined ({c.get('reason', 'n < 3')}; n = {c.get('n', 0)})"
    lo, hi = c.get("ci95") or [None, None]
    s = c.get("spearman") or {}
    ph = c.get("p_holm", c.get("p"))
    text = (f"r {c['r']:.2f} [{f(lo)}, {f(hi)}] p {f(ph, '.3g')}, ρ {f(s.get('rho'))} "
            f"p {f(s.get('p_holm', s.get('p')), '.3g')}, n {c['n']}")
    return text + (" (exploratory)" if c.get("exploratory") else "")
