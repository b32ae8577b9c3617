"""Association-bias metrics of 3XCM: win rates, SP, their intervals, the authors' z-scores.

``sims`` is (N, 3): each triplet query's similarity to its semantic, cultural and non-relevant
candidate. Winners, ties, M_k, SP and z-scores as README.md defines them; intervals ``cluster``
(:mod:`benchmark.metrics.clustered`) or ``iid`` (multinomial percentile bootstrap); an upper
limit of None beside a lower one is infinity.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from benchmark.metrics import clustered

CANDIDATE_KEYS = ("sem", "cul", "non")
WIN_KEYS = ("M_sem", "M_cul", "M_non")
TIE_ORDER = ["semantic", "cultural", "non_relevant"]
TIE_RULES = ("order", "split")
CI_METHODS = ("cluster", "iid")
INFINITE = "∞ (no semantic win)"
CI_TEXT = {
    "cluster": "cluster-robust over concepts (Korn-Graubard: Clopper-Pearson at the design-"
               "effect sample size, t df = concepts - 1); a group of one concept: its triplets, "
               "stratified by country",
    "iid": "percentile, multinomial resampling of the triplet outcomes (triplets as if "
           "independent)"}
ESTIMAND = {"cluster": "the rate over concepts of this kind (other concepts, same countries)",
            "iid": "the rate on these concepts and images (other draws of these triplets)"}


def winners(sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(winner column per row with ties broken by TIE_ORDER, boolean tie mask)."""
    sims = np.asarray(sims)
    if sims.ndim != 2 or sims.shape[1] != 3:
        raise ValueError(f"sims must be (N, 3), got {sims.shape}")
    best = sims.max(axis=1, keepdims=True)
    at_max = sims == best
    return at_max.argmax(axis=1), at_max.sum(axis=1) > 1


def credits(sims: np.ndarray, ties: str = "order") -> np.ndarray:
    """(N, 3) win credit: one-hot of the winner (``order``) or 1/m to each of m tied maxima."""
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}, got {ties!r}")
    if ties == "order":
        return np.eye(3)[winners(sims)[0]]
    at_max = np.asarray(sims) == np.asarray(sims).max(axis=1, keepdims=True)
    return at_max / at_max.sum(axis=1, keepdims=True)


def zscores(sims: np.ndarray) -> np.ndarray:
    """All 3N values standardised with one mean and the population std (ddof=0)."""
    sims = np.asarray(sims, dtype=np.float64)
    sd = sims.std()
    if sd == 0 or not np.isfinite(sd):
        return np.zeros_like(sims)
    return (sims - sims.mean()) / sd


def bootstrap_intervals(wins: np.ndarray, n_resamples: int = 1000, seed: int = 0,
                        level: float = 0.95) -> dict[str, Any]:
    """The ``iid`` method: percentile intervals of SP and each M_k over multinomial resamples."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    wins = np.asarray(wins, np.int64)
    n = int(wins.sum())
    out: dict[str, Any] = {"SP_ci95": [None, None], "SP_ci95_undefined_resamples": 0,
                           **{f"{k}_ci95": [None, None] for k in WIN_KEYS}}
    if n == 0 or n_resamples <= 0:
        return out
    draws = np.random.default_rng(seed).multinomial(n, wins / n, size=n_resamples)
    tail = 100 * (1 - level) / 2
    for j, k in enumerate(WIN_KEYS):
        out[f"{k}_ci95"] = [float(v) for v in np.percentile(draws[:, j] / n, [tail, 100 - tail])]
    ok = draws[:, 0] > 0
    out["SP_ci95_undefined_resamples"] = int((~ok).sum())
    if ok.any():
        sp = draws[ok, 1] / draws[ok, 0]
        out["SP_ci95"] = [float(v) for v in np.percentile(sp, [tail, 100 - tail])]
    return out


def group_seed(seed: int, group: str) -> int:
    """A per-group bootstrap seed derived from the run seed and the group's name."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{group}".encode()).digest()[:8], "little")


def _num(x: float, whole: bool = False) -> float | int | None:
    if not math.isfinite(x):
        return None
    return int(round(x)) if whole else float(x)


def _entry(r: dict[str, np.ndarray], i: int, ties: int, z: np.ndarray, whole: bool
           ) -> dict[str, Any]:
    """One group's scores from :func:`benchmark.metrics.clustered.rates` row ``i``."""
    n, w = int(r["n"][i]), r["wins"][i]
    e: dict[str, Any] = {"n": n, **{f"wins_{k}": _num(w[j], whole)
                                    for j, k in enumerate(CANDIDATE_KEYS)}, "ties": ties}
    for j, k in enumerate(WIN_KEYS):
        e[k] = _num(r["M"][i, j]) if n else None
        e[f"{k}_ci95"] = [_num(r["M_lo"][i, j]), _num(r["M_hi"][i, j])]
    e["SP"] = _num(r["SP"][i])
    if e["SP"] is None and n:
        e["SP_note"] = INFINITE if w[1] > 0 else "undefined (no semantic or cultural win)"
    lo, hi = r["SP_lo"][i], r["SP_hi"][i]
    e["SP_ci95"] = [_num(lo), None if np.isinf(hi) or not np.isfinite(lo) else _num(hi)]
    for j, k in enumerate(CANDIDATE_KEYS):
        e[f"z_{k}"] = _num(z[j]) if n else None
    e["units"] = int(r["units"][i])
    e["mde"] = {"SP": _num(r["mde_SP"][i]),
                **{k: _num(r["mde_M"][i, j]) for j, k in enumerate(WIN_KEYS)}}
    return e


def group_scores(labels: np.ndarray | None, credit: np.ndarray, tie: np.ndarray, z: np.ndarray,
                 cluster: np.ndarray, stratum: np.ndarray | None, ci: str = "cluster",
                 n_resamples: int = 1000, seed: int = 0, name: str | None = None
                 ) -> dict[str, dict[str, Any]]:
    """Scores per label (None: one group, key ``""``); units from ``cluster``/``stratum``."""
    if ci not in CI_METHODS:
        raise ValueError(f"ci must be one of {CI_METHODS}, got {ci!r}")
    n = len(credit)
    uniq, g = (np.array([""]), np.zeros(n, np.int64)) if labels is None else clustered.codes(labels)
    if ci == "iid":
        cluster, stratum = np.arange(n), None
    r = clustered.rates(credit, g, len(uniq), clustered.units(g, len(uniq), cluster, stratum))
    zs = np.stack([np.bincount(g, z[:, k], len(uniq)) for k in range(3)], 1)
    zs = zs / np.maximum(r["n"], 1)[:, None]
    tie_n = np.bincount(g, np.asarray(tie, np.float64), len(uniq))
    whole = bool(np.all((credit == 0) | (credit == 1)))
    out: dict[str, dict[str, Any]] = {}
    for i, label in enumerate(uniq):
        e = _entry(r, i, int(tie_n[i]), zs[i], whole)
        if ci == "iid" and whole:
            wins = np.array([e["wins_sem"], e["wins_cul"], e["wins_non"]])
            e.update(bootstrap_intervals(wins, n_resamples, seed if name is None
                                         else group_seed(seed, f"{name}:{label}")))
        out[str(label)] = e
    return out


def association_scores(
    sims: np.ndarray, groups: dict[str, np.ndarray], n_resamples: int = 1000, seed: int = 0,
    *, ci: str = "cluster", ties: str = "order", concept: np.ndarray | None = None,
    country: np.ndarray | None = None,
) -> dict[str, Any]:
    """``overall`` plus ``by_<name>`` per grouping; ``concept``/``country`` (default: those
    ``groups``) are the ``cluster`` units, without concepts every triplet is one."""
    winner, tie = winners(sims)
    credit = credits(sims, ties)
    z = zscores(sims)
    concept = groups.get("concept") if concept is None else concept
    country = groups.get("country") if country is None else country
    cluster = np.arange(len(winner)) if concept is None else clustered.codes(concept)[1]
    stratum = None if country is None else clustered.codes(country)[1]
    args = (credit, tie, z, cluster, stratum, ci, n_resamples)
    out: dict[str, Any] = {"overall": group_scores(None, *args, seed)[""]}
    for name, labels in groups.items():
        out[f"by_{name}"] = group_scores(labels, *args, seed, name)
    return out


def sp_value(s: dict[str, Any] | None) -> float | None:
    """SP of a scores entry for display and ordering: inf without a semantic win, None if undefined."""
    if not s:
        return None
    if s.get("SP") is None:
        return math.inf if s.get("wins_sem") == 0 and (s.get("wins_cul") or 0) > 0 else None
    return s["SP"]


def sp_interval(s: dict[str, Any] | None) -> list[float | None]:
    """SP_ci95 of a scores entry with an open upper limit as inf."""
    lo, hi = (s or {}).get("SP_ci95") or [None, None]
    return [lo, math.inf if lo is not None and hi is None else hi]
