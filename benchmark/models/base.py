"""The adapter contract, the model identity, and the shared batching base.

Subclasses implement ``_encode_text_batch`` / ``_encode_image_batch`` (``role`` query or
document); the base batches and scores (cosine, or MaxSim for :class:`MultiVector` s).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from benchmark.embeddings import (
    Embeddings,
    MultiVector,
    as_multi,
    concat,
    cosine_pairs,
    cosine_similarity,
    maxsim,
    maxsim_pairs,
    take,
)
from core.devices import default_device
from core.vectors import l2_normalize

log = logging.getLogger(__name__)

ROLES = ("query", "document")


class ModelSpec(BaseModel):
    """What identifies a model's embeddings: a results file's ``model`` and part of the cache key."""

    model_config = ConfigDict(extra="allow", frozen=True, protected_namespaces=())
    name: str
    family: str
    checkpoint: str
    revision: str | None = None
    adapter_version: str = "1"
    multi_vector: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def similarity(self) -> str:
        """``maxsim`` for a multi-vector model, else ``cosine`` (its record's)."""
        return "maxsim" if self.multi_vector else "cosine"


def model_spec(name: str, family: str, checkpoint: str, revision: str | None = None, *,
               multi_vector: bool = False, adapter_version: str = "1", **extra: Any) -> ModelSpec:
    """The one builder of a :class:`ModelSpec`: every adapter's identity (``extra``: what
    else identifies its weights)."""
    return ModelSpec(name=name, family=family, checkpoint=checkpoint, revision=revision,
                     adapter_version=adapter_version, multi_vector=multi_vector, extra=extra)


class Adapter:
    """Base of every model adapter: batching, inference mode, progress, float32 output."""

    spec: ModelSpec
    text_batch_size: int = 64
    image_batch_size: int = 32
    # the resolved conventions record (benchmark.models.conventions.Conventions) the registry
    # built this adapter from; None for models without profiles (their own defaults)
    profile: Any = None

    def __init__(self, spec: ModelSpec, device: str | None = None, dtype: str | None = None):
        self.spec = spec
        self.device = device or default_device()
        self.dtype = dtype or default_dtype(self.device)

    # -- to implement ---------------------------------------------------------------------
    def _encode_text_batch(self, texts: list[str], role: str) -> Embeddings:
        raise NotImplementedError  # abstract: every text-capable adapter overrides it

    def _encode_image_batch(self, images: list[Any], role: str) -> Embeddings:
        raise NotImplementedError  # abstract: every image-capable adapter overrides it

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        """Prompt/instruction/preprocessing that shape an embedding (cache key, results)."""
        return {}

    # -- contract -------------------------------------------------------------------------
    def encode_texts(self, texts: Sequence[str], role: str = "query",
                     batch_size: int | None = None, progress: bool = True) -> Embeddings:
        return self._encode_all("text", texts, role, batch_size, progress)

    def encode_images(self, images: Sequence[Any], role: str = "document",
                      batch_size: int | None = None, progress: bool = True) -> Embeddings:
        return self._encode_all("image", images, role, batch_size, progress)

    def similarity(self, queries: Embeddings, docs: Embeddings) -> np.ndarray:
        """(n_q, n_d) scores: cosine for single vectors, MaxSim for multi-vectors."""
        if isinstance(queries, MultiVector) or isinstance(docs, MultiVector):
            return maxsim(as_multi(queries), as_multi(docs))
        return cosine_similarity(queries, docs)

    def uses_default_similarity(self) -> bool:
        """True when scores are the base's cosine / MaxSim (fast paths may be taken)."""
        return type(self).similarity is Adapter.similarity

    def indexed_pair_similarity(
        self, queries: Embeddings, q_idx: np.ndarray, docs: Embeddings,
        d_idx: Sequence[np.ndarray],
    ) -> np.ndarray:
        """(n, len(d_idx)) scores ``s[i, j] = sim(queries[q_idx[i]], docs[d_idx[j][i]])``
        (triplet scoring: each unique embedding normalised once, only indices gathered)."""
        q_idx = np.asarray(q_idx, np.int64)
        if (self.uses_default_similarity() and not isinstance(queries, MultiVector)
                and not isinstance(docs, MultiVector)):
            qn, dn = l2_normalize(queries), l2_normalize(docs)
            qg = qn[q_idx]
            cols = [np.einsum("ij,ij->i", qg, dn[np.asarray(ix, np.int64)]) for ix in d_idx]
            return np.stack(cols, axis=1).astype(np.float32)
        q = take(queries, q_idx)
        return np.stack([self.pair_similarity(q, take(docs, ix)) for ix in d_idx], axis=1)

    def pair_similarity(self, queries: Embeddings, docs: Embeddings) -> np.ndarray:
        """Row-wise scores ``s[i] = sim(queries[i], docs[i])`` (n,), computed in blocks."""
        if self.uses_default_similarity():
            if isinstance(queries, MultiVector) or isinstance(docs, MultiVector):
                return maxsim_pairs(as_multi(queries), as_multi(docs))  # row-wise, no n x n
            return cosine_pairs(queries, docs)
        n = len(queries)
        out = np.empty(n, np.float32)
        block = 256
        for s in range(0, n, block):
            idx = np.arange(s, min(n, s + block))
            out[idx] = np.diagonal(self.similarity(take(queries, idx), take(docs, idx)))
        return out

    # -- machinery ------------------------------------------------------------------------
    def encode_batches(
        self, modality: str, role: str, n: int, load: Callable[[int, int], list[Any]],
        batch_size: int | None = None, progress: bool = True,
    ) -> Iterator[tuple[int, Embeddings]]:
        """The one batching loop: yields ``(start, embeddings)`` of items read by ``load(start, stop)``."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        text = modality == "text"
        fn = self._encode_text_batch if text else self._encode_image_batch
        size = max(1, int(batch_size or (self.text_batch_size if text else self.image_batch_size)
                          or 1))
        quiet = {"disable": True} if not progress or n <= size else {}  # else $TQDM_DISABLE
        with tqdm(total=n, desc=f"{self.spec.name} {modality}s", unit=modality, leave=False,
                  **quiet) as bar:
            for s in range(0, n, size):
                stop = min(n, s + size)
                with _inference_mode():
                    out = fn(load(s, stop), role)
                yield s, out if isinstance(out, MultiVector) else np.asarray(out, np.float32)
                bar.update(stop - s)

    def _encode_all(self, modality: str, items: Sequence[Any], role: str,
                    batch_size: int | None, progress: bool) -> Embeddings:
        items = items if isinstance(items, Sequence) else list(items)
        return concat([e for _, e in self.encode_batches(
            modality, role, len(items), lambda s, e: list(items[s:e]), batch_size, progress)])


def default_dtype(device: str) -> str:
    """bf16 on GPUs that support it, fp16 on other GPUs, float32 on the CPU."""
    if not device.startswith("cuda"):
        return "float32"
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def as_float32(x: Any) -> np.ndarray:
    """A torch tensor (detached, on the CPU) or array-like as a float32 numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, np.float32)


def _inference_mode() -> Any:
    """``torch.inference_mode()`` when torch is importable, else a no-op."""
    try:
        import torch
    except ImportError:
        return contextlib.nullcontext()
    return torch.inference_mode()


class UserAdapter(Adapter):
    """Wraps a user's object with ``encode_texts``, ``encode_images`` and optional ``similarity``."""

    def __init__(self, obj: Any, target: str, device: str | None = None,
                 dtype: str | None = None):
        for attr in ("encode_texts", "encode_images"):
            if not callable(getattr(obj, attr, None)):
                raise TypeError(f"{target}: adapter has no callable {attr}(...)")
        super().__init__(model_spec(target, "user", target, getattr(obj, "revision", None),
                                    adapter_version=str(getattr(obj, "version", "1"))),
                         device=device, dtype=dtype)
        self.obj = obj

    def _encode_text_batch(self, texts: list[str], role: str) -> Embeddings:
        return np.asarray(self.obj.encode_texts(texts), np.float32)

    def _encode_image_batch(self, images: list[Any], role: str) -> Embeddings:
        return np.asarray(self.obj.encode_images(images), np.float32)

    def uses_default_similarity(self) -> bool:
        return not callable(getattr(self.obj, "similarity", None))

    def similarity(self, queries: Embeddings, docs: Embeddings) -> np.ndarray:
        fn = getattr(self.obj, "similarity", None)
        if callable(fn):
            return np.asarray(fn(queries, docs), np.float32)
        return super().similarity(queries, docs)
