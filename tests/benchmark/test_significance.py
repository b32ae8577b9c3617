"""Paired tests and Holm (benchmark.metrics.significance): exact values where the definition
gives them, the cluster-robust standard error against resampling concepts, no resampling floor
on p, and calibration by simulation: equal true rates reject at about the nominal 5%, a
planted difference is found."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmark.metrics import significance as sig


def paired_counts(winner_a: np.ndarray, winner_b: np.ndarray) -> dict:
    """The overall rows of :func:`sig.paired_association` of one set of items."""
    return sig.paired_association(winner_a, winner_b)["overall"]

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


def test_paired_counts_point_values():
    a = np.array([0, 0, 1, 2])
    b = np.array([0, 1, 1, 1])
    r = paired_counts(a, b)
    assert r["n"] == 4 and r["units"] == 4
    assert (r["SP"]["a"], r["SP"]["b"], r["SP"]["diff"]) == (0.5, 3.0, -2.5)
    assert (r["M_sem"]["a"], r["M_sem"]["b"], r["M_sem"]["diff"]) == (0.5, 0.25, 0.25)
    assert r["M_cul"]["diff"] == pytest.approx(0.25 - 0.75)
    assert r["M_non"]["diff"] == pytest.approx(0.25)
    lo, hi = r["SP"]["ci95"]
    assert lo <= -2.5 <= hi and 0 < r["SP"]["p"] <= 1
    # the paired mean difference: t on the per-item differences, df = n - 1
    d = np.array([1, 0, 0, 0]) - np.array([0, 0, 0, 0])  # M_sem credit differences
    t = stats.ttest_1samp(d, 0.0)
    assert r["M_sem"]["p"] == pytest.approx(t.pvalue)
    assert r["M_sem"]["ci95"] == pytest.approx(list(t.confidence_interval()))
    same = paired_counts(a, a)
    for k in sig.KEYS:
        assert same[k]["diff"] == 0 and same[k]["ci95"] == [0.0, 0.0] and same[k]["p"] == 1.0


def test_paired_counts_undefined_and_bad_input():
    r = paired_counts(np.array([1, 2]), np.array([0, 1]))  # A: no semantic win, SP ∞
    assert r["SP"]["a"] is None and r["SP"]["a_note"] == "∞ (no semantic win)"
    assert r["SP"]["diff"] is None and r["SP"]["ci95"] == [None, None]
    assert 0 < r["SP"]["p"] <= 1  # tested on cul / (sem + cul): 1 against 0.5
    r = paired_counts(np.array([2, 2]), np.array([0, 1]))  # A: neither, SP 0/0
    assert r["SP"]["a"] is None and "a_note" not in r["SP"] and r["SP"]["p"] is None
    assert paired_counts(np.array([], int), np.array([], int))["SP"]["diff"] is None
    with pytest.raises(ValueError):
        paired_counts(np.array([0, 3]), np.array([0, 1]))
    with pytest.raises(ValueError):
        paired_counts(np.array([0]), np.array([0, 1]))


def _pair(rng, concepts=60, per=20, model_sd=0.5):
    """Two models on triplets of ``concepts`` concepts: a shared concept effect and each its
    own, so the paired difference varies from concept to concept."""
    concept = np.repeat(np.arange(concepts), per)
    shared = rng.normal(0, 1, concepts)[concept]
    la = shared + rng.normal(0, model_sd, concepts)[concept]
    lb = shared + rng.normal(0, model_sd, concepts)[concept]
    u = rng.random(concept.size)

    def draw(lg):  # P(sem) from the logit, the rest split cul / non 2:1
        ps = 1 / (1 + np.exp(-lg))
        return np.where(u < ps, 0, np.where(u < ps + (1 - ps) * 2 / 3, 1, 2))

    return draw(la), draw(lb), concept


def test_cluster_standard_error_is_what_resampling_concepts_estimates():
    """The closed-form SE of each paired Δ equals the spread of Δ when the concepts are
    resampled (paired: both models on each resample), and is far wider than the triplet one."""
    rng = np.random.default_rng(4)
    a, b, concept = _pair(rng)
    r = sig.paired_association(a, b, concept=concept)["overall"]
    boot = {k: [] for k in sig.KEYS}
    members = [np.nonzero(concept == c)[0] for c in range(concept.max() + 1)]
    for _ in range(3000):
        idx = np.concatenate([members[c] for c in rng.integers(0, len(members), len(members))])
        wa, wb = a[idx], b[idx]
        boot["SP"].append((wa == 1).sum() / (wa == 0).sum() - (wb == 1).sum() / (wb == 0).sum())
        for j, k in enumerate(sig.WIN_KEYS):
            boot[k].append((wa == j).mean() - (wb == j).mean())
    iid = paired_counts(a, b)
    for k in sig.KEYS:
        se = (r[k]["ci95"][1] - r[k]["ci95"][0]) / 2 / stats.t.ppf(0.975, r["units"] - 1)
        assert se == pytest.approx(np.std(boot[k]), rel=0.1), k
        assert iid[k]["ci95"][1] - iid[k]["ci95"][0] < 0.8 * (r[k]["ci95"][1] - r[k]["ci95"][0])


def test_p_has_no_resampling_floor():
    """A clear difference gets the small p it has (a bootstrap with B resamples could not go
    below 2 / (B + 1), so Holm over 25 rows of B = 1000 could never reach 0.05)."""
    rng = np.random.default_rng(0)
    a = rng.choice(3, 4000, p=[0.3, 0.6, 0.1])
    b = rng.choice(3, 4000, p=[0.6, 0.3, 0.1])
    r = paired_counts(a, b)
    assert r["SP"]["p"] < 1e-12 and r["M_cul"]["p"] < 1e-12
    assert max(sig.holm([r[k]["p"] for k in ("SP", "M_sem", "M_cul")] * 20)) < 1e-9


def test_paired_association_groups():
    a = np.array([0, 1, 0, 0, 1, 2])
    b = np.array([0, 0, 0, 0, 1, 2])
    g = np.array(["THA", "THA", "THA", "DEU", "DEU", "DEU"])
    r = sig.paired_association(a, b, g)
    assert list(r["by_group"]) == ["THA", "DEU"]
    assert r["by_group"]["THA"]["n"] == 3 and r["by_group"]["THA"]["SP"]["a"] == 0.5
    assert r["by_group"]["DEU"]["SP"]["b"] == 1.0
    assert r["overall"]["n"] == 6


def test_paired_means_exact_and_paired():
    a = {"x@1": np.array([1.0, 0.0, 1.0, 1.0]), "y@1": np.array([0.2, 0.4, 0.6, 0.8])}
    b = {"x@1": np.array([0.0, 0.0, 1.0, 0.0]), "y@1": np.array([0.2, 0.4, 0.6, 0.8])}
    r = sig.paired_means(a, b)
    assert r["n"] == 4
    assert (r["x@1"]["a"], r["x@1"]["b"], r["x@1"]["diff"]) == (0.75, 0.25, 0.5)
    t = stats.ttest_rel(a["x@1"], b["x@1"])
    assert r["x@1"]["p"] == pytest.approx(t.pvalue)
    assert r["y@1"]["diff"] == 0 and r["y@1"]["p"] == 1.0 and r["y@1"]["ci95"] == [0, 0]
    # pairing: a constant shift on noisy items has a zero-width interval
    rng = np.random.default_rng(0)
    base = rng.normal(size=50)
    r = sig.paired_means({"m": base + 0.1}, {"m": base})
    assert r["m"]["ci95"] == pytest.approx([0.1, 0.1])
    assert r["m"]["p"] == 0.0


def _rejections(make_pair, key: str, sims: int = SIMS) -> int:
    rng = np.random.default_rng(2026)
    hits = 0
    for _ in range(sims):
        a, b = make_pair(rng)
        p = sig.paired_means(a, b)[key]["p"] if isinstance(a, dict) else paired_counts(
            a, b)[key]["p"]
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
