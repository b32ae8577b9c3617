"""GME-Qwen2-VL (``gme-qwen2-2b``, ``gme-qwen2-7b``): last-token embeddings of a Qwen2-VL.

The model's ``gme_inference.py`` rebuilt on transformers 5's ``Qwen2VLModel``
(:mod:`benchmark.models.qwenvl`); instructions, resizing and pooling: docs/models.md.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from benchmark.models import hub, qwenvl
from benchmark.models.base import Adapter

log = logging.getLogger(__name__)

T2I_INSTRUCTION = "Find an image that matches the given text."
DEFAULT_INSTRUCTION = "You are a helpful assistant."
IMAGE_INPUT = "<|vision_start|><|image_pad|><|vision_end|>"
_FETCH_MIN, _FETCH_MAX, _FACTOR, _MAX_RATIO = 4 * 28 * 28, 16384 * 28 * 28, 28, 200
_ALLOW = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]


def smart_resize(height: int, width: int, factor: int = _FACTOR, min_pixels: int = _FETCH_MIN,
                 max_pixels: int = _FETCH_MAX) -> tuple[int, int]:
    """qwen_vl_utils' ``smart_resize`` as copied into ``gme_inference.py``: sides multiples of
    ``factor``, area within [min_pixels, max_pixels], aspect ratio kept."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h = math.floor(height / beta / factor) * factor
        w = math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    if max(h, w) / min(h, w) > _MAX_RATIO:
        if h > w:
            h = w * _MAX_RATIO
        else:
            w = h * _MAX_RATIO
    return h, w


def fetch_image(image: Any) -> Any:
    """GME's ``fetch_image`` on a PIL image: RGB, then resized to the smart-resize grid."""
    img = image.convert("RGB")
    width, height = img.size
    h, w = smart_resize(height, width)
    return img.resize((w, h))


def chat(instruction: str, content: str) -> str:
    return (
        f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{content}<|im_end|>\n"
        f"<|im_start|>assistant\n<|endoftext|>"
    )


class GMEModel(Adapter):
    """GME-Qwen2-VL: one normalised vector per text or image (cosine similarity)."""

    text_batch_size = 16
    image_batch_size = 8

    def __init__(
        self, name: str, checkpoint: str, revision: str | None = None, device: str | None = None,
        dtype: str | None = None, query_instruction: str | None = T2I_INSTRUCTION,
        min_image_tokens: int = 256, max_image_tokens: int = 1280, max_length: int = 1800,
        image_backend: str | None = "pil", normalize_dtype: str = "float32", **kw: Any,
    ):
        what = f"model {name}"
        hub.require(("torch", "transformers", "safetensors"), "qwen", what)
        folder, spec = hub.hub_spec(name, "gme", checkpoint, revision, allow_patterns=_ALLOW)
        super().__init__(spec, device=device, dtype=dtype)
        self._folder = folder
        self._backbone: Any = None  # weights load on the first encode (cached runs need none)
        self.processor = qwenvl.load_processor(
            folder, "qwen2_vl", min_pixels=min_image_tokens * 28 * 28,
            max_pixels=max_image_tokens * 28 * 28, image_backend=image_backend,
        )
        self.processor.tokenizer.padding_side = "right"
        self.normalize_dtype = hub.check_choice(what, "normalize_dtype", normalize_dtype,
                                                hub.NORMALIZE_DTYPES)
        self.query_instruction = query_instruction or DEFAULT_INSTRUCTION
        self.max_length = int(max_length)
        self._image_token_id = int(qwenvl.read_config(self._folder)["image_token_id"])

    @property
    def backbone(self) -> Any:
        """The Qwen2-VL backbone, loaded on first use."""
        if self._backbone is None:
            self._backbone, _, _ = qwenvl.load_backbone(
                self._folder, dtype=self.dtype, device=self.device, arch="qwen2_vl",
            )
        return self._backbone

    def instruction(self, modality: str, role: str) -> str:
        return self.query_instruction if (modality, role) == ("text", "query") else DEFAULT_INSTRUCTION

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        conv: dict[str, Any] = {
            "instruction": self.instruction(modality, role),
            "template": chat("{instruction}", "{input}"),
            "pooling": "last-token",
            "normalize_dtype": self.normalize_dtype,
            "position_ids": "sequential (upstream gme_inference.py)",
            "max_length": self.max_length,
            "dtype": self.dtype,
        }
        if modality == "image":
            conv["image_input"] = IMAGE_INPUT
            conv["fetch_resize"] = {"min_pixels": _FETCH_MIN, "max_pixels": _FETCH_MAX}
            conv.update(qwenvl.pixel_bounds(self.processor))
        return conv

    def _encode_text_batch(self, texts: list[str], role: str) -> np.ndarray:
        return self._embed([chat(self.instruction("text", role), t) for t in texts], None)

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        prompt = chat(self.instruction("image", role), IMAGE_INPUT)
        return self._embed([prompt] * len(images), [fetch_image(im) for im in images])

    def _embed(self, prompts: list[str], images: list[Any] | None) -> np.ndarray:
        import torch

        inputs = self.processor(
            text=prompts, images=images, padding=True, truncation=True,
            max_length=self.max_length, return_tensors="pt",
        )
        ids = inputs["input_ids"].to(self.device)
        mask = inputs["attention_mask"].to(self.device)
        embeds = self.backbone.get_input_embeddings()(ids)
        if images:
            pv = inputs["pixel_values"].to(self.device, dtype=self.backbone.visual.dtype)
            feats = self.backbone.get_image_features(pv, inputs["image_grid_thw"].to(self.device))
            image_embeds = torch.cat(list(feats.pooler_output), dim=0).to(embeds.dtype)
            embeds = embeds.clone()
            embeds[ids == self._image_token_id] = image_embeds
        hidden = self.backbone.language_model(
            inputs_embeds=embeds, attention_mask=mask, use_cache=False,
        ).last_hidden_state
        if bool((mask[:, -1] == 1).all()):  # left padding, or no padding (upstream's test)
            pooled = hidden[:, -1]
        else:
            last = mask.sum(dim=1) - 1
            pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        if self.normalize_dtype == "float32":
            pooled = pooled.float()
        pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled.float().cpu().numpy()
