"""Multilingual-CLIP (``mclip-xlmr-l14``, ``mclip-xlmr-b16plus``): an XLM-R text tower paired
with the open_clip image tower it was distilled against.

``MultilingualCLIP`` rebuilt from the checkpoint's state dict (its ``from_pretrained`` fails on
transformers 5); ``image_dtype`` sets the image tower's dtype apart (docs/models.md).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.models import hub
from benchmark.models.base import Adapter, model_spec, torch_dtype
from benchmark.models.conventions import resolve_dtype
from benchmark.models.openclip import OpenCLIPModel
from core.devices import default_device
from core.vectors import l2_normalize

log = logging.getLogger(__name__)

_ALLOW = ["*.json", "*.safetensors", "*.bin", "*.model", "*.txt"]


def xlmr_config_from_state(state: dict[str, Any]) -> Any:
    """An ``XLMRobertaConfig`` read off a state dict's shapes (``transformer.`` prefix)."""
    from transformers import XLMRobertaConfig

    emb = state["transformer.embeddings.word_embeddings.weight"]
    pos = state["transformer.embeddings.position_embeddings.weight"]
    types = state.get("transformer.embeddings.token_type_embeddings.weight")
    layers = {int(m.group(1)) for k in state if (m := re.match(r"transformer\.encoder\.layer\.(\d+)\.", k))}
    inter = state["transformer.encoder.layer.0.intermediate.dense.weight"].shape[0]
    hidden = int(emb.shape[1])
    return XLMRobertaConfig(
        vocab_size=int(emb.shape[0]), hidden_size=hidden, num_hidden_layers=len(layers),
        num_attention_heads=max(1, hidden // 64), intermediate_size=int(inter),
        max_position_embeddings=int(pos.shape[0]),
        type_vocab_size=int(types.shape[0]) if types is not None else 1,
        layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )


def load_state(folder: Path) -> dict[str, Any]:
    """The M-CLIP checkpoint's tensors (safetensors preferred, else pytorch_model.bin)."""
    import torch

    if any(folder.glob("*.safetensors")):
        return hub.read_safetensors(folder, exclude=())
    bins = sorted(folder.glob("pytorch_model*.bin"))
    if not bins:
        raise hub.ModelLoadError(f"{folder}: no model.safetensors or pytorch_model.bin")
    out: dict[str, Any] = {}
    for f in bins:
        out.update(torch.load(str(f), map_location="cpu", weights_only=True))
    return out


class MCLIPTextTower:
    """The text half of MultilingualCLIP: XLM-R, masked mean, linear map."""

    def __init__(self, folder: Path, device: str, dtype: Any):
        import torch
        from multilingual_clip.Config_MCLIP import MCLIPConfig
        from transformers import AutoConfig, AutoTokenizer, XLMRobertaModel

        cfg = MCLIPConfig.from_pretrained(str(folder))
        state = load_state(folder)
        base = Path(str(cfg.modelBase)).expanduser()
        xcfg = AutoConfig.from_pretrained(str(base)) if (base / "config.json").is_file() else xlmr_config_from_state(state)
        self.transformer = XLMRobertaModel(xcfg, add_pooling_layer=any(k.startswith("transformer.pooler.") for k in state))
        self.linear = torch.nn.Linear(cfg.transformerDimensions, cfg.numDims)
        tstate = {k[len("transformer."):]: v for k, v in state.items() if k.startswith("transformer.")}
        tstate.pop("embeddings.position_ids", None)
        self.transformer.load_state_dict(tstate, strict=True)
        self.linear.load_state_dict({k.split(".")[-1]: v for k, v in state.items() if k.startswith("LinearTransformation.")})
        self.transformer.to(device=device, dtype=dtype).eval()
        self.linear.to(device=device, dtype=dtype).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.max_length = int(min(xcfg.max_position_embeddings - 2, 512))
        self.device = device
        self.dims = int(cfg.numDims)

    def encode(self, texts: list[str]) -> np.ndarray:
        tok = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        tok = {k: v.to(self.device) for k, v in tok.items()}
        embs = self.transformer(**tok)[0]
        att = tok["attention_mask"].to(embs.dtype)
        pooled = (embs * att.unsqueeze(2)).sum(dim=1) / att.sum(dim=1)[:, None]
        return self.linear(pooled).float().cpu().numpy()


class MCLIPModel(Adapter):
    """M-CLIP text tower + its open_clip image tower; cosine similarity."""

    text_batch_size = 128
    image_batch_size = 64

    def __init__(
        self, name: str, checkpoint: str, revision: str | None = None, device: str | None = None,
        dtype: str | None = None, image_model: str = "ViT-L-14/openai", image_revision: str | None = None,
        image_dtype: str | None = None, **kw: Any,
    ):
        what = f"model {name}"
        hub.require(("torch", "transformers", "open_clip", "multilingual_clip"), "mclip", what)
        folder, rev = hub.locate(checkpoint, revision, what=what, allow_patterns=_ALLOW)
        device = device or default_device()
        self.image_tower = OpenCLIPModel(
            name=f"{name}/image", checkpoint=image_model, revision=image_revision, device=device,
            dtype=resolve_dtype(image_dtype, device) or dtype,
        )
        super().__init__(model_spec(name, "mclip", checkpoint, rev, image_model=image_model,
                                    image_revision=self.image_tower.spec.revision),
                         device=device, dtype=dtype)
        self.text_tower = MCLIPTextTower(folder, self.device, torch_dtype(self.dtype))
        img_dim = int(self.image_tower.model.visual.output_dim)
        if img_dim != self.text_tower.dims:
            raise hub.ModelLoadError(
                f"{what}: text tower maps to {self.text_tower.dims} dims but image model "
                f"{image_model} gives {img_dim}; pair the text tower with its own image tower"
            )
        self.config_json = json.loads((folder / "config.json").read_text(encoding="utf-8"))

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        if modality == "text":
            return {"pooling": "attention-masked mean", "max_length": self.text_tower.max_length,
                    "prompt": None, "dtype": self.dtype}
        return {"image_model": self.spec.extra["image_model"],
                "image_revision": self.image_tower.spec.revision,
                **self.image_tower.conventions(modality, role)}

    def _encode_text_batch(self, texts: list[str], role: str) -> np.ndarray:
        return l2_normalize(self.text_tower.encode(texts))

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        return self.image_tower._encode_image_batch(images, role)
