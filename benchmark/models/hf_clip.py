"""Dual encoders on transformers' own classes: Chinese-CLIP, SigLIP 2, and any ``hf_clip:`` CLIP.

Text and image conventions per model card (docs/models.md); embeddings L2-normalised.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from benchmark.models import hub
from benchmark.models.base import Adapter, model_spec, torch_dtype
from core.vectors import l2_normalize

log = logging.getLogger(__name__)

# *.bin: older repos (e.g. OFA-Sys Chinese-CLIP) may hold only pytorch_model.bin.
_ALLOW = ["*.json", "*.safetensors", "*.bin", "*.txt", "*.model", "*.jinja"]
# model_type -> (padding, max_length) of the text side, per the model cards
TEXT_CONVENTIONS: dict[str, tuple[str | bool, int | None]] = {
    "siglip": ("max_length", 64),
    "siglip2": ("max_length", 64),
    "chinese_clip": (True, None),
    "clip": (True, 77),
}


def _plain(v: Any) -> Any:
    """JSON-able, stable form of an image-processor setting (SizeDict, enums, tuples)."""
    import dataclasses
    import enum

    if isinstance(v, enum.Enum):
        return v.name
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        v = dataclasses.asdict(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v if isinstance(v, (int, float, str, bool)) or v is None else repr(v)


def _features(out: Any) -> Any:
    """The projected embedding of a ``get_*_features`` call (tensor in v4, output in v5)."""
    return getattr(out, "pooler_output", out)


class HFDualEncoder(Adapter):
    """A transformers dual encoder (Chinese-CLIP, SigLIP, SigLIP 2, CLIP)."""

    text_batch_size = 128
    image_batch_size = 64

    def __init__(
        self, name: str, checkpoint: str, revision: str | None = None, device: str | None = None,
        dtype: str | None = None, text_padding: str | bool | None = None,
        text_max_length: int | None = None, image_backend: str | None = None, **kw: Any,
    ):
        what = f"model {name}"
        hub.require(("torch", "transformers", "safetensors"), "hf", what)
        from transformers import AutoModel, AutoProcessor

        folder, rev = hub.locate(checkpoint, revision, what=what, allow_patterns=_ALLOW)
        hub.sync_offline_flag()
        model = AutoModel.from_pretrained(str(folder), dtype=torch_dtype(dtype or "float32"))
        family = model.config.model_type
        super().__init__(model_spec(name, f"hf:{family}", checkpoint, rev), device=device,
                         dtype=dtype)
        self.model = model.to(device=self.device, dtype=torch_dtype(self.dtype)).eval()
        self.processor = AutoProcessor.from_pretrained(str(folder))
        if image_backend is not None:
            from transformers import AutoImageProcessor

            self.processor.image_processor = AutoImageProcessor.from_pretrained(
                str(folder), backend=image_backend)
        pad, max_len = TEXT_CONVENTIONS.get(family, (True, None))
        self.text_padding = pad if text_padding is None else text_padding
        limit = getattr(getattr(model.config, "text_config", None), "max_position_embeddings", None)
        self.text_max_length = text_max_length or max_len or limit
        self.family = family

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        if modality == "text":
            return {"padding": self.text_padding, "max_length": self.text_max_length,
                    "truncation": True, "prompt": None, "dtype": self.dtype}
        ip = self.processor.image_processor
        keys = ("size", "crop_size", "do_center_crop", "resample", "image_mean", "image_std",
                "max_num_patches", "patch_size", "do_resize", "do_rescale", "rescale_factor")
        conv = {k: _plain(getattr(ip, k)) for k in keys if getattr(ip, k, None) is not None}
        return {**conv, "image_processor": type(ip).__name__, "dtype": self.dtype}

    def _encode_text_batch(self, texts: list[str], role: str) -> np.ndarray:
        tok = self.processor.tokenizer(
            texts, padding=self.text_padding, truncation=True, max_length=self.text_max_length,
            return_tensors="pt",
        )
        tok = {k: v.to(self.device) for k, v in tok.items()}
        emb = _features(self.model.get_text_features(**tok))
        return l2_normalize(emb.float().cpu().numpy())

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        inputs = self.processor.image_processor([im.convert("RGB") for im in images], return_tensors="pt")
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        emb = _features(self.model.get_image_features(**inputs))
        return l2_normalize(emb.float().cpu().numpy())
