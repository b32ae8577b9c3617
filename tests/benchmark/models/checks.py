"""The checks every family's adapter must pass on its tiny checkpoint."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmark.cache import namespace
from benchmark.embeddings import MultiVector
from benchmark.models.base import Adapter
from tests.benchmark.models.tiny import TEXTS, images


def _rows(e: Any) -> list[np.ndarray]:
    return e.to_list() if isinstance(e, MultiVector) else list(e)


def check_adapter(adapter: Adapter, dim: int | None = None, multi: bool = False) -> dict[str, Any]:
    """Encode 3 texts and 3 images, score a triplet; shapes, norms, determinism, batching."""
    imgs = images(3)
    t = adapter.encode_texts(TEXTS, role="query")
    i = adapter.encode_images(imgs, role="document")
    assert isinstance(t, MultiVector) is multi and isinstance(i, MultiVector) is multi
    assert len(t) == 3 and len(i) == 3
    for row in _rows(t) + _rows(i):
        assert row.dtype == np.float32
        if dim is not None:
            assert row.shape[-1] == dim
        np.testing.assert_allclose(np.linalg.norm(row, axis=-1), 1.0, atol=1e-4)
        assert np.isfinite(row).all()
    # determinism: same inputs again, and one item per batch, give the same vectors
    t2 = adapter.encode_texts(TEXTS, role="query")
    i1 = adapter.encode_images(imgs, role="document", batch_size=1)
    for a, b in zip(_rows(t) + _rows(i), _rows(t2) + _rows(i1), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=2e-5)
    # distinct inputs give distinct vectors (multi-vector: their mean token; the first tokens
    # of a causal model's prompt are the same for every input)
    pooled = [r if r.ndim == 1 else r.mean(axis=0) for r in _rows(i)]
    assert not np.allclose(pooled[0], pooled[1], atol=1e-4)
    # a triplet: one query against (semantic, cultural, non-relevant)
    s = adapter.similarity(t if not multi else t.take([0]), i)
    s = s[:1]
    assert s.shape == (1, 3) and s.dtype == np.float32 and np.isfinite(s).all()
    pair = adapter.pair_similarity(
        t.take([0, 0, 0]) if multi else t[[0, 0, 0]], i
    )
    np.testing.assert_allclose(pair, s[0], rtol=1e-5, atol=1e-5)
    # conventions are JSON-able and distinguish the cache namespaces: modalities always, roles
    # exactly when the adapter's conventions differ between query and document
    for m in ("text", "image"):
        q, d = namespace(adapter, m, "query"), namespace(adapter, m, "document")
        same = adapter.conventions(m, "query") == adapter.conventions(m, "document")
        assert (q == d) == same
    assert namespace(adapter, "text", "query") != namespace(adapter, "image", "query")
    assert namespace(adapter, "text", "document") != namespace(adapter, "image", "document")
    return {"texts": t, "images": i, "scores": s}
