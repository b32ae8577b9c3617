"""The builder's text embedders share the evaluator's vector helpers."""

from __future__ import annotations


def test_the_builder_normalises_with_the_evaluators_l2_normalize():
    """One l2_normalize (zero rows stay zero) for the builder's and the evaluator's vectors."""
    import numpy as np

    from benchmark import embeddings
    from builder import text_embedders

    x = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    assert text_embedders.l2_normalize is embeddings.l2_normalize
    np.testing.assert_array_equal(text_embedders.l2_normalize(x),
                                  np.array([[0.6, 0.8], [0.0, 0.0]], np.float32))
