"""Tiny random-init checkpoints, built in the test and saved to a folder (no downloads).

Each builder writes the files a real checkpoint has, so the adapters load them through their
real loading path. Other tests (image dedup) may use :func:`tiny_openclip_dir` as a stand-in
for an open_clip image model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

TINY_CLIP_NAME = "xcm-tiny-clip"
TINY_CLIP_CFG: dict[str, Any] = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def images(n: int = 3, size: int = 40, seed: int = 0) -> list[Any]:
    """``n`` distinct RGB PIL images (seeded noise plus a colour bias per image)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a = rng.integers(0, 256, (size, size + 4 * i, 3)).astype(np.int16)
        a[..., i % 3] += 60
        out.append(Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "RGB"))
    return out


TEXTS = ["a bowl of rice", "อาหาร", "ein Hund im Schnee"]


def register_tiny_openclip_config(root: Path) -> str:
    """Register the tiny config with open_clip (idempotent); returns its model name."""
    import open_clip

    if TINY_CLIP_NAME not in open_clip.list_models():
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{TINY_CLIP_NAME}.json"
        path.write_text(json.dumps(TINY_CLIP_CFG))
        open_clip.add_model_config(path)
    return TINY_CLIP_NAME


def tiny_openclip_state(root: Path, seed: int = 0) -> dict[str, Any]:
    """A random-init tiny open_clip model's state dict (seeded)."""
    import open_clip
    import torch

    name = register_tiny_openclip_config(root)
    torch.manual_seed(seed)
    model = open_clip.create_model(name, pretrained=None)
    return model.state_dict()


def tiny_openclip_dir(folder: Path, seed: int = 0, quick_gelu: bool = False) -> Path:
    """An open_clip ``local-dir:`` folder (open_clip_config.json + open_clip_model.safetensors)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = tiny_openclip_state(folder.parent / "configs", seed)
    cfg = dict(TINY_CLIP_CFG, quick_gelu=quick_gelu)
    (folder / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": cfg,
        "preprocess_cfg": {"mean": CLIP_MEAN, "std": CLIP_STD, "interpolation": "bicubic",
                           "resize_mode": "shortest"},
    }))
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "open_clip_model.safetensors"))
    return folder
