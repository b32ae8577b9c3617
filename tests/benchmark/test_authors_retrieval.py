"""The authors' RQ1 retrieval for ColQwen (two-stage: exact L2 of mean-pooled token vectors,
top-100, MaxSim rerank) and the list depth their NDCG ideal reads, against naive references."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark import shortlist as sl
from benchmark.embeddings import MultiVector
from benchmark.models import conventions as conv
from benchmark.tasks.xm3600 import AUTHORS_DEPTH, list_depth
from tests.benchmark.test_xm3600_task import N_IMAGES, PlantedMulti, PlantedStrong, run_task, xm  # noqa: F401


def unit_tokens(rng, n, lo, hi, d=6):
    out = []
    for _ in range(n):
        x = rng.standard_normal((int(rng.integers(lo, hi)), d)).astype(np.float32)
        out.append(x / np.linalg.norm(x, axis=1, keepdims=True))
    return out


def naive_authors(qs, ds, shortlist, k):
    """colqwen25_score_v2.py l.76-196 loop by loop: faiss IndexFlatL2 on the mean-pooled
    vectors (exact: a full argsort of squared distances, ties by index), then one
    score_multi_vector per candidate, a stable sort by score, the first k."""
    dm = np.stack([d.mean(axis=0) for d in ds])
    out_i, out_s = [], []
    for q in qs:
        dist = ((dm - q.mean(axis=0)) ** 2).sum(axis=1)
        cand = sorted(range(len(ds)), key=lambda j: (dist[j], j))[:shortlist]
        scored = [(float((q @ ds[j].T).max(axis=1).sum()), j) for j in cand]
        scored.sort(key=lambda x: x[0], reverse=True)  # Python's sort is stable: L2 order on ties
        out_i.append([j for _, j in scored[:k]])
        out_s.append([s for s, _ in scored[:k]])
    return np.array(out_i), np.array(out_s, np.float32)


@pytest.mark.parametrize("seed", [0, 1])
def test_two_stage_l2_equals_the_authors_loop(seed):
    rng = np.random.default_rng(seed)
    qs, ds = unit_tokens(rng, 9, 2, 6), unit_tokens(rng, 60, 1, 8)
    ds += [ds[3].copy(), ds[10].copy()]  # duplicates: equal MaxSim, equal L2 -> tie order
    q, d = MultiVector.from_list(qs), MultiVector.from_list(ds)
    for shortlist, k in ((20, 10), (62, 62), (30, 30)):
        got = sl.two_stage_topk(q, d, k, shortlist, chunk_size=7, backend="numpy",
                                       progress=False, shortlist_metric="l2", ties="shortlist")
        want_i, want_s = naive_authors(qs, ds, shortlist, k)
        np.testing.assert_allclose(got.scores, want_s, rtol=1e-5, atol=1e-5)
        assert got.indices.tolist() == want_i.tolist()


def test_l2_shortlist_is_not_cosine():
    """Unnormalised mean-pooled vectors: L2 prefers a near short mean, cosine a far aligned one."""
    q = MultiVector.from_list([np.array([[1.0, 0.0]], np.float32)])
    near = np.array([[0.9, 0.1]], np.float32)  # mean (0.9, 0.1): L2 0.14, cosine 0.994
    far = np.array([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]], np.float32)  # mean (1/3, 0): cos 1
    d = MultiVector.from_list([far, near])
    l2 = sl.two_stage_topk(q, d, 1, 1, backend="numpy", progress=False,
                                  shortlist_metric="l2")
    cos = sl.two_stage_topk(q, d, 1, 1, backend="numpy", progress=False)
    assert l2.indices.tolist() == [[1]] and cos.indices.tolist() == [[0]]
    qa, da = sl.l2_shortlist_vectors(np.array([[1.0, 0.0]]), np.array([[0.9, 0.1]]))
    assert float((qa @ da.T)[0, 0]) == pytest.approx(1.0 - 0.02)  # |q|^2 - |q - d|^2


def test_list_depth():
    assert AUTHORS_DEPTH == 100
    assert list_depth([1, 5, 10], 5000) == 100  # the authors' ideal reads the top 100
    assert list_depth([1, 99], 5000) == 100 and list_depth([1, 150], 5000) == 150
    assert list_depth([1, 10], 40) == 40  # a pool smaller than 100: all of it


def test_xm3600_authors_profile_runs_the_two_stage_search(xm, tmp_path):  # noqa: F811
    auth = PlantedMulti()
    auth.profile = conv.resolve("colqwen2.5-v0.2", "authors")
    assert auth.profile.retrieval == conv.TWO_STAGE_L2
    _, two = run_task(auth, xm, tmp_path, k="1,10,50")
    st = two.settings["retrieval"]
    assert st["method"] == "two-stage" and st["shortlist"] == 100
    assert "L2" in st["shortlist_similarity"] and st["rerank_ties"] == "shortlist order"
    assert two.task["list_depth"] == 100
    agree = two.scores["two_stage_agreement"]
    assert agree["n_queries"] == 8 and agree["method"].startswith("exact L2")
    _, exact = run_task(PlantedMulti(), xm, tmp_path, k="1,10,50")
    assert exact.settings["retrieval"]["method"] == "exact" and exact.task["list_depth"] == 100
    # on the planted data the shortlist holds every relevant caption: the same scores
    assert two.scores["overall"] == pytest.approx(exact.scores["overall"])


def test_xm3600_ndcg_authors_reads_the_whole_top_100(xm, tmp_path):  # noqa: F811
    """ndcg_authors@k from the task = 3_viz_imgtotext.ipynb cell 7 computed by hand on the
    saved top-100: DCG of the first k, ideal = the whole list's relevance sorted, cut at k."""
    import math

    import pandas as pd

    _, out = run_task(PlantedStrong(), xm, tmp_path, k="1,5,10,100", save_topk=True)
    o = out.scores["overall"]
    assert out.task["list_depth"] == AUTHORS_DEPTH
    df = pd.read_parquet(tmp_path / "out" / "planted-1.0" / "xm3600-i2t.topk.parquet")
    lists = [g.sort_values("rank")["relevant"].astype(int).tolist()
             for _, g in df.groupby("query_image_id")]
    assert len(lists) == N_IMAGES and {len(x) for x in lists} == {100}
    for k in (1, 5, 10, 100):
        vals = []
        for rel in lists:
            dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rel[:k]))
            ideal = sum(r / math.log2(i + 2) for i, r in enumerate(sorted(rel, reverse=True)[:k]))
            vals.append(dcg / ideal if ideal > 0 else 0.0)
        assert o[f"ndcg_authors@{k}"] == pytest.approx(float(np.mean(vals)), abs=1e-12), k
    assert o["ndcg_authors@1"] == pytest.approx(o["accuracy@1"])
