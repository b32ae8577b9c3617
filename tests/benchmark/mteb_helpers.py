"""A tiny mteb model for tests: a ModelMeta whose loader wraps a random-init transformers CLIP
folder (tests/benchmark/models/tiny.py) in mteb's own CLIP wrapper, registered in mteb's
registry for the duration of a test (nothing downloads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TINY_NAME = "xcm3-test/tiny-clip"
TINY_REVISION = "tiny-rev-1"


def tiny_meta(folder: Path, name: str = TINY_NAME, similarity: str = "cosine",
              modalities: tuple[str, ...] = ("image", "text")) -> Any:
    from mteb.models.model_implementations.clip_models import CLIPModel
    from mteb.models.model_meta import ModelMeta

    def loader(model_name: str, revision: str | None = None, device: str | None = None,
               **kw: Any) -> Any:
        return CLIPModel(str(folder), revision=None, device=device or "cpu")

    return ModelMeta(
        loader=loader, name=name, revision=TINY_REVISION, release_date="2026-01-01",
        languages=["eng-Latn"], n_parameters=12345, memory_usage_mb=None, max_tokens=77,
        embed_dim=16, license="mit", open_weights=True, public_training_code=None,
        public_training_data=None, framework=["PyTorch"], similarity_fn_name=similarity,
        use_instructions=False, training_datasets=None, modalities=list(modalities),
    )


def register_tiny(monkeypatch: Any, folder: Path, **kw: Any) -> Any:
    """Put a tiny ModelMeta into mteb's registry for this test; returns it."""
    from mteb.models.model_implementations import MODEL_REGISTRY

    meta = tiny_meta(folder, **kw)
    monkeypatch.setitem(MODEL_REGISTRY, meta.name, meta)
    return meta
