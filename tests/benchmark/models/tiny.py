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


# -- Qwen2-VL / Qwen2.5-VL --------------------------------------------------------------------

QWEN_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>",
]


def tiny_qwen_tokenizer(folder: Path) -> Any:
    """A byte-level BPE Qwen2 tokenizer (trained on a few strings) with Qwen's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=QWEN_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    corpus = TEXTS + ["Query: ", "Passage: ", "Describe the image.", "Find an image that matches",
                      "user\n", "system\n", "You are a helpful assistant."]
    tok.train_from_iterator(corpus * 5, trainer)
    fast = Qwen2TokenizerFast(
        tokenizer_object=tok, unk_token=None, bos_token=None, eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    fast.save_pretrained(folder)
    return Qwen2TokenizerFast.from_pretrained(folder)


def _qwen_text_cfg(vocab: int, ids: dict[str, int]) -> dict[str, Any]:
    return dict(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=2048,
        rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]}, rope_theta=10000.0,
        initializer_range=0.5,
    )


def tiny_qwen_dir(folder: Path, version: str = "2.5", seed: int = 0, max_pixels: int = 16 * 28 * 28) -> Path:
    """A tiny Qwen2-VL (``version='2'``) or Qwen2.5-VL (``'2.5'``) checkpoint folder:
    config.json, model.safetensors (a ``*ForConditionalGeneration``), tokenizer, processor."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    folder.mkdir(parents=True, exist_ok=True)
    tok = tiny_qwen_tokenizer(folder)
    ids = {t: tok.convert_tokens_to_ids(t) for t in QWEN_SPECIAL}
    special = dict(
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    if version == "2":
        cfg = Qwen2VLConfig(
            text_config=_qwen_text_cfg(len(tok), ids),
            vision_config=dict(depth=2, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2,
                               patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
            **special,
        )
        model = Qwen2VLForConditionalGeneration(cfg)
        proc_cls = Qwen2VLProcessor
    else:
        cfg = Qwen2_5_VLConfig(
            text_config=_qwen_text_cfg(len(tok), ids),
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                               out_hidden_size=32, patch_size=14, spatial_merge_size=2,
                               temporal_patch_size=2, window_size=112, fullatt_block_indexes=[1]),
            **special,
        )
        model = Qwen2_5_VLForConditionalGeneration(cfg)
        proc_cls = Qwen2_5_VLProcessor
    model.save_pretrained(folder)
    ip = Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=max_pixels)
    vp = Qwen2VLVideoProcessor()
    proc_cls(image_processor=ip, tokenizer=tok, video_processor=vp).save_pretrained(folder)
    return folder
