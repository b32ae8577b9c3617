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

# The open_clip builders are the demo's (one place): re-exported for the tests that use them.
from pipeline.tiny_models import (  # noqa: F401
    CLIP_MEAN,
    CLIP_STD,
    TINY_CLIP_CFG,
    TINY_CLIP_NAME,
    register_tiny_openclip_config,
    tiny_openclip_dir,
    tiny_openclip_state,
)


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


def v452_names(state: dict) -> dict:
    """Weight names as transformers >= 4.52 saves Qwen-VL checkpoints
    (``model.*`` -> ``model.language_model.*``, ``visual.*`` -> ``model.visual.*``)."""
    renamed = {}
    for k, v in state.items():
        if k.startswith("model."):
            k = "model.language_model." + k[len("model."):]
        elif k.startswith("visual."):
            k = "model." + k
        renamed[k] = v
    return renamed


def tiny_jina_v4_dir(folder: Path, tasks: tuple[str, ...] = ("retrieval", "text-matching"), r: int = 4,
                     alpha: int = 8, seed: int = 0) -> Path:
    """A tiny checkpoint in jina-embeddings-v4's layout: a Qwen2.5-VL saved with transformers
    4.52 names (``model.language_model.*``, ``model.visual.*``) plus ``multi_vector_projector``,
    a jina config (``task_names``), and ``adapters/`` holding one LoRA per task
    (``...lora_A.<task>.weight``) on the language model's linears and the projector."""
    import torch
    from safetensors.torch import load_file, save_file

    tiny_qwen_dir(folder, version="2.5", seed=seed)
    renamed = v452_names(load_file(str(folder / "model.safetensors")))
    g = torch.Generator().manual_seed(seed + 7)
    renamed["multi_vector_projector.weight"] = torch.randn(16, 32, generator=g) * 0.3
    renamed["multi_vector_projector.bias"] = torch.randn(16, generator=g) * 0.1
    save_file(renamed, str(folder / "model.safetensors"))
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="jina-embeddings-v4", architectures=["JinaEmbeddingsV4Model"],
               task_names=list(tasks), multi_vector_projector_dim=16)
    (folder / "config.json").write_text(json.dumps(cfg))
    targets = [k[: -len(".weight")] for k in renamed
               if k.startswith("model.language_model.layers.") and k.endswith(("q_proj.weight", "v_proj.weight", "down_proj.weight"))]
    targets.append("multi_vector_projector")
    lora: dict[str, Any] = {}
    for t in tasks:
        for mod in targets:
            w = renamed[mod + ".weight"]
            lora[f"base_model.model.{mod}.lora_A.{t}.weight"] = torch.randn(r, w.shape[1], generator=g) * 0.3
            lora[f"base_model.model.{mod}.lora_B.{t}.weight"] = torch.randn(w.shape[0], r, generator=g) * 0.3
    (folder / "adapters").mkdir(exist_ok=True)
    save_file(lora, str(folder / "adapters" / "adapter_model.safetensors"))
    (folder / "adapters" / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": r, "lora_alpha": alpha, "task_names": list(tasks),
        "target_modules": "(.*(model).*(down_proj|q_proj|v_proj).*$|.*(multi_vector_projector).*$)",
    }))
    return folder


# -- transformers dual encoders ----------------------------------------------------------------


def _wordpiece_bert_tokenizer(folder: Path) -> Any:
    """A WordPiece BERT tokenizer trained on a few strings (Chinese-CLIP's tokenizer type)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(TEXTS * 5 + ["一碗米饭", "狗"], trainers.WordPieceTrainer(
        vocab_size=200, special_tokens=special, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                             cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(folder)
    return BertTokenizerFast.from_pretrained(folder)


def _unigram_tokenizer(folder: Path, cls_name: str = "GemmaTokenizerFast") -> Any:
    """A small Unigram tokenizer with <pad>/<eos>/<unk> (SigLIP's Gemma/T5-style tokenizers)."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(TEXTS * 5, trainers.UnigramTrainer(
        vocab_size=120, special_tokens=["<pad>", "<eos>", "<unk>", "<bos>"], unk_token="<unk>",
        show_progress=False))
    cls = getattr(transformers, cls_name)
    fast = cls(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
               bos_token="<bos>")
    fast.save_pretrained(folder)
    return cls.from_pretrained(folder)


def tiny_chinese_clip_dir(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import (
        ChineseCLIPConfig,
        ChineseCLIPImageProcessor,
        ChineseCLIPModel,
        ChineseCLIPProcessor,
    )

    folder.mkdir(parents=True, exist_ok=True)
    tok = _wordpiece_bert_tokenizer(folder)
    torch.manual_seed(seed)
    cfg = ChineseCLIPConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8, projection_dim=16),
        projection_dim=16,
    )
    ChineseCLIPModel(cfg).save_pretrained(folder)
    ip = ChineseCLIPImageProcessor(size={"height": 32, "width": 32}, crop_size={"height": 32, "width": 32})
    ChineseCLIPProcessor(image_processor=ip, tokenizer=tok).save_pretrained(folder)
    return folder


def tiny_siglip_dir(folder: Path, version: str = "2", seed: int = 0) -> Path:
    """SigLIP 2 NaFlex (``version='2'``, model_type siglip2) or fixed-resolution SigLIP
    (``'1'``, model_type siglip: what the fixed-resolution siglip2-* checkpoints use)."""
    import torch
    import transformers as T

    folder.mkdir(parents=True, exist_ok=True)
    tok = _unigram_tokenizer(folder)
    torch.manual_seed(seed)
    text = dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id, projection_size=32)
    vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  patch_size=8)
    if version == "2":
        cfg = T.Siglip2Config(text_config=text, vision_config=dict(vision, num_patches=16))
        T.Siglip2Model(cfg).save_pretrained(folder)
        ip = T.Siglip2ImageProcessor(patch_size=8, max_num_patches=16)
        T.Siglip2Processor(image_processor=ip, tokenizer=tok).save_pretrained(folder)
    else:
        cfg = T.SiglipConfig(text_config=text, vision_config=dict(vision, image_size=32))
        T.SiglipModel(cfg).save_pretrained(folder)
        ip = T.SiglipImageProcessor(size={"height": 32, "width": 32})
        T.SiglipProcessor(image_processor=ip, tokenizer=tok).save_pretrained(folder)
    return folder


def tiny_xlmr_tokenizer(folder: Path) -> Any:
    """An XLM-R style Unigram tokenizer (<s> <pad> </s> <unk> <mask>) trained on a few strings."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import XLMRobertaTokenizerFast

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(TEXTS * 5, trainers.UnigramTrainer(
        vocab_size=150, special_tokens=special, unk_token="<unk>", show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    fast = XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                   cls_token="<s>", sep_token="</s>")
    fast.save_pretrained(folder)
    return XLMRobertaTokenizerFast.from_pretrained(folder)


def tiny_mclip_dir(folder: Path, image_dim: int = 32, seed: int = 0) -> tuple[Path, Path]:
    """An M-CLIP checkpoint folder (config.json with model_type M-CLIP, pytorch_model.bin with
    ``transformer.*`` + ``LinearTransformation.*``, tokenizer) and the tiny XLM-R base folder."""
    import torch
    from multilingual_clip.Config_MCLIP import MCLIPConfig
    from transformers import XLMRobertaConfig, XLMRobertaModel

    folder.mkdir(parents=True, exist_ok=True)
    tok = tiny_xlmr_tokenizer(folder)
    torch.manual_seed(seed)
    xcfg = XLMRobertaConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=1,
                            intermediate_size=128, max_position_embeddings=66, type_vocab_size=1,
                            layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                            initializer_range=0.5)
    xlmr = XLMRobertaModel(xcfg)
    base = folder.parent / (folder.name + "-xlmr-base")
    xlmr.save_pretrained(base)
    lin = torch.nn.Linear(64, image_dim)
    state = {f"transformer.{k}": v for k, v in xlmr.state_dict().items()}
    state.update({f"LinearTransformation.{k}": v for k, v in lin.state_dict().items()})
    torch.save(state, folder / "pytorch_model.bin")
    MCLIPConfig(modelBase="xlm-roberta-large", transformerDimSize=64, imageDimSize=image_dim).save_pretrained(folder)
    return folder, base


def tiny_hf_clip_dir(folder: Path, seed: int = 0) -> Path:
    """A transformers CLIPModel checkpoint (the ``openai/clip-vit-*`` layout) with a small BPE
    tokenizer wrapped as CLIPTokenizerFast."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        CLIPTokenizerFast,
    )

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(TEXTS * 5, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|startoftext|>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    fast = CLIPTokenizerFast(tokenizer_object=tok, bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                             unk_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(seed)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(fast), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=77,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8),
        projection_dim=16,
    )
    CLIPModel(cfg).save_pretrained(folder)
    ip = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=ip, tokenizer=fast).save_pretrained(folder)
    return folder


def tiny_colqwen_dir(folder: Path, seed: int = 0, proj_dim: int = 128) -> Path:
    """A tiny ColQwen2.5 checkpoint with merged weights: a Qwen2.5-VL folder whose
    safetensors also hold the ``custom_text_proj`` head (the layout the adapter loads
    without a LoRA base)."""
    import torch
    from safetensors.torch import load_file, save_file

    tiny_qwen_dir(folder, version="2.5", seed=seed)
    state = load_file(str(folder / "model.safetensors"))
    g = torch.Generator().manual_seed(seed + 11)
    state["custom_text_proj.weight"] = torch.randn(proj_dim, 32, generator=g) * 0.3
    state["custom_text_proj.bias"] = torch.randn(proj_dim, generator=g) * 0.1
    save_file(state, str(folder / "model.safetensors"))
    return folder
