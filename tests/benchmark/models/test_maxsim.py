"""MaxSim (numpy and torch paths, blocked) against a naive loop on random multi-vectors."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark import embeddings as M
from benchmark.embeddings import MultiVector, as_multi
from benchmark.models.base import Adapter, ModelSpec


def naive(q: MultiVector, d: MultiVector) -> np.ndarray:
    out = np.zeros((len(q), len(d)), np.float64)
    for i, qi in enumerate(q.to_list()):
        for j, dj in enumerate(d.to_list()):
            if len(dj) == 0:
                continue
            out[i, j] = sum(max(float(np.dot(t, u)) for u in dj) for t in qi)
    return out


def random_mv(rng, n, max_len, dim, allow_empty=False):
    lo = 0 if allow_empty else 1
    return MultiVector.from_list([
        rng.standard_normal((int(rng.integers(lo, max_len + 1)), dim)).astype(np.float32) for _ in range(n)
    ])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("batch", [1, 3, 64])
def test_maxsim_equals_naive_loop(backend, batch, monkeypatch):
    rng = np.random.default_rng(batch)
    q = random_mv(rng, 7, 6, 8)
    d = random_mv(rng, 11, 9, 8, allow_empty=True)
    d.lengths[4] = 0  # a document without tokens scores 0
    monkeypatch.setattr(M, "BLOCK_ELEMENTS", 200)  # force many document blocks
    got = M.maxsim(q, d, batch=batch, backend=backend)
    assert got.dtype == np.float32 and got.shape == (7, 11)
    np.testing.assert_allclose(got, naive(q, d), rtol=1e-5, atol=1e-4)
    assert (got[:, 4] == 0).all()


def test_padding_is_masked_not_scored():
    """Zero padding would win against all-negative similarities; masking must ignore it."""
    q = MultiVector.from_list([np.array([[1.0, 0.0]], np.float32)])
    d = MultiVector.from_list([np.array([[-1.0, 0.0]], np.float32), np.array([[-1.0, 0.0], [-0.5, 0.0]], np.float32)])
    for backend in ("numpy", "torch"):
        np.testing.assert_allclose(M.maxsim(q, d, backend=backend), [[-1.0, -0.5]])


def test_single_vectors_reduce_to_dot_products():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(M.maxsim(as_multi(a), as_multi(b)), a @ b.T, rtol=1e-5, atol=1e-5)


def test_adapter_similarity_uses_maxsim_for_multivectors():
    rng = np.random.default_rng(1)
    q, d = random_mv(rng, 3, 4, 6), random_mv(rng, 5, 7, 6)
    a = Adapter(ModelSpec(name="x", family="x", checkpoint="x", multi_vector=True), device="cpu", dtype="float32")
    np.testing.assert_allclose(a.similarity(q, d), naive(q, d), rtol=1e-5, atol=1e-4)
    pair = a.pair_similarity(q.take([0, 1, 2]), d.take([0, 1, 2]))
    np.testing.assert_allclose(pair, np.diagonal(naive(q, d)[:, :3]), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_maxsim_pairs_equals_the_diagonal(backend, monkeypatch):
    rng = np.random.default_rng(5)
    q = random_mv(rng, 9, 5, 8)
    d = random_mv(rng, 9, 7, 8, allow_empty=True)
    d.lengths[2] = 0
    monkeypatch.setattr(M, "BLOCK_ELEMENTS", 100)
    got = M.maxsim_pairs(q, d, batch=4, backend=backend)
    np.testing.assert_allclose(got, np.diagonal(naive(q, d)), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError):
        M.maxsim_pairs(q, d.take([0, 1]))
