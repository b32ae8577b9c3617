"""Text embedders of concept dedup: ``--embedder bge-m3`` (FlagEmbedding, full precision: half
precision moves cosines near the threshold) and ``--embedder hash``, the deterministic fake."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from builder.stagekit import StageInputError
from core.vectors import l2_normalize

log = logging.getLogger(__name__)

BGE_M3 = "BAAI/bge-m3"


class TextEncoder(Protocol):
    """Encodes texts into L2-normalised float32 rows."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class BGEM3Encoder:
    """BGE-M3 dense vectors through FlagEmbedding (imported when first used)."""

    def __init__(self, path: str = BGE_M3, device: str | None = None, batch_size: int = 32,
                 max_length: int = 128):
        self.path, self.device, self.batch_size, self.max_length = (
            path, device, batch_size, max_length)
        self.name = f"bge-m3:{path}"
        self._model = None

    def _load(self):
        if self._model is None:
            from FlagEmbedding import BGEM3FlagModel

            from benchmark.models.hub import CheckpointNotFound, resolve_repo
            from core.devices import default_device

            try:  # local folder, $XCM_WEIGHTS_DIR, the hub cache, then the hub: one line
                folder = resolve_repo(self.path, None, what="--embedder bge-m3")
            except CheckpointNotFound as e:
                raise StageInputError(f"{e}; or dedup without it: --embedder hash") from None
            device = self.device or default_device()
            log.info("loading BGE-M3 from %s on %s", folder, device)
            self._model = BGEM3FlagModel(str(folder), use_fp16=False, devices=[device],
                                         return_dense=True, return_sparse=False,
                                         return_colbert_vecs=False)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = self._load().encode(list(texts), batch_size=self.batch_size,
                                  max_length=self.max_length, return_dense=True,
                                  return_sparse=False, return_colbert_vecs=False)
        return l2_normalize(np.asarray(out["dense_vecs"], dtype=np.float32))


class HashEncoder:
    """Deterministic fake: a sha256-seeded Gaussian vector per text, or a planted vector."""

    def __init__(self, dim: int = 64, planted: Mapping[str, Sequence[float]] | None = None):
        self.dim = dim
        self.planted = {k: np.asarray(v, dtype=np.float32) for k, v in (planted or {}).items()}
        for k, v in self.planted.items():
            if v.shape != (dim,):
                raise ValueError(f"planted vector for {k!r} has shape {v.shape}, want ({dim},)")
        self.name = f"hash:{dim}"

    def vector(self, text: str) -> np.ndarray:
        if text in self.planted:
            return self.planted[text]
        from benchmark.models.hash import hash_vector

        return hash_vector(text.encode("utf-8"), self.dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return l2_normalize(np.stack([self.vector(t) for t in texts]))


def make_encoder(spec: str, device: str | None = None, batch_size: int = 32) -> TextEncoder:
    """``bge-m3`` / ``bge-m3:PATH`` / ``hash`` / ``hash:DIM``."""
    kind, _, arg = spec.partition(":")
    if kind == "bge-m3":
        return BGEM3Encoder(arg or BGE_M3, device=device, batch_size=batch_size)
    if kind == "hash":
        try:
            return HashEncoder(int(arg) if arg else 64)
        except ValueError as exc:
            raise StageInputError(f"bad --embedder {spec!r}: hash:DIM needs an integer") from exc
    raise StageInputError(f"unknown --embedder {spec!r}: use bge-m3[:PATH] or hash[:DIM]")
