"""Exact chunked top-k equals a full stable argsort; MaxSim and two-stage retrieval."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark import faiss_search as fs
from benchmark import retrieval as rt
from benchmark import shortlist as sl
from benchmark.embeddings import MultiVector, l2_normalize, maxsim

BACKENDS = ["numpy", "faiss", "torch", "torch-tensors"]


def backend(name: str):
    """``torch-tensors``: torch on the CPU but kept as tensors through the selection, the
    code path a GPU takes (no GPU in CI)."""
    if name != "torch-tensors":
        return name
    bk = rt.TorchBackend("cpu")
    bk.on_cpu = False
    return bk


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
    """The numpy path's worker threads take tiles out of order between them: the merged
    lists still equal a stable full sort, ties included."""
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
    """Pool blocks smaller than the pool (and than k+1 at the tail) merge to the full sort;
    zero rows stay zero; squares that overflow are not mistaken for NaN/inf."""
    q, d = int_data(5, 9, 203)
    d[7] = 0
    bk = rt.get_backend("faiss")
    for block in (1, 16, 50, 1000):
        got = fs.faiss_topk(bk, q, d, 20, normalize=False, pool_block=block)
        s, i = full_topk(q @ d.T, 20)
        assert np.array_equal(got.indices, i) and np.array_equal(got.scores, s)
    rng = np.random.default_rng(4)
    raw = rng.standard_normal((300, 8)).astype(np.float32) * 3
    qn = l2_normalize(rng.standard_normal((4, 8)).astype(np.float32))
    got = fs.faiss_topk(bk, qn, raw, 30, normalize=True, pool_block=64)
    s, i = full_topk(qn @ l2_normalize(raw).T, 30)
    assert np.array_equal(got.indices, i)
    np.testing.assert_allclose(got.scores, s, atol=1e-6)
    big = np.full((3, 4), 3e30, np.float32)  # squares overflow, values finite: accepted
    rt.check_finite(big, "pool")
    big[2, 1] = np.nan
    with pytest.raises(ValueError, match="1 pool vector.*first row 2"):
        rt.check_finite(big, "pool")


def test_faiss_sgemm_block_only_where_memory_stays_under_faiss():
    """faiss's larger sgemm block is used only where this search's extra memory (unit queries,
    normalising buffer, sgemm block) stays within IndexFlatIP's (pool copy + default block);
    the setting is restored after a search."""
    faiss = pytest.importorskip("faiss")
    q = np.empty((3600, 768), np.float32)  # shapes only: the pages are never touched
    default = faiss.cvar.distance_compute_blas_database_bs
    assert default == 1024
    # 16k pool, half of it buffered: 11 + 25 + 59 MB > 50 + 15 MB -> faiss's default
    assert fs._database_bs(faiss, q, np.empty((16384, 768), np.float32), 8192) == 1024
    # unit pool of 16k (no buffer): 11 + 59 <= 50 + 15? no -> default
    assert fs._database_bs(faiss, q, np.empty((16384, 768), np.float32), 0) == 1024
    # 65k pool, 16k buffered: 11 + 50 + 59 <= 201 + 15 -> the larger block
    assert fs._database_bs(faiss, q, np.empty((65536, 768), np.float32), 16384) == 4096
    bk = rt.get_backend("faiss")
    qs, d = int_data(5, 9, 203)
    fs.faiss_topk(bk, qs, d, 20, normalize=True, pool_block=16)
    assert faiss.cvar.distance_compute_blas_database_bs == default


def test_faiss_pool_normalised_per_block_in_one_read():
    """Unit blocks are searched in place, the others scaled; the lists equal a full sort of
    the normalised pool; a NaN in a later block raises with the whole pool's count."""
    rng = np.random.default_rng(7)
    raw = rng.standard_normal((600, 8)).astype(np.float32) * 3
    pool = np.concatenate([l2_normalize(raw[:300]), raw[300:]])
    qn = l2_normalize(rng.standard_normal((6, 8)).astype(np.float32))
    bk = rt.get_backend("faiss")
    for block in (50, 300, 1000):
        got = fs.faiss_topk(bk, qn, pool, 40, normalize=True, pool_block=block)
        s, i = full_topk(qn @ l2_normalize(pool).T, 40)
        assert np.array_equal(got.indices, i)
        np.testing.assert_allclose(got.scores, s, atol=1e-6)
    pool[[450, 590], 3] = np.nan
    with pytest.raises(ValueError, match="2 pool vector.*first row 450"):
        fs.faiss_topk(bk, qn, pool, 40, normalize=True, pool_block=50)


def test_faiss_unit_pool_is_searched_whole_in_place(monkeypatch):
    """A pool of unit rows (as the cache stores them) goes through one faiss.knn call over
    all of it, unscaled; a raw pool goes block by block through the buffer; both equal the
    full sort of the normalised pool."""
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(11)
    raw = rng.standard_normal((900, 8)).astype(np.float32) * 2
    qn = l2_normalize(rng.standard_normal((5, 8)).astype(np.float32))
    s, i = full_topk(qn @ l2_normalize(raw).T, 30)
    calls: list[int] = []
    real = faiss.knn
    monkeypatch.setattr(faiss, "knn", lambda x, y, *a, **kw: calls.append(len(y)) or real(
        x, y, *a, **kw))
    bk = rt.get_backend("faiss")
    monkeypatch.setattr(fs, "FAISS_POOL_BLOCK", 256)
    got = fs.faiss_topk(bk, qn, l2_normalize(raw), 30, normalize=True)
    assert calls == [900] and np.array_equal(got.indices, i)
    calls.clear()
    got = fs.faiss_topk(bk, qn, raw, 30, normalize=True)
    assert calls == [256, 256, 256, 132] and np.array_equal(got.indices, i)
    np.testing.assert_allclose(got.scores, s, atol=1e-6)


def test_faiss_ties_at_the_cut_of_a_raw_pool_are_by_index():
    """Raw rows that normalise to the same vector tie; the recomputed rows (tile by tile,
    normalised there) give the stable order, with no copy of the pool."""
    q = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    d = np.concatenate([np.array([[2.0, 0.0]] * 300, np.float32),
                        np.array([[0.0, 5.0]] * 5, np.float32),
                        np.array([[3.0, 0.0]] * 200, np.float32)])
    got = fs.faiss_topk(rt.get_backend("faiss"), q, d, 10, normalize=True)
    assert got.indices.tolist() == [list(range(10)), list(range(300, 305)) + list(range(5))]
    np.testing.assert_allclose(got.scores[0], 1.0, atol=1e-6)
