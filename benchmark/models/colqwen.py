"""ColQwen2.5 (``colqwen2.5-v0.2``, ``colqwen2.5-3b-m``, ``colqwen2.5-7b-m``): multi-vector, MaxSim.

colpali-engine's ``ColQwen2_5`` rebuilt on transformers' ``Qwen2_5_VLModel``
(:mod:`benchmark.models.qwenvl`), LoRA merged; prompts, scorers and padding: docs/models.md.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.embeddings import Embeddings, MultiVector, as_multi
from benchmark.models import hub, qwenvl
from benchmark.models.base import Adapter, model_spec

log = logging.getLogger(__name__)

QUERY_PREFIX = "Query: "
QUERY_AUGMENTATION = "<|endoftext|>" * 10
VISUAL_PROMPT = (
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image."
    "<|im_end|><|endoftext|>"
)
PROJ = "custom_text_proj"
_ALLOW = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]
SCORERS = ("maxsim", "colpali-per-document", "colpali-batched")
COLPALI_BATCH = 128  # score_multi_vector's default batch_size


def colpali_score_multi_vector(
    qs: list[np.ndarray], ps: list[np.ndarray], batch_size: int = COLPALI_BATCH,
) -> np.ndarray:
    """colpali-engine's ``score_multi_vector`` (0.3.12) in numpy: zero-padded blocks, (n_q, n_p)."""
    if not qs or not ps:
        raise ValueError("no queries or no passages")

    def pad(block: list[np.ndarray]) -> np.ndarray:
        out = np.zeros((len(block), max(len(x) for x in block), block[0].shape[-1]), np.float32)
        for i, x in enumerate(block):
            out[i, : len(x)] = x
        return out

    rows = []
    for i in range(0, len(qs), batch_size):
        qb = pad(qs[i : i + batch_size])
        cols = [np.einsum("bnd,csd->bcns", qb, pad(ps[j : j + batch_size])).max(axis=3).sum(axis=2)
                for j in range(0, len(ps), batch_size)]
        rows.append(np.concatenate(cols, axis=1))
    return np.concatenate(rows, axis=0).astype(np.float32)


def resolve_base(
    folder: Path, what: str, base: str | None, base_revision: str | None,
) -> tuple[Path | None, dict[str, Any]]:
    """(base model folder, info) when ``folder`` is a LoRA adapter; (None, {}) for merged weights."""
    if not (folder / "adapter_config.json").is_file():
        return None, {}
    acfg = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    base_id = base or acfg.get("base_model_name_or_path")
    if not base_id:
        raise hub.ModelLoadError(f"{what}: {folder} is a LoRA adapter without base_model_name_or_path")
    base_folder, base_rev = hub.locate(base_id, base_revision, what=f"{what} (base model)",
                                       allow_patterns=_ALLOW)
    return base_folder, {
        "base": base_id, "base_revision": base_rev,
        "lora_r": acfg.get("r"), "lora_alpha": acfg.get("lora_alpha"),
    }


class ColQwenModel(Adapter):
    """ColQwen2.5: one 128-d vector per token; similarity is MaxSim."""

    text_batch_size = 32
    image_batch_size = 8

    def __init__(
        self, name: str, checkpoint: str, revision: str | None = None, device: str | None = None,
        dtype: str | None = None, base: str | None = None, base_revision: str | None = None,
        max_num_visual_tokens: int | None = None, image_backend: str | None = "pil",
        scorer: str = "maxsim", normalize_dtype: str = "float32", **kw: Any,
    ):
        what = f"model {name}"
        hub.require(("torch", "transformers", "safetensors"), "qwen", what)
        self.scorer = hub.check_choice(what, "scorer", scorer, SCORERS)
        self.normalize_dtype = hub.check_choice(what, "normalize_dtype", normalize_dtype,
                                                hub.NORMALIZE_DTYPES)
        folder, rev = hub.locate(checkpoint, revision, what=what, allow_patterns=_ALLOW)
        self._base_folder, self.load_info = resolve_base(folder, what, base, base_revision)
        super().__init__(model_spec(name, "colqwen", checkpoint, rev, multi_vector=True, **{
            "base": base, "base_revision": base_revision, **self.load_info}),
            device=device, dtype=dtype)
        self._folder, self._what = folder, what
        self._net: tuple[Any, Any] | None = None  # weights load on the first encode
        has_proc = any((folder / f).is_file() for f in ("preprocessor_config.json", "processor_config.json"))
        proc_folder = folder if has_proc or self._base_folder is None else self._base_folder
        max_px = max_num_visual_tokens * 28 * 28 if max_num_visual_tokens else None
        self.processor = qwenvl.load_processor(proc_folder, "qwen2_5_vl", max_pixels=max_px,
                                               image_backend=image_backend)
        self.processor.tokenizer.padding_side = "left"

    def _loaded(self) -> tuple[Any, Any]:
        """(backbone, with a LoRA adapter merged into its base, projection) on first use."""
        if self._net is None:
            base, n = self._base_folder, 0
            if base is not None:
                state, n = qwenvl.merged_state(qwenvl.read_state(base), self._folder)
            else:
                state = qwenvl.read_state(self._folder)
            backbone, rest, _ = qwenvl.load_backbone(base or self._folder, dtype=self.dtype,
                                                     device=self.device, arch="qwen2_5_vl",
                                                     state=state)
            self._net = (backbone, qwenvl.load_head(
                rest, PROJ, device=self.device, dtype=backbone.dtype,
                what=f"{self._what}: {self._folder} (not a ColQwen checkpoint)"))
            self.load_info["lora_modules"] = n
        return self._net

    @property
    def backbone(self) -> Any:
        return self._loaded()[0]

    @property
    def proj(self) -> Any:
        return self._loaded()[1]

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        # the base model's revision shapes every vector: part of the cache key
        conv: dict[str, Any] = {"dtype": self.dtype, "padding_side": "left",
                                "base_revision": self.load_info.get("base_revision"),
                                "normalize_dtype": self.normalize_dtype}
        if modality == "text":
            conv.update(prefix=QUERY_PREFIX, query_augmentation=QUERY_AUGMENTATION)
        else:
            conv.update(prompt=VISUAL_PROMPT, **qwenvl.pixel_bounds(self.processor))
        return conv

    def uses_default_similarity(self) -> bool:
        return self.scorer != "colpali-batched"  # per document: masked MaxSim, exactly

    def similarity(self, queries: Embeddings, docs: Embeddings) -> np.ndarray:
        if self.scorer == "colpali-batched":
            return colpali_score_multi_vector(as_multi(queries).to_list(), as_multi(docs).to_list())
        return super().similarity(queries, docs)

    def _encode_text_batch(self, texts: list[str], role: str) -> MultiVector:
        prompts = [QUERY_PREFIX + t + QUERY_AUGMENTATION for t in texts]
        batch = self.processor(text=prompts, padding="longest", return_tensors="pt")
        return self._forward(batch)

    def _encode_image_batch(self, images: list[Any], role: str) -> MultiVector:
        batch = self.processor(
            text=[VISUAL_PROMPT] * len(images), images=qwenvl.rgb(images), padding="longest",
            return_tensors="pt",
        )
        return self._forward(batch)

    def _forward(self, batch: Any) -> MultiVector:
        backbone, head = self._loaded()
        hidden, inputs = qwenvl.last_hidden(backbone, batch, self.device)
        return qwenvl.token_vectors(head(hidden), inputs["attention_mask"], self.normalize_dtype)
