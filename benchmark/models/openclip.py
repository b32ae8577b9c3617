"""open_clip family: ``clip-l14`` and any ``open_clip:MODEL/PRETRAINED`` (checkpoint forms:
docs/models.md). Embeddings as open_clip's zero-shot code: validation transform, no prompt,
``normalize=True``; a tag's preprocessing and QuickGELU are applied explicitly.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.models import hub
from benchmark.models.base import Adapter, model_spec, torch_dtype

log = logging.getLogger(__name__)

# open_clip 3.3's table sends the laion400m_e32 tag of ViT-B-16-plus-240 to the *e31* hub repo
# (its URL names the e32 file, 699c4b84); timm 1.0 lists the e32 repo below. Use that.
HUB_OVERRIDES: dict[tuple[str, str], str] = {
    ("ViT-B-16-plus-240", "laion400m_e32"): "timm/vit_base_patch16_plus_clip_240.laion400m_e32/",
}
_PRECISION = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_PREPROCESS_KEYS = ("mean", "std", "interpolation", "resize_mode")


def parse_checkpoint(checkpoint: str) -> tuple[str, str | None]:
    """``MODEL/PRETRAINED`` -> (model, pretrained); schemas (``local-dir:``, ``hf-hub:``) whole."""
    if checkpoint.startswith(("local-dir:", "hf-hub:")):
        return checkpoint, None
    model, sep, pretrained = checkpoint.partition("/")
    if not sep or not pretrained:
        raise hub.ModelLoadError(
            f"open_clip checkpoint {checkpoint!r}: expected MODEL/PRETRAINED "
            f"(e.g. ViT-L-14/openai), local-dir:/path or hf-hub:org/repo"
        )
    return model, pretrained


def tag_weights(model: str, tag: str, what: str) -> tuple[Path, dict[str, Any]]:
    """Local weights file and pretrained config of an open_clip (model, tag) pair."""
    import open_clip

    cfg = open_clip.get_pretrained_cfg(model, tag)
    if not cfg:
        known = open_clip.list_pretrained_tags_by_model(model)
        raise hub.ModelLoadError(f"{what}: open_clip has no pretrained tag {tag!r} for {model!r} (known: {known})")
    hub_id = HUB_OVERRIDES.get((model, tag)) or cfg.get("hf_hub", "")
    if not hub_id:
        raise hub.CheckpointNotFound(
            f"{what}: tag {model}/{tag} has no Hugging Face repo; download {cfg.get('url')} and "
            f"pass open_clip:{model}/PATH_TO_FILE"
        )
    repo, filename = hub_id.rstrip("/"), ""
    if not hub_id.endswith("/"):
        repo, filename = hub_id.rsplit("/", 1)
    if filename:
        return hub.resolve_file(repo, filename, None, what=what), cfg
    # Default file names, safetensors first (as open_clip's download_pretrained_from_hf).
    names = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
    for fn in names:
        try:
            return hub.resolve_file(repo, fn, None, what=what), cfg
        except hub.CheckpointNotFound as e:
            last = e
    raise hub.CheckpointNotFound(
        str(last).replace(f"file {names[1]}", f"file {names[0]} (or {names[1]})")
        .replace(f" {names[1]} --local-dir", f" {names[0]} --local-dir")
    ) from last


class OpenCLIPModel(Adapter):
    """Any open_clip dual encoder; cosine similarity of normalised embeddings."""

    text_batch_size = 256
    image_batch_size = 64

    def __init__(
        self, name: str, checkpoint: str, revision: str | None = None, device: str | None = None,
        dtype: str | None = None, **kw: Any,
    ):
        what = f"model {name}"
        hub.require(("torch", "open_clip"), "openclip", what)
        import open_clip

        model_name, pretrained = parse_checkpoint(checkpoint)
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        if model_name.startswith("local-dir:"):
            folder = Path(hub.strip_local_prefix(model_name)).expanduser()
            if not (folder / "open_clip_config.json").is_file():
                raise hub.CheckpointNotFound(
                    f"{what}: {folder} has no open_clip_config.json (an open_clip local-dir folder)"
                )
            revision = revision or hub.folder_fingerprint(folder)
        elif model_name.startswith("hf-hub:"):
            repo = model_name[len("hf-hub:"):]
            folder = hub.resolve_repo(repo, revision, what=what)
            model_name = f"local-dir:{folder}"
        elif pretrained == "random":
            revision = "random-init"
            log.warning("%s: random weights (throughput measurements only)", what)
        elif pretrained is not None and Path(pretrained).expanduser().is_file():
            kwargs["pretrained"] = str(Path(pretrained).expanduser())
            revision = revision or hub.folder_fingerprint(Path(kwargs["pretrained"]))
        else:
            path, cfg = tag_weights(model_name, str(pretrained), what)
            kwargs["pretrained"] = str(path)
            kwargs["force_quick_gelu"] = bool(cfg.get("quick_gelu", False))
            kwargs.update({f"image_{k}": cfg[k] for k in _PREPROCESS_KEYS if k in cfg})
            revision = revision or f"open_clip:{model_name}/{pretrained}"
            # the hub snapshot the tag's file came from (provenance; the tag is the pin)
            snap = path.parent.name if path.parent.parent.name == "snapshots" else None
            extra = {"weights_file": path.name, "weights_snapshot": snap}
        super().__init__(model_spec(name, "open_clip", checkpoint, revision, **extra),
                         device=device, dtype=dtype)
        hub.sync_offline_flag()
        model, _, preprocess = open_clip.create_model_and_transforms(
            model_name, device=self.device, precision=_PRECISION[self.dtype], **kwargs,
        )
        self.model = model.eval()
        self.preprocess = preprocess
        self.tokenizer = open_clip.get_tokenizer(model_name)
        self.context_length = int(getattr(self.tokenizer, "context_length", 77) or 77)
        self._tdtype = torch_dtype(self.dtype)
        self._conv = {
            "image": {"preprocess": _describe(preprocess), "dtype": self.dtype},
            "text": {"context_length": self.context_length, "prompt": None, "dtype": self.dtype},
        }

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        return dict(self._conv[modality])

    def _encode_text_batch(self, texts: list[str], role: str) -> np.ndarray:
        tokens = self.tokenizer(texts).to(self.device)
        emb = self.model.encode_text(tokens, normalize=True)
        return emb.float().cpu().numpy()

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        import torch

        x = torch.stack([self.preprocess(im.convert("RGB")) for im in images])
        x = x.to(self.device, dtype=self._tdtype)
        emb = self.model.encode_image(x, normalize=True)
        return emb.float().cpu().numpy()


def _describe(preprocess: Any) -> str:
    """A stable text form of a torchvision transform pipeline (goes into the cache key)."""
    parts = []
    for t in getattr(preprocess, "transforms", [preprocess]):
        text = getattr(t, "__name__", None) or repr(t)
        parts.append(re.sub(r" at 0x[0-9a-fA-F]+", "", " ".join(text.split())))
    return " | ".join(parts)
