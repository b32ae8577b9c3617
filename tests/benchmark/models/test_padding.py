"""A padded batch gives each item the embedding it gets alone, up to float rounding, in every
family (tiny checkpoints, CPU): the study of ``tests/benchmark/models/padding.py``.

Measured (CPU, float32 / bfloat16 / float16, `tests/perf/bench_padding.py`): no family's batch
moves an embedding by more than the dtype's own rounding, so the authors profiles keep the
adapters' batching; a family whose padding leaked into its vectors (positions, attention mask
or pooling over pad tokens) fails here.
"""

from __future__ import annotations

import pytest

from tests.benchmark.models.padding import FP32_TOL, Row, builders, study

pytest.importorskip("transformers")
FAMILIES = ("openclip", "hf_clip", "chinese_clip", "mclip", "gme", "colqwen", "jina")


@pytest.fixture(scope="module")
def make(tmp_path_factory):
    return builders(tmp_path_factory.mktemp("padding"))


@pytest.mark.parametrize("family", FAMILIES)
def test_padded_batch_changes_no_embedding_beyond_rounding(make, family):
    if family == "mclip":
        pytest.importorskip("multilingual_clip")
    rows = study(family, make[family], ("float32", "bfloat16"))
    assert [(r.dtype, r.modality) for r in rows] == [
        ("float32", "text"), ("float32", "image"), ("bfloat16", "text"), ("bfloat16", "image")]
    for r in rows:
        assert not r.changes, r
    fp32 = [r for r in rows if r.dtype == "float32"]
    assert all(r.batch_diff <= FP32_TOL and r.rounding == 0.0 for r in fp32)
    bf16 = [r for r in rows if r.dtype == "bfloat16"]
    assert all(r.rounding > FP32_TOL for r in bf16)  # bfloat16 really rounds


def test_the_verdict_is_against_the_dtypes_rounding():
    assert Row("x", "bfloat16", "text", 3e-3, 5e-3).changes is False
    assert Row("x", "bfloat16", "text", 6e-3, 5e-3).changes is True
    assert Row("x", "float32", "text", 2e-5, 0.0).changes is True


class _LeakyPooling:
    """An adapter that mean-pools over padding (the bug the study exists to catch)."""

    def __init__(self, dtype: str) -> None:
        from benchmark.models.base import Adapter, ModelSpec

        class Leaky(Adapter):
            def _encode_text_batch(self, texts, role):
                import numpy as np

                n = max(len(t) for t in texts)
                codes = np.array([[ord(c) % 7 for c in t.ljust(n)] for t in texts], float)
                return np.stack([codes.mean(1), codes.std(1) + 1.0], 1)

            def _encode_image_batch(self, images, role):
                import numpy as np

                return np.ones((len(images), 2))

        self.adapter = Leaky(ModelSpec(name="leaky", family="t", checkpoint="t"), "cpu", dtype)

    def __call__(self):
        return self.adapter


def test_the_study_catches_a_padding_leak():
    rows = study("leaky", lambda dt: _LeakyPooling(dt)(), ("float32",))
    text = next(r for r in rows if r.modality == "text")
    assert text.changes and text.batch_diff > 0.1
