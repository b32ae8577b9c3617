"""Paired bootstrap and Holm (benchmark.metrics.significance): exact values where the
definition gives them, and calibration by simulation: equal true rates reject at about the
nominal 5%, a planted difference is found."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmark.metrics import significance as sig

SIMS = 200


def band(sims: int = SIMS, rate: float = sig.ALPHA) -> tuple[float, float]:
    """The 99.9% binomial band of the number of rejections of a calibrated test."""
    lo, hi = stats.binom.interval(0.999, sims, rate)
    return lo, hi


def test_holm_exact():
    assert sig.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert sig.holm([None, 0.5, 0.2]) == [None, pytest.approx(0.5), pytest.approx(0.4)]
    assert sig.holm([0.9, 0.8]) == [1.0, 1.0]  # capped
    assert sig.holm([]) == []


def test_p_value_and_interval_exact():
    assert sig.p_value(0.0, np.array([-1.0, 0.5, 2.0])) == 1.0
    # one of four resamples is on the far side of 0: 2 (1 + 1) / (1 + 4)
    assert sig.p_value(1.0, np.array([1.0, 1.0, 3.0, -1.0])) == pytest.approx(4 / 5)
    assert sig.p_value(-1.0, np.array([-1.0, -2.0, 3.0, 0.0])) == pytest.approx(1.0)
    assert sig.p_value(1.0, np.array([1.0, 1.0, 1.0, np.nan])) == pytest.approx(2 / 4)
    assert sig.p_value(0.5, np.full(999, 0.5)) == pytest.approx(2 / 1000)
    assert sig.interval(np.array([np.nan])) == [None, None]
    assert sig.interval(np.arange(101.0)) == [2.5, 97.5]


def test_paired_counts_point_values():
    a = np.array([0, 0, 1, 2])
    b = np.array([0, 1, 1, 1])
    r = sig.paired_counts(a, b, n_resamples=200, seed=1)
    assert r["n"] == 4
    assert (r["SP"]["a"], r["SP"]["b"], r["SP"]["diff"]) == (0.5, 3.0, -2.5)
    assert (r["M_sem"]["a"], r["M_sem"]["b"], r["M_sem"]["diff"]) == (0.5, 0.25, 0.25)
    assert r["M_cul"]["diff"] == pytest.approx(0.25 - 0.75)
    assert r["M_non"]["diff"] == pytest.approx(0.25)
    lo, hi = r["SP"]["ci95"]
    assert lo <= hi and 0 < r["SP"]["p"] <= 1
    same = sig.paired_counts(a, a, 100, 0)
    for k in ("SP", *sig.WIN_KEYS):
        assert same[k]["diff"] == 0 and same[k]["ci95"] == [0.0, 0.0] and same[k]["p"] == 1.0


def test_paired_counts_undefined_and_bad_input():
    r = sig.paired_counts(np.array([1, 2]), np.array([0, 1]), 50, 0)
    assert r["SP"]["a"] is None and r["SP"]["diff"] is None and r["SP"]["p"] is None
    assert r["SP_undefined_resamples"] == 50
    assert sig.paired_counts(np.array([], int), np.array([], int))["SP"]["diff"] is None
    with pytest.raises(ValueError):
        sig.paired_counts(np.array([0, 3]), np.array([0, 1]))
    with pytest.raises(ValueError):
        sig.paired_counts(np.array([0]), np.array([0, 1]))


def test_multinomial_resampling_matches_index_resampling():
    """Drawing the joint counts is the same as resampling triplet indices: the two bootstrap
    distributions of ΔSP agree in mean and spread."""
    rng = np.random.default_rng(3)
    a = rng.choice(3, 400, p=[0.5, 0.3, 0.2])
    b = np.where(rng.random(400) < 0.6, a, rng.choice(3, 400, p=[0.45, 0.35, 0.2]))
    fast = sig.paired_counts(a, b, 4000, 0)
    idx = rng.integers(0, 400, (4000, 400))
    wa, wb = a[idx], b[idx]
    d = ((wa == 1).sum(1) / (wa == 0).sum(1)) - ((wb == 1).sum(1) / (wb == 0).sum(1))
    lo, hi = np.percentile(d, [2.5, 97.5])
    assert fast["SP"]["ci95"][0] == pytest.approx(lo, abs=0.03)
    assert fast["SP"]["ci95"][1] == pytest.approx(hi, abs=0.03)


def test_paired_association_groups():
    a = np.array([0, 1, 0, 0, 1, 2])
    b = np.array([0, 0, 0, 0, 1, 2])
    g = np.array(["THA", "THA", "THA", "DEU", "DEU", "DEU"])
    r = sig.paired_association(a, b, g, 100, 0)
    assert list(r["by_group"]) == ["THA", "DEU"]
    assert r["by_group"]["THA"]["n"] == 3 and r["by_group"]["THA"]["SP"]["a"] == 0.5
    assert r["by_group"]["DEU"]["SP"]["b"] == 1.0
    assert r["overall"]["n"] == 6


def test_paired_means_exact_and_paired():
    a = {"x@1": np.array([1.0, 0.0, 1.0, 1.0]), "y@1": np.array([0.2, 0.4, 0.6, 0.8])}
    b = {"x@1": np.array([0.0, 0.0, 1.0, 0.0]), "y@1": np.array([0.2, 0.4, 0.6, 0.8])}
    r = sig.paired_means(a, b, 300, 0)
    assert r["n"] == 4
    assert (r["x@1"]["a"], r["x@1"]["b"], r["x@1"]["diff"]) == (0.75, 0.25, 0.5)
    assert r["y@1"]["diff"] == 0 and r["y@1"]["p"] == 1.0 and r["y@1"]["ci95"] == [0, 0]
    # pairing: a constant shift on noisy items has a zero-width interval
    rng = np.random.default_rng(0)
    base = rng.normal(size=50)
    r = sig.paired_means({"m": base + 0.1}, {"m": base}, 200, 0)
    assert r["m"]["ci95"] == pytest.approx([0.1, 0.1])
    assert r["m"]["p"] == pytest.approx(2 / 201)


def _rejections(make_pair, key: str, sims: int = SIMS) -> int:
    rng = np.random.default_rng(2026)
    hits = 0
    for s in range(sims):
        a, b = make_pair(rng)
        if isinstance(a, dict):
            p = sig.paired_means(a, b, 500, s)[key]["p"]
        else:
            p = sig.paired_counts(a, b, 500, s)[key]["p"]
        hits += p < sig.ALPHA
    return hits


def _equal_rates(rng):
    n, rates = 400, [0.45, 0.35, 0.2]
    a = rng.choice(3, n, p=rates)
    # correlated (the same triplets are hard for both) yet with equal true rates
    b = np.where(rng.random(n) < 0.5, a, rng.choice(3, n, p=rates))
    return a, b


@pytest.mark.parametrize("key", ["SP", "M_cul", "M_sem"])
def test_calibration_equal_rates_rejects_at_nominal_level(key):
    lo, hi = band()
    hits = _rejections(_equal_rates, key)
    assert lo <= hits <= hi, f"{hits} of {SIMS} rejections, band [{lo}, {hi}]"


def test_calibration_means_equal_rates():
    def pair(rng):
        n = 300
        item = rng.normal(size=n)  # item difficulty shared by both models
        return ({"lbkl@10": item + rng.normal(scale=0.5, size=n)},
                {"lbkl@10": item + rng.normal(scale=0.5, size=n)})

    lo, hi = band()
    hits = _rejections(pair, "lbkl@10")
    assert lo <= hits <= hi, f"{hits} of {SIMS} rejections, band [{lo}, {hi}]"


def test_planted_difference_is_found():
    def pair(rng):
        n = 1000
        a = rng.choice(3, n, p=[0.45, 0.40, 0.15])  # more cultural wins: SP 0.89 vs 0.60
        b = rng.choice(3, n, p=[0.50, 0.30, 0.20])
        return a, b

    assert _rejections(pair, "SP", 50) >= 45
    assert _rejections(pair, "M_cul", 50) >= 45

    def means(rng):
        item = rng.normal(size=300)
        return ({"ndcg@5": item + 0.15 + rng.normal(scale=0.5, size=300)},
                {"ndcg@5": item + rng.normal(scale=0.5, size=300)})

    assert _rejections(means, "ndcg@5", 50) >= 45
