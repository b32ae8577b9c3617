"""Association metrics against their definitions and a naive reference."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.metrics.association import (
    association_scores,
    sp_bootstrap,
    summarize,
    winners,
    zscores,
)


def naive_winner(row):
    """Argmax with ties broken semantic > cultural > non-relevant, by a plain loop."""
    best, arg = -np.inf, -1
    for j, v in enumerate(row):
        if v > best:
            best, arg = v, j
    return arg, sum(1 for v in row if v == best) > 1


def test_winners_and_tie_order():
    sims = np.array([[0.9, 0.1, 0.2], [0.1, 0.9, 0.2], [0.1, 0.2, 0.9],
                     [0.5, 0.5, 0.1], [0.1, 0.5, 0.5], [0.3, 0.3, 0.3], [0.2, 0.1, 0.2]])
    w, t = winners(sims)
    assert w.tolist() == [0, 1, 2, 0, 1, 0, 0]
    assert t.tolist() == [False, False, False, True, True, True, True]


def test_summary_exact_values():
    # 4 semantic wins, 2 cultural, 2 non-relevant; one tie ([0, 2, 2]: cultural by the order).
    sims = np.array([[3, 1, 2], [3, 2, 1], [2, 1, 0], [5, 4, 4],
                     [1, 3, 2], [0, 2, 2], [0, 1, 2], [1, 0, 4]], dtype=float)
    w, t = winners(sims)
    s = summarize(w, t, zscores(sims), n_resamples=200, seed=1)
    assert (s["n"], s["wins_sem"], s["wins_cul"], s["wins_non"], s["ties"]) == (8, 4, 2, 2, 1)
    assert s["M_sem"] == 0.5 and s["M_cul"] == 0.25 and s["M_non"] == 0.25
    assert s["SP"] == 0.5
    # z: one mean (46 / 24) and the population std over all 24 values.
    mu, sd = sims.mean(), sims.std(ddof=0)
    assert mu == pytest.approx(46 / 24)
    assert s["z_sem"] == pytest.approx(((sims[:, 0] - mu) / sd).mean())
    assert s["z_cul"] == pytest.approx(((sims[:, 1] - mu) / sd).mean())
    assert s["z_non"] == pytest.approx(((sims[:, 2] - mu) / sd).mean())


def test_sp_is_null_without_semantic_wins():
    sims = np.array([[0, 1, 0], [0, 0, 1]], dtype=float)
    w, t = winners(sims)
    s = summarize(w, t, zscores(sims))
    assert s["SP"] is None and s["M_sem"] == 0.0
    assert s["SP_ci95"] == [None, None]


def test_bootstrap_is_seeded_and_brackets_sp():
    wins = np.array([600, 300, 100])
    a = sp_bootstrap(wins, 1000, seed=3)
    b = sp_bootstrap(wins, 1000, seed=3)
    assert a == b
    lo, hi, dropped = a
    assert lo < 0.5 < hi and dropped == 0
    # Multinomial resampling is triplet resampling: compare with explicit index resampling.
    rng = np.random.default_rng(0)
    outcomes = np.repeat([0, 1, 2], wins)
    sps = []
    for _ in range(2000):
        c = np.bincount(rng.choice(outcomes, outcomes.size), minlength=3)
        sps.append(c[1] / c[0])
    ref_lo, ref_hi = np.percentile(sps, [2.5, 97.5])
    assert lo == pytest.approx(ref_lo, abs=0.03) and hi == pytest.approx(ref_hi, abs=0.03)


def test_groups_match_a_naive_loop_on_seeded_data():
    rng = np.random.default_rng(42)
    n = 3000
    sims = np.round(rng.normal(size=(n, 3)), 1)  # rounding plants ties
    groups = {"country": rng.choice(["AAA", "BBB", "CCC"], n)}
    out = association_scores(sims, groups, n_resamples=50, seed=0)
    mu, sd = sims.mean(), sims.std()
    for g in ["AAA", "BBB", "CCC"]:
        idx = np.nonzero(groups["country"] == g)[0]
        wins, ties = [0, 0, 0], 0
        for i in idx:
            a, t = naive_winner(sims[i])
            wins[a] += 1
            ties += t
        got = out["by_country"][g]
        assert [got["wins_sem"], got["wins_cul"], got["wins_non"]] == wins
        assert got["ties"] == ties and got["n"] == len(idx)
        assert got["SP"] == pytest.approx(wins[1] / wins[0])
        assert got["z_cul"] == pytest.approx(((sims[idx, 1] - mu) / sd).mean())
    total = out["overall"]
    assert total["wins_sem"] + total["wins_cul"] + total["wins_non"] == n
    assert sum(v["n"] for v in out["by_country"].values()) == n
