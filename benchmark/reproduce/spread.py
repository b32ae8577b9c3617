"""Bootstrap standard errors of our numbers, so a difference from the paper reads in units of
our own sampling noise: win rates and SP resample the group's triplets, Tables 1 and 5 the
query images of the per-query outcomes; every draw is seeded.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import numpy as np

from benchmark.metrics.association import WIN_KEYS, group_seed
from benchmark.report.compare import CompareError, load_outcomes
from benchmark.results import ResultFile

log = logging.getLogger(__name__)

RESAMPLES = 2000
SEED = 0


def group_se(group: dict | None, label: str = "") -> dict[str, float | None]:
    """Bootstrap standard errors of M_sem, M_cul, M_non and SP of one 3xcm group summary."""
    none: dict[str, float | None] = dict.fromkeys((*WIN_KEYS, "SP"))
    if not isinstance(group, dict):
        return none
    try:
        wins = tuple(int(group[k]) for k in ("wins_sem", "wins_cul", "wins_non"))
    except (KeyError, TypeError, ValueError):
        return none
    return dict(_group_se(wins, label))


@lru_cache(maxsize=4096)
def _group_se(wins: tuple[int, int, int], label: str) -> tuple[tuple[str, float | None], ...]:
    n = sum(wins)
    if n < 2:
        return tuple(dict.fromkeys((*WIN_KEYS, "SP")).items())
    rng = np.random.default_rng(group_seed(SEED, f"se:{label}:{wins}"))
    draws = rng.multinomial(n, np.array(wins) / n, size=RESAMPLES)
    out: dict[str, float | None] = {k: float((draws[:, j] / n).std(ddof=1))
                                    for j, k in enumerate(WIN_KEYS)}
    ok = draws[:, 0] > 0
    out["SP"] = float((draws[ok, 1] / draws[ok, 0]).std(ddof=1)) if ok.sum() > 1 else None
    return tuple(out.items())


_MEMO: dict[tuple[str, str, tuple[str, ...]], dict[str, float | None]] = {}


def query_mean_se(path: Path, res: ResultFile, columns: list[str]) -> dict[str, float | None]:
    """Bootstrap standard errors of the means of ``columns`` of the per-query outcomes."""
    rec = getattr(res, "outcomes", None)
    key = (str(path), str(rec.get("sha256")) if isinstance(rec, dict) else "", tuple(columns))
    if key in _MEMO:
        return dict(_MEMO[key])
    out: dict[str, float | None] = dict.fromkeys(columns)
    try:
        df = load_outcomes(path, res)
    except CompareError as e:
        log.info("no standard errors for %s: %s", path, e)
        df = None
    if df is not None and len(df) >= 2:
        rng = np.random.default_rng(group_seed(SEED, f"se:{path.name}:{len(df)}"))
        idx = rng.integers(0, len(df), size=(RESAMPLES, len(df)))
        for c in columns:
            if c in df.columns:
                out[c] = float(df[c].to_numpy(np.float64)[idx].mean(axis=1).std(ddof=1))
    _MEMO[key] = out
    return dict(out)
