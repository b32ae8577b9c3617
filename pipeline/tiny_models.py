"""Tiny random-init checkpoints in the files a real one has (no downloads), loaded through the
real loading paths: a BGE-M3-shaped XLM-R (concept dedup) and an open_clip ViT ``local-dir:``
folder (image dedup, the evaluator); the demo's models and the tests' fixtures."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BGE_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
TINY_CLIP_NAME = "xcm-tiny-clip"
TINY_CLIP_CFG: dict[str, Any] = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def tiny_bge_m3(root: Path, corpus: list[str], hidden: int = 32) -> Path:
    """A BGE-M3-shaped random XLM-R folder (config + safetensors, a BPE tokenizer trained on
    ``corpus`` in milliseconds, ``colbert_linear.pt``, ``sparse_linear.pt``), seeded.

    ``initializer_range=0.5`` spreads the vectors (the default gives cosines near 1.0).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    root.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300,
                                                        special_tokens=BGE_SPECIALS))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>",
    ).save_pretrained(root)
    torch.manual_seed(0)
    cfg = XLMRobertaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=66,
        initializer_range=0.5, pad_token_id=tok.token_to_id("<pad>"),
        bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
    )
    XLMRobertaModel(cfg).save_pretrained(root)
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), root / "colbert_linear.pt")
    torch.save(torch.nn.Linear(hidden, 1).state_dict(), root / "sparse_linear.pt")
    return root


def register_tiny_openclip_config(root: Path) -> str:
    """Register the tiny config with open_clip (idempotent, per process); returns its name."""
    import open_clip

    if TINY_CLIP_NAME not in open_clip.list_models():
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{TINY_CLIP_NAME}.json"
        path.write_text(json.dumps(TINY_CLIP_CFG))
        open_clip.add_model_config(path)
    return TINY_CLIP_NAME


def tiny_openclip_state(root: Path, seed: int = 0) -> dict[str, Any]:
    """A random-init tiny open_clip model's state dict (seeded); ``root`` holds its config."""
    import open_clip
    import torch

    name = register_tiny_openclip_config(root)
    torch.manual_seed(seed)
    return open_clip.create_model(name, pretrained=None).state_dict()


def tiny_openclip_dir(folder: Path, seed: int = 0, quick_gelu: bool = False) -> Path:
    """An open_clip ``local-dir:`` folder (``open_clip_config.json`` +
    ``open_clip_model.safetensors``) of a random-init tiny ViT; the config registered with
    open_clip goes to ``folder.parent / "configs"``."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = tiny_openclip_state(folder.parent / "configs", seed)
    cfg = dict(TINY_CLIP_CFG, quick_gelu=quick_gelu)
    (folder / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": cfg,
        "preprocess_cfg": {"mean": CLIP_MEAN, "std": CLIP_STD, "interpolation": "bicubic",
                           "resize_mode": "shortest"},
    }))
    save_file({k: v.contiguous() for k, v in state.items()},
              str(folder / "open_clip_model.safetensors"))
    return folder
