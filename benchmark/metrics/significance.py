"""Is a difference between two models real? Paired, cluster-robust tests and Holm's correction.

Two runs paired by item id (3XCM triplets, units the concepts; XM3600 query images): each
Δ = A - B gets ``Δ ± t_df SE`` and a two-sided t p-value (SP's p tests θ = cul / (sem + cul)),
and ``mde``; docs/analysis.md, "compare". :func:`holm` adjusts a family of p-values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmark.metrics import clustered
from benchmark.metrics.association import INFINITE, WIN_KEYS

ALPHA = 0.05
KEYS = ("SP", *WIN_KEYS)
METHOD = ("paired by item id; Δ = A - B; cluster-robust standard error over {unit} (what "
          "resampling them estimates, in closed form; for ΔSP by the delta method); 95% "
          "interval Δ ± t·SE and two-sided p from t with (units - 1) df (for SP: the test of "
          "θ = cul/(sem+cul), the same null, bounded)")


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _rows(r: dict[str, np.ndarray], i: int, names: Sequence[str], cols: Sequence[int]
          ) -> dict[str, Any]:
    out: dict[str, Any] = {"n": int(r["n"][i]), "units": int(r["units"][i])}
    for name, j in zip(names, cols, strict=True):
        out[name] = {**{f"{s}_note": INFINITE for s in "ab" if r[s][i, j] == np.inf},
                     "a": _num(r["a"][i, j]), "b": _num(r["b"][i, j]),
                     "diff": _num(r["diff"][i, j]),
                     "ci95": [_num(r["lo"][i, j]), _num(r["hi"][i, j])],
                     "p": _num(r["p"][i, j]), "mde": _num(r["mde"][i, j])}
    return out


def _check(credit_a: np.ndarray, credit_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ca, cb = (np.asarray(c, np.float64) for c in (credit_a, credit_b))
    if ca.ndim == 1:  # winners 0 semantic, 1 cultural, 2 non-relevant
        if ca.shape != cb.shape or (ca.size and (min(ca.min(), cb.min()) < 0
                                                 or max(ca.max(), cb.max()) > 2)):
            raise ValueError("winners must be 0 (semantic), 1 (cultural) or 2 (non-relevant), "
                             "one per item of both models")
        ca, cb = np.eye(3)[ca.astype(np.int64)], np.eye(3)[cb.astype(np.int64)]
    if ca.shape != cb.shape or ca.ndim != 2 or ca.shape[1] != 3:
        raise ValueError("paired credits must be (N, 3) arrays of the same shape")
    return ca, cb


def paired_association(credit_a: np.ndarray, credit_b: np.ndarray,
                       groups: np.ndarray | None = None, concept: np.ndarray | None = None,
                       country: np.ndarray | None = None) -> dict[str, Any]:
    """``overall`` and ``by_group`` (first-appearance order) rows of SP and M_k from (N, 3)
    credits or (N,) winners; ``concept``/``country``: the units (None: every item one)."""
    ca, cb = _check(credit_a, credit_b)
    n = len(ca)
    labels = np.asarray(groups).astype(str) if groups is not None else np.zeros(n, str)
    order = list(dict.fromkeys(labels.tolist()))
    uniq, inv = clustered.codes(labels)
    g = np.array([order.index(x) for x in uniq], np.int64)[inv] if n else inv
    cluster = np.arange(n) if concept is None else clustered.codes(concept)[1]
    stratum = None if country is None else clustered.codes(country)[1]
    cols = [3, 0, 1, 2]
    whole = clustered.paired(ca, cb, np.zeros(n, np.int64), 1,
                             clustered.units(np.zeros(n, np.int64), 1, cluster, stratum))
    out: dict[str, Any] = {"overall": _rows(whole, 0, KEYS, cols)}
    if groups is not None:
        r = clustered.paired(ca, cb, g, len(order), clustered.units(g, len(order), cluster,
                                                                     stratum))
        out["by_group"] = {lab: _rows(r, i, KEYS, cols) for i, lab in enumerate(order)}
    return out


def paired_means(values_a: dict[str, np.ndarray], values_b: dict[str, np.ndarray]
                 ) -> dict[str, Any]:
    """Per metric, the row of ``mean(a) - mean(b)`` over paired items (each a unit); plus n."""
    names = [k for k in values_a if k in values_b]
    if not names:
        return {"n": 0}
    a = np.column_stack([np.asarray(values_a[k], np.float64) for k in names])
    b = np.column_stack([np.asarray(values_b[k], np.float64) for k in names])
    if a.shape != b.shape:
        raise ValueError("paired values must have the same number of items")
    n = a.shape[0]
    g = np.zeros(n, np.int64)
    u = clustered.units(g, 1, np.arange(n))
    ma, mb = a.mean(0, keepdims=True), b.mean(0, keepdims=True)
    v = u.variance(((a - b) - (ma - mb)) / max(n, 1)) if n else np.full((1, len(names)), np.nan)
    diff = ma - mb
    se = np.sqrt(v)
    df = np.broadcast_to(u.df[:, None], diff.shape)
    lo, hi, p = clustered.t_test(diff, se, df)
    r = {"a": ma, "b": mb, "diff": diff, "lo": lo, "hi": hi, "p": p,
         "mde": clustered.detectable(se, df), "n": np.array([n]), "units": u.units}
    out = _rows(r, 0, names, range(len(names)))
    del out["units"]
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
