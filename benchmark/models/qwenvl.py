"""Shared Qwen2-VL / Qwen2.5-VL machinery for GME, ColQwen2.5 and jina-embeddings-v4.

Their remote code does not run on transformers 5; here a Qwen-VL backbone from transformers'
own classes, loaded strictly (a missing or unexpected weight is an error), LoRA merged as
``peft``'s ``merge_and_unload``, and transformers' processors (never a repo's class).
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any

from benchmark.embeddings import MultiVector
from benchmark.models.base import torch_dtype
from benchmark.models.hub import ModelLoadError, read_safetensors

log = logging.getLogger(__name__)

ARCHS = ("qwen2_vl", "qwen2_5_vl")
_CONFIG_DROP = {"model_type", "auto_map", "architectures", "transformers_version", "torch_dtype",
                "dtype", "_name_or_path"}
_KEY_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^base_model\.model\."), ""),
    (re.compile(r"^model\.language_model\."), "language_model."),
    (re.compile(r"^model\.visual\."), "visual."),
    (re.compile(r"^model\.(layers|embed_tokens|norm|rotary_emb)\b"), r"language_model.\1"),
    (re.compile(r"^language_model\.model\."), "language_model."),
    (re.compile(r"^model\."), ""),
]


def normalize_key(key: str) -> str:
    """A checkpoint weight name in the backbone's naming (``visual.*``, ``language_model.*``)."""
    for pat, rep in _KEY_RULES:
        key = pat.sub(rep, key, count=1)
    return key


def read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{folder}: no config.json (not a transformers checkpoint folder)")
    return json.loads(path.read_text(encoding="utf-8"))


def detect_arch(cfg: dict[str, Any]) -> str:
    """``qwen2_vl`` or ``qwen2_5_vl`` from a config dict (custom model types fall back on the
    vision config: Qwen2.5-VL's has ``fullatt_block_indexes``)."""
    mt = cfg.get("model_type", "")
    if mt in ARCHS:
        return mt
    vision = cfg.get("vision_config") or {}
    return "qwen2_5_vl" if "fullatt_block_indexes" in vision or "window_size" in vision else "qwen2_vl"


def read_state(folder: Path) -> dict[str, Any]:
    """A checkpoint folder's tensors under normalised names."""
    return {normalize_key(k): v for k, v in read_safetensors(folder).items()}


def load_backbone(
    folder: Path, *, dtype: str, device: str, arch: str | None = None,
    state: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, Any], Any]:
    """(backbone, leftover tensors, config) of a checkpoint; ``state`` replaces its weights."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLModel, Qwen2VLConfig, Qwen2VLModel
    from transformers.initialization import no_init_weights

    raw = read_config(folder)
    arch = arch or detect_arch(raw)
    config = (Qwen2_5_VLConfig if arch == "qwen2_5_vl" else Qwen2VLConfig)(
        **{k: v for k, v in raw.items() if k not in _CONFIG_DROP})
    cls = Qwen2_5_VLModel if arch == "qwen2_5_vl" else Qwen2VLModel
    tdtype = torch_dtype(dtype)
    # Built directly on the target device and dtype, uninitialised (every weight is loaded
    # below, strictly): host memory stays at one copy of the checkpoint.
    import torch

    with no_init_weights(), torch.device(device):
        model = cls._from_config(config, dtype=tdtype)
    state = dict(state) if state is not None else read_state(folder)
    own = model.state_dict()
    mine = {k: state.pop(k) for k in list(state) if k in own}
    missing = sorted(set(own) - set(mine))
    if missing:
        raise ModelLoadError(
            f"{folder}: {len(missing)} backbone weights missing from the checkpoint "
            f"(first: {missing[:3]}); not a {arch} checkpoint of this layout"
        )
    model.load_state_dict(mine, strict=True)
    model.to(device=device, dtype=tdtype).eval()
    return model, state, config


def _pattern_value(patterns: dict[str, Any], name: str, default: Any) -> Any:
    """PEFT's rank/alpha pattern lookup: the first pattern that matches the module name's tail."""
    for pat, val in patterns.items():
        if re.match(rf"(.*\.)?({pat})$", name):
            return val
    return default


def read_adapter(adapter_dir: Path, adapter_name: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(LoRA pairs by module name -> (A, B, scale), other tensors by name) of a PEFT folder."""
    from safetensors.torch import load_file

    cfg = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    if cfg.get("use_dora"):
        raise ModelLoadError(f"{adapter_dir}: DoRA adapters are not supported")
    if cfg.get("fan_in_fan_out"):
        raise ModelLoadError(f"{adapter_dir}: fan_in_fan_out adapters are not supported")
    path = adapter_dir / "adapter_model.safetensors"
    if not path.is_file():
        raise ModelLoadError(f"{adapter_dir}: no adapter_model.safetensors")
    tensors = load_file(str(path))
    r0, alpha0 = int(cfg["r"]), float(cfg.get("lora_alpha", cfg["r"]))
    lora_re = re.compile(r"^(?P<mod>.+)\.lora_(?P<ab>[AB])(?:\.(?P<name>[^.]+))?\.weight$")
    pairs: dict[str, dict[str, Any]] = {}
    other: dict[str, Any] = {}
    for key, t in tensors.items():
        m = lora_re.match(key)
        if not m:
            other[normalize_key(key)] = t
            continue
        name = m.group("name")
        if name is not None and adapter_name is not None and name != adapter_name:
            continue
        mod = normalize_key(m.group("mod"))
        pairs.setdefault(mod, {})[m.group("ab")] = t
    out: dict[str, Any] = {}
    for mod, ab in pairs.items():
        if set(ab) != {"A", "B"}:
            raise ModelLoadError(f"{adapter_dir}: LoRA pair for {mod} is incomplete ({sorted(ab)})")
        r = int(_pattern_value(cfg.get("rank_pattern") or {}, mod, r0))
        alpha = float(_pattern_value(cfg.get("alpha_pattern") or {}, mod, alpha0))
        scale = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
        out[mod] = (ab["A"], ab["B"], scale)
    if not out:
        raise ModelLoadError(f"{adapter_dir}: no LoRA weights{f' for adapter {adapter_name!r}' if adapter_name else ''}")
    return out, other


def merged_state(
    base: dict[str, Any], adapter_dir: Path, adapter_name: str | None = None,
) -> tuple[dict[str, Any], int]:
    """``base`` (normalised names -> tensors) with the adapter's LoRA merged and its saved
    modules (``modules_to_save``: projection heads) replacing the base ones; (state, #merged)."""
    import torch

    pairs, other = read_adapter(adapter_dir, adapter_name)
    out = dict(base)
    for mod, (a, b, scale) in pairs.items():
        key = f"{mod}.weight"
        if key not in out:
            raise ModelLoadError(f"{adapter_dir}: LoRA targets {mod}, which the base model lacks")
        w = out[key]
        delta = (b.to(torch.float32) @ a.to(torch.float32)) * scale
        if delta.shape != w.shape:
            raise ModelLoadError(f"{adapter_dir}: LoRA for {mod} has shape {tuple(delta.shape)}, weight {tuple(w.shape)}")
        out[key] = (w.to(torch.float32) + delta).to(w.dtype)
    for key, t in other.items():
        # modules_to_save are stored as ".modules_to_save.<name>." by some PEFT versions
        clean = re.sub(r"\.modules_to_save\.[^.]+\.", ".", key)
        clean = re.sub(r"\.original_module\.", ".", clean)
        out[clean] = t
    return out, len(pairs)


def load_processor(
    folder: Path, arch: str, min_pixels: int | None = None, max_pixels: int | None = None,
    image_backend: str | None = "pil",
) -> Any:
    """transformers' Qwen-VL processor with pixel bounds; ``image_backend="pil"``: the PIL one
    the models were published with (docs/models.md)."""
    from transformers import AutoImageProcessor, Qwen2_5_VLProcessor, Qwen2VLProcessor

    cls = Qwen2_5_VLProcessor if arch == "qwen2_5_vl" else Qwen2VLProcessor
    proc = cls.from_pretrained(str(folder))
    if image_backend is not None:
        proc.image_processor = AutoImageProcessor.from_pretrained(str(folder), backend=image_backend)
    size = dict(proc.image_processor.size or {})
    if min_pixels is not None:
        size["shortest_edge"] = int(min_pixels)
    if max_pixels is not None:
        size["longest_edge"] = int(max_pixels)
    proc.image_processor.size = size
    return proc


def pixel_bounds(processor: Any) -> dict[str, Any]:
    """The image processor's class and (min_pixels, max_pixels), which set the number of
    image tokens: what shapes an image embedding besides the prompt."""
    size = processor.image_processor.size or {}
    return {"min_pixels": int(size.get("shortest_edge", 0)), "max_pixels": int(size.get("longest_edge", 0)),
            "image_processor": type(processor.image_processor).__name__}


def rgb(images: list[Any]) -> list[Any]:
    return [im.convert("RGB") for im in images]


def load_head(rest: dict[str, Any], name: str, *, device: str, dtype: Any, what: str) -> Any:
    """The ``torch.nn.Linear`` saved under ``name.`` among a checkpoint's leftover weights."""
    import torch

    w = rest.get(f"{name}.weight")
    if w is None:
        raise ModelLoadError(f"{what}: no {name} weights in the checkpoint")
    head = torch.nn.Linear(w.shape[1], w.shape[0], bias=f"{name}.bias" in rest)
    head.load_state_dict({k.split(".")[-1]: v for k, v in rest.items() if k.startswith(name + ".")})
    return head.to(device=device, dtype=dtype).eval()


def last_hidden(backbone: Any, batch: Any, device: str) -> tuple[Any, dict[str, Any]]:
    """(last hidden states, the inputs on ``device``) of a processor batch."""
    inputs = {k: v.to(device) for k, v in batch.items()}
    if "pixel_values" in inputs:
        inputs["pixel_values"] = inputs["pixel_values"].to(backbone.dtype)
    return backbone(**inputs, use_cache=False).last_hidden_state, inputs


def token_vectors(proj: Any, attention_mask: Any, normalize_dtype: str = "float32") -> MultiVector:
    """Per-token projections L2-normalised (in ``normalize_dtype``), padding tokens dropped."""
    import torch

    if normalize_dtype == "model":
        proj = (proj / proj.norm(dim=-1, keepdim=True)).float()
    else:
        proj = torch.nn.functional.normalize(proj.float(), dim=-1)
    keep = attention_mask.bool()
    return MultiVector.from_list([proj[i][keep[i]].cpu().numpy() for i in range(proj.shape[0])])
