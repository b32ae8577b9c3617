"""Association-bias metrics of 3XCM: win rates, SP, bootstrap intervals, the authors' z-scores.

Definitions (README.md, "What 3XCM is"; implemented exactly):

- ``sims`` is an (N, 3) array: the similarity of each triplet's query to its semantic,
  cultural and non-relevant candidate, in that column order.
- Winner: the candidate with the highest similarity. Ties (two or more candidates share the
  maximum) are counted in ``ties`` and broken by the fixed order semantic > cultural >
  non-relevant, i.e. the first maximal column (``TIE_ORDER``).
- ``M_k = wins_k / N`` for k in sem, cul, non; ``SP = M_cul / M_sem`` (None when M_sem = 0).
- ``SP_ci95``: percentile interval of SP over ``B`` bootstrap resamples of the triplets
  (with replacement, seeded). Resampling N triplets and counting wins is the same as drawing
  the win counts from Multinomial(N, (M_sem, M_cul, M_non)), which is what is computed.
  Resamples with no semantic win have undefined SP and are left out (their number is kept).
- z-scores (the authors'): standardise all 3N similarities of a run with one mean and the
  population standard deviation; ``z_sem/z_cul/z_non`` are the means of the standardised
  values per column; a group's values average the same standardised values over its rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CANDIDATE_KEYS = ("sem", "cul", "non")
TIE_ORDER = ["semantic", "cultural", "non_relevant"]


def winners(sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(winner column per row with ties broken by TIE_ORDER, boolean tie mask)."""
    sims = np.asarray(sims)
    if sims.ndim != 2 or sims.shape[1] != 3:
        raise ValueError(f"sims must be (N, 3), got {sims.shape}")
    best = sims.max(axis=1, keepdims=True)
    at_max = sims == best
    return at_max.argmax(axis=1), at_max.sum(axis=1) > 1


def zscores(sims: np.ndarray) -> np.ndarray:
    """All 3N values standardised with one mean and the population std (ddof=0)."""
    sims = np.asarray(sims, dtype=np.float64)
    sd = sims.std()
    if sd == 0 or not np.isfinite(sd):
        return np.zeros_like(sims)
    return (sims - sims.mean()) / sd


def sp_bootstrap(
    wins: np.ndarray, n_resamples: int = 1000, seed: int = 0, level: float = 0.95,
) -> tuple[float | None, float | None, int]:
    """Percentile interval of SP (95% unless ``level`` says otherwise) from multinomial
    resampling of the win counts.

    Returns (lo, hi, number of resamples with no semantic win, which were left out).
    """
    n = int(wins.sum())
    if n == 0 or n_resamples <= 0:
        return None, None, 0
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, wins / n, size=n_resamples)
    sem, cul = draws[:, 0], draws[:, 1]
    ok = sem > 0
    if not ok.any():
        return None, None, int((~ok).sum())
    sp = cul[ok] / sem[ok]
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(sp, [tail, 100 - tail])
    return float(lo), float(hi), int((~ok).sum())


def summarize(
    winner: np.ndarray, ties: np.ndarray, z: np.ndarray, n_resamples: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """Scores of one set of triplets (overall or one group)."""
    n = int(winner.shape[0])
    wins = np.bincount(winner, minlength=3).astype(np.int64)
    m = wins / n if n else np.full(3, np.nan)
    sp = float(m[1] / m[0]) if n and wins[0] > 0 else None
    lo, hi, dropped = sp_bootstrap(wins, n_resamples, seed)
    zm = z.mean(axis=0) if n else np.full(3, np.nan)
    return {
        "n": n,
        "wins_sem": int(wins[0]),
        "wins_cul": int(wins[1]),
        "wins_non": int(wins[2]),
        "ties": int(ties.sum()),
        "M_sem": float(m[0]) if n else None,
        "M_cul": float(m[1]) if n else None,
        "M_non": float(m[2]) if n else None,
        "SP": sp,
        "SP_ci95": [lo, hi],
        "SP_ci95_undefined_resamples": dropped,
        "z_sem": float(zm[0]) if n else None,
        "z_cul": float(zm[1]) if n else None,
        "z_non": float(zm[2]) if n else None,
    }


def group_seed(seed: int, group: str) -> int:
    """A per-group bootstrap seed derived from the run seed and the group's name."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{seed}:{group}".encode()).digest()[:8], "little")


def association_scores(
    sims: np.ndarray, groups: dict[str, np.ndarray], n_resamples: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """``overall`` plus ``by_<name>`` for each grouping (name -> label per triplet)."""
    winner, ties = winners(sims)
    z = zscores(sims)
    out: dict[str, Any] = {"overall": summarize(winner, ties, z, n_resamples, seed)}
    for name, labels in groups.items():
        labels = np.asarray(labels).astype(str)
        uniq, inv = np.unique(labels, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
        by: dict[str, Any] = {}
        for g, label in enumerate(uniq):
            idx = order[bounds[g] : bounds[g + 1]]
            by[str(label)] = summarize(
                winner[idx], ties[idx], z[idx], n_resamples, group_seed(seed, f"{name}:{label}")
            )
        out[f"by_{name}"] = by
    return out
