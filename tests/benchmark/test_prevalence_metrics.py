"""Prevalence metrics: hand-computed cases and a naive full-matrix reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmark.metrics import prevalence as pm

# Two queries, K = 4. Query A: relevant at ranks 2 and 4, 3 relevant captions in the pool,
# groups (authors grouping: 0 = low, 1 = high_medium) [0, 1, 1, 1]. Query B: relevant at
# rank 1 only, 1 relevant caption, groups [1, 1, 1, 1].
REL = np.array([[False, True, False, True], [True, False, False, False]])
NREL = np.array([3, 1])
GROUPS = np.array([[0, 1, 1, 1], [1, 1, 1, 1]])
HALF = np.array([0.5, 0.5])
# rank weights w_i = 1/log2(i+1): 1, 0.6309297535714575, 0.5, 0.43067655807339306


def test_rank_weights():
    assert pm.rank_weights(4) == pytest.approx([1.0, 0.6309297535714575, 0.5, 0.43067655807339306])


def test_accuracy_hand():
    assert pm.accuracy_at_k(REL, 1).tolist() == [0.0, 1.0]
    assert pm.accuracy_at_k(REL, 2).tolist() == [1.0, 1.0]
    assert pm.accuracy_at_k(REL, 4).tolist() == [1.0, 1.0]


def test_ndcg_hand():
    # A@4: DCG = w2 + w4 = 0.63093 + 0.43068 = 1.0616063116448506;
    # true ideal (R=3): w1 + w2 + w3 = 2.1309297535714575 -> 0.49818925746641285;
    # authors' ideal (2 relevant in the whole retrieved list): w1 + w2 = 1.6309297535714575
    # -> 0.6509209298071326
    assert pm.ndcg_at_k(REL, NREL, 4)[0] == pytest.approx(0.49818925746641285, abs=1e-12)
    assert pm.ndcg_authors_at_k(REL, 4)[0] == pytest.approx(0.6509209298071326, abs=1e-12)
    # A@2: DCG = w2; true ideal min(2,3)=2 -> w2/(w1+w2) = 0.38685280723454163; the authors'
    # ideal reads the WHOLE list (2 relevant: ranks 2 and 4), cut at 2 -> w1 + w2, the same.
    # (Counting only the relevant among the first 2 would give w2/w1 = 0.63093: not theirs.)
    assert pm.ndcg_at_k(REL, NREL, 2)[0] == pytest.approx(0.38685280723454163, abs=1e-12)
    assert pm.ndcg_authors_at_k(REL, 2)[0] == pytest.approx(0.38685280723454163, abs=1e-12)
    # A@1: nothing relevant retrieved -> 0 in both
    assert pm.ndcg_at_k(REL, NREL, 1)[0] == 0.0
    assert pm.ndcg_authors_at_k(REL, 1)[0] == 0.0
    # B: its single relevant caption at rank 1 -> 1 at every k
    assert pm.ndcg_at_k(REL, NREL, 4)[1] == 1.0
    assert pm.ndcg_authors_at_k(REL, 4)[1] == 1.0


def test_ndcg_authors_ideal_is_the_whole_list_sorted_and_cut_at_k():
    """3_viz_imgtotext.ipynb cell 7: ideal = sorted(relevance of the whole top-100, desc)[:k]."""
    # one query, list of 5: relevant at ranks 3, 4, 5; the pool holds 6 relevant captions
    rel = np.array([[False, False, True, True, True]])
    w = pm.rank_weights(5)
    # k=3: DCG = w3 = 0.5; authors' ideal = w1 + w2 + w3 (three relevant in the list);
    # true ideal (6 in the pool) = w1 + w2 + w3 as well; first-k-only would give 0.5 / w1 = 0.5
    assert pm.ndcg_authors_at_k(rel, 3)[0] == pytest.approx(0.5 / w[:3].sum(), abs=1e-12)
    assert pm.ndcg_authors_at_k(rel, 3)[0] == pytest.approx(0.23463936301137822, abs=1e-12)
    # k=5: DCG = w3 + w4 + w5; authors: ideal w1 + w2 + w3 (3 relevant in the list);
    # true (R=6, cut at 5): w1..w5
    dcg = w[2:].sum()
    assert pm.ndcg_authors_at_k(rel, 5)[0] == pytest.approx(dcg / w[:3].sum(), abs=1e-12)
    assert pm.ndcg_at_k(rel, np.array([6]), 5)[0] == pytest.approx(dcg / w.sum(), abs=1e-12)
    # k=2: nothing relevant in the first 2 -> 0 (the ideal, 2 of 3, is not 0)
    assert pm.ndcg_authors_at_k(rel, 2)[0] == 0.0
    # the list beyond k matters: the same first 3 with no relevant item after them
    short = np.array([[False, False, True, False, False]])
    assert pm.ndcg_authors_at_k(short, 3)[0] == pytest.approx(0.5, abs=1e-12)
    # a list whose only relevant item is first scores 1 at every k
    first = np.array([[True, False, False, False, False]])
    assert [pm.ndcg_authors_at_k(first, k)[0] for k in (1, 3, 5)] == [1.0, 1.0, 1.0]


def test_ndcg_zero_relevant_in_pool():
    rel = np.zeros((1, 3), bool)
    assert pm.ndcg_at_k(rel, np.array([0]), 3).tolist() == [0.0]
    assert pm.ndcg_authors_at_k(rel, 3).tolist() == [0.0]


def test_lbkl_hand():
    # A@4: Q = (1/4, 3/4): 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) = 0.5 ln(4/3) = 0.14384103622589042
    # B@4: Q = (0, 1) -> Q_0 = 1e-9: 0.5 ln(0.5/1e-9) + 0.5 ln(0.5) = 9.668485737913262
    v = pm.lbkl_at_k(GROUPS, HALF, 2, 4)
    assert v[0] == pytest.approx(0.14384103622589042, abs=1e-12)
    assert v[1] == pytest.approx(9.668485737913262, abs=1e-9)
    # A@2: Q = (1/2, 1/2) = P -> 0
    assert pm.lbkl_at_k(GROUPS, HALF, 2, 2)[0] == pytest.approx(0.0, abs=1e-15)
    # A@1: Q = (1, 0) -> same as B@4 by symmetry
    assert pm.lbkl_at_k(GROUPS, HALF, 2, 1)[0] == pytest.approx(9.668485737913262, abs=1e-9)


def test_dlbkl_hand():
    # A@4: Q_0 = w1 / (w1+w2+w3+w4) = 1 / 2.5616063116448506 = 0.3903800499921017, Q_1 = 1 - Q_0
    # KL = 0.5 ln(0.5/0.39038) + 0.5 ln(0.5/0.60962) = 0.024629857418989154
    assert pm.dlbkl_at_k(GROUPS, HALF, 2, 4)[0] == pytest.approx(0.024629857418989154, abs=1e-12)
    # A@2: Q_0 = 1 / (1 + 0.63093) = 0.6131471927654584 -> 0.026283446705196653 (LBKL@2 is 0)
    assert pm.dlbkl_at_k(GROUPS, HALF, 2, 2)[0] == pytest.approx(0.026283446705196653, abs=1e-12)
    assert pm.dlbkl_at_k(GROUPS, HALF, 2, 4)[1] == pytest.approx(9.668485737913262, abs=1e-9)


def test_kl_per_query_target_and_zero_p():
    # target (0.5, 0.25, 0.25) vs Q = (0.5, 0.5, 0): 0 + 0.25 ln(0.5) + 0.25 ln(0.25/1e-9)
    # = 4.660956073816644; a P_g = 0 term is 0 (second row: P = (1, 0, 0), Q = (1, 0, 0) -> 0)
    p = np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]])
    q = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    v = pm.kl_divergence(p, q)
    assert v[0] == pytest.approx(4.660956073816644, abs=1e-9)
    assert v[1] == 0.0


def test_epsilon_is_a_parameter():
    # Q = (0, 1), P = (0.5, 0.5), epsilon 1e-3: 0.5 ln(500) + 0.5 ln(0.5) = 0.5 ln(250)
    v = pm.lbkl_at_k(np.array([[1, 1]]), HALF, 2, 2, epsilon=1e-3)
    assert v[0] == pytest.approx(0.5 * math.log(250), abs=1e-12)


def test_rank_counts_hand():
    c = pm.rank_counts(GROUPS, 2)
    # rank 1: A low, B high_medium; ranks 2-4: both high_medium
    assert c.tolist() == [[1, 1], [0, 2], [0, 2], [0, 2]]


def test_groupings():
    langs = [("en", "high"), ("ja", "medium"), ("ko", "low"), ("mi", "low")]
    a = pm.make_grouping("authors", langs)
    assert a.names == ("low", "high_medium") and a.fixed_target == (0.5, 0.5)
    assert a.group_of == {"en": 1, "ja": 1, "ko": 0, "mi": 0}
    t = pm.make_grouping("tier", langs)
    assert t.group_of == {"en": 0, "ja": 1, "ko": 2, "mi": 2} and t.fixed_target is None
    lg = pm.make_grouping("language", langs)
    assert lg.names == ("en", "ja", "ko", "mi")
    with pytest.raises(ValueError, match="unknown grouping"):
        pm.make_grouping("nope", langs)


def test_caption_share_targets_hand():
    # image 0: captions in groups [0, 0, 1, 2] -> (0.5, 0.25, 0.25); image 1: none -> zeros
    owner = np.array([0, 0, 0, 0])
    group = np.array([0, 0, 1, 2])
    t = pm.caption_share_targets(owner, group, 2, 3)
    assert t.tolist() == [[0.5, 0.25, 0.25], [0.0, 0.0, 0.0]]


def test_k_out_of_range():
    with pytest.raises(ValueError, match="outside"):
        pm.accuracy_at_k(REL, 5)


# -- naive full-matrix reference ------------------------------------------------------------------
def naive(sims, owner, group, target, k, n_groups, eps=1e-9, depth=20):
    """Loop-by-loop reference over the full score matrix (stable order: score desc, index asc);
    ``depth`` is the retrieved list the authors' NDCG ideal reads."""
    out = {"accuracy": [], "ndcg": [], "ndcg_authors": [], "lbkl": [], "dlbkl": [],
           "missing": [], "lbjs": [], "dlbjs": []}
    for q in range(sims.shape[0]):
        full_order = sorted(range(sims.shape[1]), key=lambda j: (-sims[q, j], j))[:depth]
        order = full_order[:k]
        rel = [1 if owner[j] == q else 0 for j in order]
        r_true = sum(1 for o in owner if o == q)
        dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rel))
        ideal = sum(1 / math.log2(i + 2) for i in range(min(k, r_true)))
        in_list = sum(1 for j in full_order if owner[j] == q)  # the whole retrieved list
        ideal_a = sum(1 / math.log2(i + 2) for i in range(min(k, in_list)))
        out["accuracy"].append(1.0 if any(rel) else 0.0)
        out["ndcg"].append(dcg / ideal if dcg > 0 else 0.0)
        out["ndcg_authors"].append(dcg / ideal_a if dcg > 0 else 0.0)
        p = target[q] if target.ndim == 2 else target
        for name, weighted in (("lbkl", False), ("dlbkl", True)):
            w = [1 / math.log2(i + 2) if weighted else 1.0 for i in range(k)]
            qs = [sum(w[i] for i, j in enumerate(order) if group[j] == g) / sum(w)
                  for g in range(n_groups)]
            out[name].append(sum(p[g] * math.log(p[g] / (qs[g] if qs[g] > 0 else eps))
                                 for g in range(n_groups) if p[g] > 0))
            m = [(p[g] + qs[g]) / 2 for g in range(n_groups)]
            js = sum(0.5 * a * math.log(a / m[g]) for g in range(n_groups)
                     for a in (p[g], qs[g]) if a > 0)
            out["dlbjs" if weighted else "lbjs"].append(js)
            if not weighted:
                out["missing"].append(float(any(p[g] > 0 and qs[g] == 0
                                                for g in range(n_groups))))
    return {m: float(np.mean(v)) for m, v in out.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_against_naive_full_matrix(seed):
    rng = np.random.default_rng(seed)
    n_q, n_d, G = 12, 90, 3
    owner = rng.integers(0, n_q + 2, n_d)  # some captions belong to non-query images
    group = rng.integers(0, G, n_d)
    sims = np.round(rng.standard_normal((n_q, n_d)), 1)  # rounded: many ties
    target = pm.caption_share_targets(owner, group, n_q + 2, G)[:n_q]
    K = 20
    order = np.argsort(-sims, axis=1, kind="stable")[:, :K]
    rel = owner[order] == np.arange(n_q)[:, None]
    nrel = np.bincount(owner, minlength=n_q + 2)[:n_q]
    for k in (1, 3, 7, 20):
        got = pm.mean_scores(pm.per_query_scores(rel, nrel, group[order], target, G, [k]))
        want = naive(sims, owner, group, target, k, G)
        for m in pm.METRICS:
            assert got[f"{m}@{k}"] == pytest.approx(want[m], rel=1e-12, abs=1e-12), (m, k)
        fixed = pm.mean_scores(pm.per_query_scores(rel, nrel, group[order],
                                                   np.array([0.2, 0.3, 0.5]), G, [k]))
        want_f = naive(sims, owner, group, np.array([0.2, 0.3, 0.5]), k, G)
        assert fixed[f"lbkl@{k}"] == pytest.approx(want_f["lbkl"], rel=1e-12)
        assert fixed[f"dlbkl@{k}"] == pytest.approx(want_f["dlbkl"], rel=1e-12)


def test_lbkl_is_mostly_epsilon_and_the_bounded_variants_are_not():
    """The example of docs/analysis.md: one low-resource caption in every top-10 list scores
    LBKL 0.511; two in 95% of the lists and none in 5% scores 0.695 and ranks as more biased,
    because each list without the group costs 0.5 ln(0.5 / 1e-9). The share of such lists and
    the Jensen-Shannon divergence say what happened; JS is bounded by ln 2."""
    target = np.array([0.5, 0.5])
    one = np.array([[0] + [1] * 9] * 20)
    two = np.array([[0, 0] + [1] * 8] * 19 + [[1] * 10])
    a, b = (pm.mean_scores(pm.per_query_scores(np.zeros(g.shape, bool), np.ones(20), g, target,
                                               2, [10])) for g in (one, two))
    assert a["lbkl@10"] == pytest.approx(0.5 * math.log(5) + 0.5 * math.log(5 / 9))
    assert (round(a["lbkl@10"], 3), round(b["lbkl@10"], 3)) == (0.511, 0.695)
    assert (a["missing@10"], b["missing@10"]) == (0.0, 0.05)
    assert b["lbjs@10"] < a["lbjs@10"] and b["dlbjs@10"] < a["dlbjs@10"]
    empty = pm.per_query_scores(np.zeros((1, 10), bool), np.ones(1), np.ones((1, 10), int),
                                target, 2, [10])
    assert empty["lbjs@10"][0] <= math.log(2) and empty["lbkl@10"][0] > 9
