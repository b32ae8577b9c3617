"""Association metrics against their definitions and a naive reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmark.metrics.association import (
    association_scores,
    bootstrap_intervals,
    credits,
    group_seed,
    sp_interval,
    sp_value,
    winners,
    zscores,
)
from tests.benchmark.fake_results import summarize


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
    a = bootstrap_intervals(wins, 1000, seed=3)
    b = bootstrap_intervals(wins, 1000, seed=3)
    assert a == b
    (lo, hi), dropped = a["SP_ci95"], a["SP_ci95_undefined_resamples"]
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


def _world(seed=0, n_concepts=30, per=40):
    rng = np.random.default_rng(seed)
    concept = np.repeat(np.arange(n_concepts), per).astype(str)
    country = np.tile(np.repeat(["AAA", "BBB", "CCC", "DDD"], per // 4), n_concepts)
    effect = rng.normal(0, 0.8, (n_concepts, 3))[np.repeat(np.arange(n_concepts), per)]
    sims = rng.normal(size=(len(concept), 3)) + effect
    return sims, {"country": country, "concept": concept}


def test_default_intervals_are_over_concepts_and_state_it():
    """Default: every rate of every group carries a 95% interval over concepts (wider than
    the triplet one when concepts differ), ``units`` and detectable differences; a group of
    one concept has its triplets as units."""
    from benchmark.metrics.association import CI_TEXT, ESTIMAND

    sims, groups = _world()
    s = association_scores(sims, groups)
    iid = association_scores(sims, groups, ci="iid")
    o = s["overall"]
    assert o["units"] == 30 and s["by_country"]["AAA"]["units"] == 30
    assert s["by_concept"]["3"]["units"] == 40  # one concept: its triplets
    for k in ("M_sem", "M_cul", "M_non", "SP"):
        lo, hi = o[f"{k}_ci95"]
        ilo, ihi = iid["overall"][f"{k}_ci95"]
        assert lo < o[k] < hi and (hi - lo) > 1.5 * (ihi - ilo), k
        assert o["mde"][k] > 0
    assert "concepts" in CI_TEXT["cluster"] and "other concepts" in ESTIMAND["cluster"]


def test_iid_keeps_the_earlier_interval():
    """--ci iid: SP_ci95 is exactly the earlier triplet bootstrap (same seeds), and the win
    rates get percentile intervals from the same resamples."""
    sims, groups = _world(1)
    s = association_scores(sims, groups, n_resamples=300, seed=5, ci="iid")
    for name, key, seed in (("overall", None, 5), ("by_country", "BBB",
                                                      group_seed(5, "country:BBB"))):
        e = s[name] if key is None else s[name][key]
        wins = np.array([e["wins_sem"], e["wins_cul"], e["wins_non"]])
        # the earlier code, as it was: percentiles of SP over multinomial draws of the wins
        draws = np.random.default_rng(seed).multinomial(wins.sum(), wins / wins.sum(), 300)
        ok = draws[:, 0] > 0
        lo, hi = np.percentile(draws[ok, 1] / draws[ok, 0], [2.5, 97.5])
        assert e["SP_ci95"] == [lo, hi] and e["SP_ci95_undefined_resamples"] == (~ok).sum()
        assert e["M_cul_ci95"][0] < e["M_cul"] < e["M_cul_ci95"][1]


def test_no_semantic_win_is_infinite_never_zero():
    sims = np.array([[0, 1, 0]] * 6 + [[0, 0, 1]] * 2, dtype=float)
    s = association_scores(sims, {"concept": np.array(list("aabbccdd"))})["overall"]
    assert s["SP"] is None and s["SP_note"] == "∞ (no semantic win)"
    lo, hi = s["SP_ci95"]
    assert lo > 0 and hi is None  # the upper limit is open: ∞
    assert sp_value(s) == math.inf and sp_interval(s) == [lo, math.inf]
    none = association_scores(np.array([[0, 0, 1.0]] * 3), {})["overall"]
    assert sp_value(none) is None and none["SP_note"].startswith("undefined")


def test_small_group_interval_is_exact_conditional_on_sem_plus_cul():
    """Each triplet its own unit: the SP interval is Clopper-Pearson on cul / (sem + cul) given
    sem + cul = 12, mapped to SP, at the effective size 12 (G - 1) / G of the cluster
    variance's small-sample factor (G = 16 units); no semantic win: upper limit open."""
    from scipy import stats

    sims = np.array([[1, 0, 0]] * 3 + [[0, 1, 0]] * 9 + [[0, 0, 1]] * 4, dtype=float)
    s = association_scores(sims, {})["overall"]
    n = 12 * 15 / 16
    x = 0.75 * n
    lo, hi = stats.beta.ppf(0.025, x, n - x + 1), stats.beta.ppf(0.975, x + 1, n - x)
    assert s["SP_ci95"] == pytest.approx([lo / (1 - lo), hi / (1 - hi)], rel=1e-9)
    no_sem = association_scores(sims[3:], {})["overall"]
    lo = stats.beta.ppf(0.025, 9, 1)  # x = n = 9: one-sided, the upper limit 1 (SP ∞)
    assert no_sem["SP_ci95"][1] is None and no_sem["SP_ci95"][0] == pytest.approx(
        lo / (1 - lo), rel=1e-9)


def test_ties_split_gives_fractional_credit():
    sims = np.array([[1, 1, 0], [2, 2, 2], [0, 3, 3], [5, 0, 0]], dtype=float)
    order = association_scores(sims, {})["overall"]
    split = association_scores(sims, {}, ties="split")["overall"]
    assert (order["wins_sem"], order["wins_cul"], order["wins_non"]) == (3, 1, 0)
    assert (split["wins_sem"], split["wins_cul"], split["wins_non"]) == pytest.approx(
        (0.5 + 1 / 3 + 1, 0.5 + 1 / 3 + 0.5, 1 / 3 + 0.5))
    assert split["SP"] == pytest.approx(split["wins_cul"] / split["wins_sem"])
    assert split["ties"] == order["ties"] == 3
    assert credits(sims, "split").sum(axis=1) == pytest.approx(np.ones(4))
