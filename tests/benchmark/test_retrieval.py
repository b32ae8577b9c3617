"""Exact chunked top-k equals a full stable argsort; MaxSim and two-stage retrieval."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark import retrieval as rt
from benchmark import shortlist as sl
from benchmark.embeddings import MultiVector, check_finite, maxsim
from core.vectors import l2_normalize

BACKENDS = ["numpy", "faiss", "torch", "torch-tensors"]


def backend(name: str):
    """``torch-tensors``: a torch backend object on the CPU, passed as it is: the code path a
    GPU takes (no GPU in CI)."""
    return rt.get_backend("torch", "cpu") if name == "torch-tensors" else name


def full_topk(sims: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference: the first k of a stable sort of every full row (score desc, index asc)."""
    idx = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, idx, 1), idx


def int_data(seed: int, n_q: int, n_d: int, dim: int = 4, hi: int = 3):
    """Small-integer vectors: inner products are exact in float32, so ties are exact."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-hi, hi + 1, (n_q, dim)).astype(np.float32),
            rng.integers(-hi, hi + 1, (n_d, dim)).astype(np.float32))


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("chunk", [1, 7, 64, 333, 5000])
def test_chunked_equals_full_sort_with_ties(backend_name, chunk):
    q, d = int_data(0, 23, 1001)
    got = rt.exact_topk(q, d, 40, chunk_size=chunk, query_block=10, backend=backend(backend_name),
                        normalize=False, progress=False)
    s, i = full_topk(q @ d.T, 40)
    assert np.array_equal(got.indices, i)
    assert np.array_equal(got.scores, s.astype(np.float32))


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_cosine_random_matches_full_matrix(backend_name):
    rng = np.random.default_rng(1)
    q = rng.standard_normal((30, 16)).astype(np.float32)
    d = rng.standard_normal((2049, 16)).astype(np.float32)
    got = rt.exact_topk(q, d, 99, chunk_size=300, backend=backend(backend_name), progress=False)
    sims = l2_normalize(q) @ l2_normalize(d).T
    s, i = full_topk(sims, 99)
    assert np.array_equal(got.indices, i)
    np.testing.assert_allclose(got.scores, s, atol=1e-6)


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_massive_ties_and_adversarial_order(backend_name):
    # every score equal: the stable-sort fallback must return indices 0..k-1
    q = np.ones((3, 4), np.float32)
    d = np.ones((2000, 4), np.float32)
    got = rt.exact_topk(q, d, 10, chunk_size=700, backend=backend(backend_name), normalize=False,
                        progress=False)
    assert got.indices.tolist() == [list(range(10))] * 3
    # scores rising with the index: every chunk is "heavy" and raises its threshold
    d = np.arange(2000, dtype=np.float32)[:, None] * np.ones((1, 4), np.float32)
    got = rt.exact_topk(q, d, 10, chunk_size=700, backend=backend(backend_name), normalize=False,
                        progress=False)
    assert got.indices.tolist() == [list(range(1999, 1989, -1))] * 3


def test_backends_agree_and_function_scorer():
    q, d = int_data(2, 17, 777, hi=5)
    a = rt.exact_topk(q, d, 25, chunk_size=100, backend="numpy", normalize=False, progress=False)
    b = rt.exact_topk(q, d, 25, chunk_size=100, backend="torch", normalize=False, progress=False)
    c = rt.topk_by_function(lambda qs, qe, ds, de: q[qs:qe] @ d[ds:de].T, 17, 777, 25,
                            chunk_size=64, query_block=5, progress=False)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.indices, c.indices)


def test_pack_keys_roundtrip_and_order():
    s = np.array([0.5, -0.25, -np.inf, 0.0, -0.0, 3.0, 0.5], np.float32)
    i = np.array([0, 1, 2, 3, 4, 5, 6])
    keys = rt.pack_keys(s, i)
    back_s, back_i = rt.unpack_keys(keys)
    assert back_s.tolist() == [0.5, -0.25, -np.inf, 0.0, 0.0, 3.0, 0.5]
    assert back_i.tolist() == i.tolist()
    # descending keys = score desc, index asc; -0.0 ties with 0.0
    assert np.argsort(-keys.astype(object)).tolist() == [5, 0, 6, 3, 4, 1, 2]


def test_bad_input():
    q, d = int_data(3, 2, 5)
    with pytest.raises(ValueError, match="exceeds the pool size"):
        rt.exact_topk(q, d, 6, progress=False)
    d[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rt.exact_topk(q, d, 2, progress=False)
    with pytest.raises(ValueError, match="unknown retrieval backend"):
        rt.get_backend("jax")


def multi(seed: int, n: int, max_len: int, dim: int) -> MultiVector:
    rng = np.random.default_rng(seed)
    items = [rng.integers(-2, 3, (int(rng.integers(1, max_len + 1)), dim)).astype(np.float32)
             for _ in range(n)]
    return MultiVector.from_list(items)


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_exact_maxsim_equals_full(backend_name):
    q, d = multi(4, 9, 5, 6), multi(5, 301, 4, 6)
    got = rt.exact_topk(q, d, 30, chunk_size=64, backend=backend(backend_name), progress=False)
    two = sl.two_stage_topk(q, d, 30, shortlist=len(d), chunk_size=64,
                            backend=backend(backend_name), progress=False)
    assert np.array_equal(two.indices, got.indices)
    s, i = full_topk(maxsim(q, d), 30)
    assert np.array_equal(got.indices, i)
    assert np.array_equal(got.scores, s.astype(np.float32))


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_maxsim_empty_document_scores_zero(backend_name):
    q = MultiVector.from_list([np.ones((2, 3), np.float32)])
    d = MultiVector(np.stack([-np.ones((1, 3)), np.zeros((1, 3))]).astype(np.float32),
                    np.array([1, 0]))
    got = rt.exact_topk(q, d, 2, backend=backend(backend_name), progress=False)
    # doc 0: 2 query tokens x (-3) = -6; doc 1 has no tokens: 0, so it ranks first
    assert got.indices.tolist() == [[1, 0]] and got.scores.tolist() == [[0.0, -6.0]]


def test_two_stage_full_shortlist_is_exact_and_agreement():
    q, d = multi(6, 8, 5, 6), multi(7, 120, 4, 6)
    exact = rt.exact_maxsim_topk(q, d, 10, backend="numpy", progress=False)
    two = sl.two_stage_topk(q, d, 10, shortlist=120, backend="numpy", progress=False)
    assert np.array_equal(two.indices, exact.indices)
    short = sl.two_stage_topk(q, d, 10, shortlist=12, backend="numpy", progress=False)
    agree = sl.topk_agreement(short.indices, exact.indices, [1, 10])
    assert agree["n_queries"] == 8 and 0.0 <= agree["overlap@10"] <= 1.0
    with pytest.raises(ValueError, match="shortlist"):
        sl.two_stage_topk(q, d, 10, shortlist=5)


def test_topk_agreement_hand():
    exact = np.array([[1, 2, 3], [4, 5, 6]])
    approx = np.array([[1, 3, 2], [4, 5, 9]])
    a = sl.topk_agreement(approx, exact, [1, 3])
    # k=1: both rows agree; k=3: row 0 same set (3/3), row 1 2/3 -> overlap (1 + 2/3)/2
    assert a["overlap@1"] == 1.0 and a["same_list@1"] == 1.0
    assert a["overlap@3"] == pytest.approx(5 / 6)
    assert a["same_set@3"] == 0.5 and a["same_list@3"] == 0.0


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("chunk", [3, 64, 1000])
def test_threaded_cpu_kernel_equals_full_sort(threads, chunk):
    """Any chunk size and query block of the numpy path (``threads`` is faiss's and changes
    nothing here): the merged lists equal a stable full sort, ties included."""
    q, d = int_data(8, 37, 2500, hi=2)
    got = rt.exact_topk(q, d, 50, chunk_size=chunk, query_block=16, backend="numpy",
                        normalize=False, progress=False, threads=threads)
    s, i = full_topk(q @ d.T, 50)
    assert np.array_equal(got.indices, i)
    assert np.array_equal(got.scores, s.astype(np.float32))


def test_matches_faiss_flat_inner_product():
    """The reference implementation: faiss IndexFlatIP on unit vectors (same sets, scores
    within float32 rounding)."""
    faiss = pytest.importorskip("faiss", reason="faiss-cpu not installed: pip install -e '.[bench]'")
    rng = np.random.default_rng(9)
    q = rng.standard_normal((40, 48)).astype(np.float32)
    d = rng.standard_normal((3000, 48)).astype(np.float32)
    qn, dn = l2_normalize(q), l2_normalize(d)
    index = faiss.IndexFlatIP(48)
    index.add(dn)
    scores, idx = index.search(qn, 60)
    got = rt.exact_topk(q, d, 60, chunk_size=500, backend="numpy", progress=False, threads=3)
    assert all(set(a) == set(b) for a, b in zip(got.indices, idx, strict=True))
    np.testing.assert_allclose(got.scores, scores, atol=2e-6)


def test_cpu_default_is_faiss_and_ties_at_the_cut_are_by_index():
    """faiss keeps an arbitrary part of a tie at its cut; the faiss backend must still give
    the stable order (score desc, index asc). Here 500 pool rows tie with the 10th place."""
    assert rt.get_backend("auto", "cpu").name == "faiss"
    assert rt.get_backend("numpy").name == "numpy"
    q = np.array([[1.0, 0.0]], np.float32)
    d = np.concatenate([np.array([[3.0, 0.0]] * 9, np.float32),
                        np.array([[2.0, 0.0]] * 500, np.float32)])[::-1].copy()
    got = rt.exact_topk(q, d, 10, backend="faiss", normalize=False, progress=False)
    assert got.indices.tolist() == [list(range(500, 509)) + [0]]
    assert got.scores.tolist() == [[3.0] * 9 + [2.0]]


def test_faiss_pool_blocks_and_finite_check_is_exact():
    """Every chunk size gives the full sort on the faiss path; zero rows stay zero; squares
    that overflow are not mistaken for NaN/inf."""
    q, d = int_data(5, 9, 203)
    d[7] = 0
    for block in (1, 16, 50, 1000):
        got = rt.exact_topk(q, d, 20, chunk_size=block, backend="faiss", normalize=False,
                            progress=False)
        s, i = full_topk(q @ d.T, 20)
        assert np.array_equal(got.indices, i) and np.array_equal(got.scores, s)
    rng = np.random.default_rng(4)
    raw = rng.standard_normal((300, 8)).astype(np.float32) * 3
    qn = l2_normalize(rng.standard_normal((4, 8)).astype(np.float32))
    got = rt.exact_topk(qn, raw, 30, backend="faiss", progress=False)
    s, i = full_topk(qn @ l2_normalize(raw).T, 30)
    assert np.array_equal(got.indices, i)
    np.testing.assert_allclose(got.scores, s, atol=1e-6)
    big = np.full((3, 4), 3e30, np.float32)  # squares overflow, values finite: accepted
    check_finite(big, "pool")
    big[2, 1] = np.nan
    with pytest.raises(ValueError, match="1 pool vector.*first row 2"):
        check_finite(big, "pool")


def test_a_cpu_search_never_imports_torch():
    """The CPU path (auto, no device given) decides without torch: a fresh process that runs
    an exact search, MaxSim included, has not imported it."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, numpy as np; from benchmark import retrieval as rt; "
            "from benchmark.embeddings import MultiVector; "
            "x = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32); "
            "rt.exact_topk(x[:5], x, 3, progress=False); "
            "m = MultiVector.from_list([x[:2], x[2:5]]); rt.exact_topk(m, m, 1, progress=False); "
            "print('torch' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_faiss_pool_normalised_per_block_in_one_read():
    """A pool with unit and raw rows: the lists equal a full sort of the normalised pool; a
    NaN anywhere raises with the whole pool's count."""
    rng = np.random.default_rng(7)
    raw = rng.standard_normal((600, 8)).astype(np.float32) * 3
    pool = np.concatenate([l2_normalize(raw[:300]), raw[300:]])
    qn = l2_normalize(rng.standard_normal((6, 8)).astype(np.float32))
    for block in (50, 300, 1000):
        got = rt.exact_topk(qn, pool, 40, chunk_size=block, backend="faiss", progress=False)
        s, i = full_topk(qn @ l2_normalize(pool).T, 40)
        assert np.array_equal(got.indices, i)
        np.testing.assert_allclose(got.scores, s, atol=1e-6)
    pool[[450, 590], 3] = np.nan
    with pytest.raises(ValueError, match="2 pool vector.*first row 450"):
        rt.exact_topk(qn, pool, 40, backend="faiss", progress=False)


def test_faiss_unit_pool_is_searched_whole_in_place(monkeypatch):
    """A pool of unit rows (as the cache stores them) goes through one faiss.knn call over
    all of it, the caller's array itself; a raw pool through one call over its normalised
    copy; both equal the full sort of the normalised pool."""
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(11)
    raw = rng.standard_normal((900, 8)).astype(np.float32) * 2
    qn = l2_normalize(rng.standard_normal((5, 8)).astype(np.float32))
    s, i = full_topk(qn @ l2_normalize(raw).T, 30)
    calls: list[np.ndarray] = []
    real = faiss.knn
    monkeypatch.setattr(faiss, "knn", lambda x, y, *a, **kw: calls.append(y) or real(
        x, y, *a, **kw))
    unit = l2_normalize(raw)
    got = rt.exact_topk(qn, unit, 30, backend="faiss", progress=False)
    assert len(calls) == 1 and calls[0] is unit and np.array_equal(got.indices, i)
    calls.clear()
    got = rt.exact_topk(qn, raw, 30, backend="faiss", progress=False)
    assert [len(c) for c in calls] == [900] and calls[0] is not raw
    assert np.array_equal(got.indices, i)
    np.testing.assert_allclose(got.scores, s, atol=1e-6)


def test_faiss_ties_at_the_cut_of_a_raw_pool_are_by_index():
    """Raw rows that normalise to the same vector tie; the recomputed rows give the stable
    order."""
    q = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    d = np.concatenate([np.array([[2.0, 0.0]] * 300, np.float32),
                        np.array([[0.0, 5.0]] * 5, np.float32),
                        np.array([[3.0, 0.0]] * 200, np.float32)])
    got = rt.exact_topk(q, d, 10, backend="faiss", progress=False)
    assert got.indices.tolist() == [list(range(10)), list(range(300, 305)) + list(range(5))]
    np.testing.assert_allclose(got.scores[0], 1.0, atol=1e-6)
