"""``hash``: a deterministic fake model: vectors seeded by the sha256 of each input (chance level)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from benchmark.models.base import Adapter, model_spec
from core.vectors import l2_normalize


def hash_vector(data: bytes, dim: int, salt: str = "") -> np.ndarray:
    """The one hash-seeded fake vector (not normalised): a standard normal draw seeded by the
    sha256 of ``salt + data``. Used by this model and by the builder's fake text encoder."""
    seed = int.from_bytes(hashlib.sha256(salt.encode() + data).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def image_bytes(image: Any) -> bytes:
    """Canonical bytes of a PIL image (mode, size and pixels)."""
    img = image.convert("RGB")
    return f"{img.size}".encode() + img.tobytes()


class HashModel(Adapter):
    """Vectors seeded by the sha256 of each input; ``dim`` dimensions, unit norm."""

    def __init__(self, name: str = "hash", dim: int = 64, **kw: Any):
        super().__init__(model_spec(name, "hash", f"hash-{dim}", "1"), device="cpu",
                         dtype="float32")
        self.dim = dim
        self.calls = 0  # forward passes (tests count them)

    def _vec(self, data: bytes, salt: str) -> np.ndarray:
        return hash_vector(data, self.dim, salt)

    def _encode_text_batch(self, texts: list[str], role: str) -> np.ndarray:
        self.calls += 1
        return l2_normalize(np.stack([self._vec(t.encode("utf-8"), "text") for t in texts]))

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        self.calls += 1
        return l2_normalize(np.stack([self._vec(image_bytes(im), "image") for im in images]))
