"""Jina: ``jina-v4`` (jina-embeddings-v4, single- and multi-vector) and ``jina-clip-v2``.

jina-embeddings-v4's remote code rebuilt on ``Qwen2_5_VLModel`` (:mod:`benchmark.models.qwenvl`);
jina-clip-v2 runs its own pinned remote code. Prompts and pooling: docs/models.md.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.embeddings import Embeddings
from benchmark.models import hub, qwenvl
from benchmark.models.base import Adapter, as_float32, torch_dtype
from core.hub import one_line
from core.vectors import l2_normalize

log = logging.getLogger(__name__)

PREFIX = {"query": "Query", "passage": "Passage"}
IMAGE_PROMPT = (
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>\n"
)
PROJ = "multi_vector_projector"
TEXT_MAX_LENGTH = 32768
AUTOCAST_DTYPES = ("bfloat16", "float16")
_ALLOW = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "adapters/*"]


class JinaV4Model(Adapter):
    """jina-embeddings-v4 on transformers' Qwen2.5-VL: single vectors (cosine) or multi (MaxSim)."""

    text_batch_size = 16
    image_batch_size = 8

    def __init__(
        self, name: str, checkpoint: str, revision: str | None = None, device: str | None = None,
        dtype: str | None = None, task: str = "retrieval", multi_vector: bool = False,
        truncate_dim: int | None = None, max_pixels: int | None = None,
        document_prompt: str = "passage", image_backend: str | None = "pil",
        normalize_dtype: str = "float32", autocast: str | None = None, **kw: Any,
    ):
        what = f"model {name}"
        hub.require(("torch", "transformers", "safetensors"), "qwen", what)
        hub.check_choice(what, "document_prompt", document_prompt, PREFIX)
        if autocast is not None:
            hub.check_choice(what, "autocast", autocast, AUTOCAST_DTYPES)
        self.autocast = autocast
        self.normalize_dtype = hub.check_choice(what, "normalize_dtype", normalize_dtype,
                                                hub.NORMALIZE_DTYPES)

        folder, spec = hub.hub_spec(name, "jina-v4", checkpoint, revision, allow_patterns=_ALLOW,
                                    multi_vector=multi_vector, task=task,
                                    truncate_dim=truncate_dim)
        super().__init__(spec, device=device, dtype=dtype)
        cfg = qwenvl.read_config(folder)
        tasks = cfg.get("task_names")
        if tasks and task not in tasks:
            raise hub.ModelLoadError(f"{what}: task {task!r} is not one of {tasks}")
        if not (folder / "adapters" / "adapter_config.json").is_file():
            raise hub.ModelLoadError(f"{what}: {folder} has no adapters/adapter_config.json")
        self._folder, self._what = folder, what
        self._net: tuple[Any, Any] | None = None  # weights load on the first encode
        self.lora_modules = 0
        self.processor = qwenvl.load_processor(folder, "qwen2_5_vl", max_pixels=max_pixels,
                                               image_backend=image_backend)
        self.task = task
        self.truncate_dim = truncate_dim
        self.prompt_names = {"query": "query", "document": document_prompt}
        self._vs = int(cfg["vision_start_token_id"])
        self._ve = int(cfg["vision_end_token_id"])

    def _loaded(self) -> tuple[Any, Any]:
        """(backbone with the task's LoRA merged, multi-vector projector or None)."""
        if self._net is None:
            state, self.lora_modules = qwenvl.merged_state(
                qwenvl.read_state(self._folder), self._folder / "adapters", adapter_name=self.task,
            )
            backbone, rest, _ = qwenvl.load_backbone(
                self._folder, dtype=self.dtype, device=self.device, arch="qwen2_5_vl", state=state,
            )
            proj = None
            if self.spec.multi_vector:
                proj = qwenvl.load_head(rest, PROJ, device=self.device, dtype=backbone.dtype,
                                        what=f"{self._what}: {self._folder}")
            self._net = (backbone, proj)
        return self._net

    @property
    def backbone(self) -> Any:
        return self._loaded()[0]

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        conv: dict[str, Any] = {
            "task": self.task, "dtype": self.dtype,
            "output": "multi-vector" if self.spec.multi_vector else "single-vector",
            "truncate_dim": self.truncate_dim, "normalize_dtype": self.normalize_dtype,
            "autocast": self.autocast,
        }
        if modality == "text":
            pn = self.prompt_names[role]
            conv.update(prompt_name=pn, prefix=f"{PREFIX[pn]}: ", max_length=TEXT_MAX_LENGTH,
                        pooling="mean over attention mask")
        else:
            conv.update(prompt=IMAGE_PROMPT, pooling="mean over <|vision_start|>..<|vision_end|>",
                        **qwenvl.pixel_bounds(self.processor))
        return conv

    def _encode_text_batch(self, texts: list[str], role: str) -> Embeddings:
        batch = self.processor(
            text=[f"{PREFIX[self.prompt_names[role]]}: {t}" for t in texts], padding="longest", truncation=True,
            max_length=TEXT_MAX_LENGTH, return_tensors="pt",
        )
        return self._forward(batch, image=False)

    def _encode_image_batch(self, images: list[Any], role: str) -> Embeddings:
        batch = self.processor(
            text=[IMAGE_PROMPT] * len(images), images=qwenvl.rgb(images), padding="longest",
            return_tensors="pt",
        )
        return self._forward(batch, image=True)

    def _forward(self, batch: Any, image: bool) -> Embeddings:
        """Forward, pooling and normalisation; with ``autocast`` all of it inside
        ``torch.autocast(dtype=...)``, as the remote code's ``_process_batches``."""
        import torch

        device_type = torch.device(self.device).type
        if self.autocast is None or device_type not in ("cuda", "cpu"):
            return self._forward_inner(batch, image)
        with torch.autocast(device_type=device_type, dtype=getattr(torch, self.autocast)):
            return self._forward_inner(batch, image)

    def _forward_inner(self, batch: Any, image: bool) -> Embeddings:
        import torch

        backbone, head = self._loaded()
        hidden, inputs = qwenvl.last_hidden(backbone, batch, self.device)
        mask = inputs["attention_mask"]
        if head is not None:
            return qwenvl.token_vectors(head(hidden), mask, self.normalize_dtype)
        if image:
            ids = inputs["input_ids"]
            pos = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
            start = (ids == self._vs).int().argmax(dim=1, keepdim=True)
            end = (ids == self._ve).int().argmax(dim=1, keepdim=True)
            span = ((pos >= start) & (pos <= end)).to(hidden.dtype)
        else:
            span = mask.to(hidden.dtype)
        pooled = (hidden * span.unsqueeze(-1)).sum(dim=1) / span.sum(dim=1, keepdim=True)
        if self.normalize_dtype == "model":  # the remote code's F.normalize in the model dtype
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        out = pooled.float().cpu().numpy()
        if self.truncate_dim:
            out = out[:, : self.truncate_dim]
        return l2_normalize(out)


class JinaCLIPModel(Adapter):
    """jina-clip-v2 through its own remote code (see the module docstring)."""

    text_batch_size = 64
    image_batch_size = 32

    def __init__(
        self, name: str, checkpoint: str, revision: str | None = None, device: str | None = None,
        dtype: str | None = None, query_task: str | None = "retrieval.query",
        truncate_dim: int | None = None, code_revision: str | None = None, **kw: Any,
    ):
        what = f"model {name}"
        hub.require(("torch", "transformers", "einops"), "hf", what)
        folder, spec = hub.hub_spec(name, "jina-clip", checkpoint, revision,
                                    truncate_dim=truncate_dim, code_revision=code_revision)
        super().__init__(spec, device=device, dtype=dtype)
        self.model = load_remote_code_model(folder, what, self.dtype, code_revision).to(self.device).eval()
        self.query_task = query_task
        self.truncate_dim = truncate_dim
        self.implementation = json.loads((folder / "config.json").read_text()).get("auto_map", {})

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        conv: dict[str, Any] = {"truncate_dim": self.truncate_dim, "dtype": self.dtype,
                                "remote_code": self.implementation}
        if modality == "text":
            conv["task"] = self.query_task if role == "query" else None
        return conv

    def _encode_text_batch(self, texts: list[str], role: str) -> np.ndarray:
        kw: dict[str, Any] = {"truncate_dim": self.truncate_dim}
        if role == "query" and self.query_task:
            kw["task"] = self.query_task
        return l2_normalize(as_float32(self.model.encode_text(texts, **kw)))

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        out = self.model.encode_image(qwenvl.rgb(images), truncate_dim=self.truncate_dim)
        return l2_normalize(as_float32(out))


def load_remote_code_model(folder: Path, what: str, dtype: str, code_revision: str | None = None) -> Any:
    """``AutoModel.from_pretrained(folder, trust_remote_code=True)``; one-line failure.
    ``code_revision`` pins the revision of a code repo the config's ``auto_map`` points to."""
    from transformers import AutoModel

    hub.sync_offline_flag()
    try:
        kw = {"code_revision": code_revision} if code_revision else {}
        return AutoModel.from_pretrained(str(folder), trust_remote_code=True, dtype=torch_dtype(dtype), **kw)
    except Exception as e:  # remote code written for other transformers versions: say so
        raise hub.ModelLoadError(
            f"{what}: the checkpoint's remote code failed to load on this transformers "
            f"({one_line(e)}); its code repo must be cached too "
            f"(HF_HUB_OFFLINE={int(hub.offline())})"
        ) from e
