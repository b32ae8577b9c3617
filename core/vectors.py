"""Vector helpers of every package (the evaluator's kernels, the builder's dedup embedders)."""

from __future__ import annotations

import numpy as np


def l2_normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unit-norm rows in float32 (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=axis, keepdims=True)
    return x / np.maximum(n, np.float32(1e-12))
