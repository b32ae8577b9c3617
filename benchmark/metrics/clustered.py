"""Intervals and tests over what 3XCM samples: its concepts, with the countries fixed.

Every rate is a ratio of totals theta = sum(y) / sum(d) over a group's triplets; its variance
is the cluster-robust linearisation over concepts (a group of one concept: its triplets,
stratified by country) and its interval Korn and Graubard's (docs/analysis.md, "The default
interval"). Paired differences get a t interval and p-value on the same variance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

LEVEL = 0.95
POWER = 0.8


def codes(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct labels as str, code of each row)."""
    return np.unique(np.asarray(labels).astype(str), return_inverse=True)


@dataclass
class Units:
    """How the rows of each group fall into resampling units and strata."""

    row_unit: np.ndarray  # (N,) unit of each row
    unit_stratum: np.ndarray  # (U,) (group, stratum) cell of each unit
    stratum_group: np.ndarray  # (H,) group of each cell
    n_groups: int
    units: np.ndarray  # (G,) units per group
    df: np.ndarray  # (G,) units - strata

    def variance(self, r: np.ndarray) -> np.ndarray:
        """(G, m) cluster-robust variance of the group sums of the per-row residuals (N, m)."""
        r = r[:, None] if r.ndim == 1 else r
        out = np.empty((self.n_groups, r.shape[1]))
        c = np.bincount(self.unit_stratum).astype(np.float64)
        for j in range(r.shape[1]):
            ru = np.bincount(self.row_unit, r[:, j], minlength=len(self.unit_stratum))
            s1 = np.bincount(self.unit_stratum, ru, minlength=len(c))
            s2 = np.bincount(self.unit_stratum, ru * ru, minlength=len(c))
            with np.errstate(divide="ignore", invalid="ignore"):
                h = np.where(c > 1, c / (c - 1) * (s2 - s1 * s1 / c), 0.0)
            out[:, j] = np.bincount(self.stratum_group, np.maximum(h, 0), self.n_groups)
        return out


def units(group: np.ndarray, n_groups: int, cluster: np.ndarray,
          stratum: np.ndarray | None = None) -> Units:
    """Units of each group: its clusters, or its rows by ``stratum`` in a group of one cluster."""
    group, cluster = np.asarray(group, np.int64), np.asarray(cluster, np.int64)
    n = len(group)
    stratum = np.zeros(n, np.int64) if stratum is None else np.asarray(stratum, np.int64)
    n_cl = int(cluster.max()) + 1 if n else 1
    n_st = int(stratum.max()) + 1 if n else 1
    pairs = np.unique(group * n_cl + cluster)
    single = np.bincount(pairs // n_cl, minlength=n_groups) == 1
    one = single[group]
    unit = np.where(one, n_cl + np.arange(n), cluster)
    st = np.where(one, stratum, 0)
    span = n_cl + n
    keys, row_unit = np.unique((group * n_st + st) * span + unit, return_inverse=True)
    cells, unit_stratum = np.unique(keys // span, return_inverse=True)
    stratum_group = cells // n_st
    n_units = np.bincount(keys // span // n_st, minlength=n_groups)
    df = n_units - np.bincount(stratum_group, minlength=n_groups)
    return Units(row_unit.ravel(), unit_stratum.ravel(), stratum_group, n_groups, n_units, df)


def clopper_pearson(x: np.ndarray, n: np.ndarray, level: float = LEVEL
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Exact binomial limits of x successes in n (real-valued x, n); NaN where n is 0."""
    a = (1 - level) / 2
    x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(x > 0, special.betaincinv(np.maximum(x, 1e-300), n - x + 1, a), 0.0)
        hi = np.where(x < n, special.betaincinv(x + 1, np.maximum(n - x, 1e-300), 1 - a), 1.0)
    bad = ~(n > 0)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def t_quantile(df: np.ndarray, q: float) -> np.ndarray:
    """Student t quantile (normal where df is infinite)."""
    return special.stdtrit(np.maximum(np.asarray(df, np.float64), 1.0), q)


def effective_interval(theta: np.ndarray, var: np.ndarray, n: np.ndarray, df: np.ndarray,
                       level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Korn-Graubard limits of a proportion theta of n with variance ``var`` on ``df`` df."""
    theta, var, n = (np.asarray(v, np.float64) for v in (theta, var, n))
    df = np.asarray(df, np.float64)
    q = 1 - (1 - level) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        iid = theta * (1 - theta) / n
        deff = np.where((theta > 0) & (theta < 1) & (iid > 0), var / iid, 1.0)
        shrink = np.minimum(1.0, (t_quantile(n - 1, q) / t_quantile(df, q)) ** 2)
    n_eff = np.where(df >= 1, n / np.maximum(np.nan_to_num(deff, nan=1.0), 1.0) * shrink, 0.0)
    x = np.where(theta >= 1, n_eff, theta * n_eff)
    lo, hi = clopper_pearson(x, n_eff, level)
    nodf = (df < 1) & (n > 0)
    return np.where(nodf, 0.0, lo), np.where(nodf, 1.0, hi)


def detectable(se: np.ndarray, df: np.ndarray, alpha: float = 1 - LEVEL,
               power: float = POWER) -> np.ndarray:
    """Smallest true difference a two-sided t test at ``alpha`` detects with ``power`` (NaN: se 0)."""
    se = np.asarray(se, np.float64)
    return np.where(se > 0, (t_quantile(df, 1 - alpha / 2) + t_quantile(df, power)) * se, np.nan)


def detectable_sp(sp: np.ndarray, se: np.ndarray, df: np.ndarray) -> np.ndarray:
    """:func:`detectable` for a rise of SP from ``sp``, on the log scale (SP's spread grows)."""
    k = detectable(np.ones_like(np.asarray(se, np.float64)), df)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        up = np.where(sp > 0, sp * np.expm1(k * se / sp), k * se)
    return np.where(np.asarray(se) > 0, up, np.nan)


def t_test(diff: np.ndarray, se: np.ndarray, df: np.ndarray, level: float = LEVEL
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, two-sided p) of ``diff`` with standard error ``se`` on ``df`` df."""
    diff, se = np.asarray(diff, np.float64), np.asarray(se, np.float64)
    half = t_quantile(df, 1 - (1 - level) / 2) * se
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(diff) / se
    p = np.where(diff == 0, 1.0, np.where(se > 0, 2 * special.stdtr(np.maximum(df, 1), -t), 0.0))
    ok = (np.asarray(df) >= 1) & np.isfinite(diff)
    return (np.where(ok, diff - half, np.nan), np.where(ok, diff + half, np.nan),
            np.where(ok, p, np.nan))


def rates(credit: np.ndarray, group: np.ndarray, n_groups: int, u: Units,
          level: float = LEVEL) -> dict[str, np.ndarray]:
    """Per group: n, wins, M and SP with limits (SP_hi inf: no semantic win), se and mde."""
    credit = np.asarray(credit, np.float64)
    n = np.bincount(group, minlength=n_groups).astype(np.float64)
    wins = np.stack([np.bincount(group, credit[:, k], n_groups) for k in range(3)], axis=1)
    d = wins[:, 0] + wins[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        m = wins / n[:, None]
        theta = wins[:, 1] / d
        r = np.column_stack([(credit - m[group]) / n[group, None],
                             (credit[:, 1] - theta[group] * credit[:, :2].sum(1)) / d[group]])
    v = u.variance(np.nan_to_num(r))
    m_lo, m_hi = effective_interval(m, v[:, :3], n[:, None], u.df[:, None], level)
    t_lo, t_hi = effective_interval(theta, v[:, 3], d, u.df, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        sp = np.where(wins[:, 0] > 0, wins[:, 1] / wins[:, 0], np.nan)
        sp_lo, sp_hi = (np.where(t >= 1, np.inf, t / (1 - t)) for t in (t_lo, t_hi))
        se_sp = np.sqrt(v[:, 3]) / (1 - theta) ** 2
    se_m = np.sqrt(v[:, :3])
    return {"n": n, "wins": wins, "M": m, "M_lo": m_lo, "M_hi": m_hi, "SP": sp,
            "SP_lo": sp_lo, "SP_hi": sp_hi, "se_M": se_m, "se_SP": se_sp,
            "mde_M": detectable(se_m, u.df[:, None]), "mde_SP": detectable(se_sp, u.df),
            "units": u.units, "df": u.df}


def paired(ca: np.ndarray, cb: np.ndarray, group: np.ndarray, n_groups: int, u: Units,
           level: float = LEVEL) -> dict[str, np.ndarray]:
    """Per group, columns M_sem, M_cul, M_non, SP: a, b, diff = a - b, lo, hi, p, se, mde; SP's
    p tests theta = cul / (sem + cul) (equal exactly when SP is; bounded at SP's extremes)."""
    ca, cb = np.asarray(ca, np.float64), np.asarray(cb, np.float64)
    n = np.bincount(group, minlength=n_groups).astype(np.float64)
    sums = [np.stack([np.bincount(group, c[:, k], n_groups) for k in range(3)], 1)
            for c in (ca, cb)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ma, mb = sums[0] / n[:, None], sums[1] / n[:, None]
        spa, spb = (np.where(s[:, 0] > 0, s[:, 1] / s[:, 0], np.where(s[:, 1] > 0, np.inf,
                                                                       np.nan)) for s in sums)
        ta, tb = (s[:, 1] / (s[:, 0] + s[:, 1]) for s in sums)
        r_m = ((ca - cb) - (ma - mb)[group]) / n[group, None]
        r_sp = ((ca[:, 1] - spa[group] * ca[:, 0]) / sums[0][group, 0]
                - (cb[:, 1] - spb[group] * cb[:, 0]) / sums[1][group, 0])
        r_t = ((ca[:, 1] - ta[group] * ca[:, :2].sum(1)) / sums[0][group, :2].sum(1)
               - (cb[:, 1] - tb[group] * cb[:, :2].sum(1)) / sums[1][group, :2].sum(1))
    v = u.variance(np.nan_to_num(np.column_stack([r_m, r_sp, r_t]), posinf=0, neginf=0))
    a = np.column_stack([ma, spa])
    b = np.column_stack([mb, spb])
    with np.errstate(invalid="ignore"):
        diff = a - b
    se = np.sqrt(v[:, :4])
    df = np.broadcast_to(u.df[:, None], diff.shape)
    lo, hi, p = t_test(np.where(np.isinf(diff), np.nan, diff), se, df, level)
    p[:, 3] = t_test(ta - tb, np.sqrt(v[:, 4]), u.df, level)[2]
    mde = detectable(se, df)
    mde[:, 3] = detectable_sp(np.fmin(spa, spb), se[:, 3], u.df)
    und = ~np.isfinite(diff)
    return {"a": a, "b": b, "diff": diff, "lo": np.where(und, np.nan, lo),
            "hi": np.where(und, np.nan, hi), "p": p, "se": np.where(und, np.nan, se),
            "mde": np.where(und, np.nan, mde), "n": n, "units": u.units, "df": u.df}
