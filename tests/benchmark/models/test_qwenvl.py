"""The shared Qwen-VL loader equals transformers' own from_pretrained on the same checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.models import qwenvl
from tests.benchmark.models.tiny import TEXTS, images, tiny_qwen_dir

pytest.importorskip("transformers")


@pytest.mark.parametrize("version", ["2", "2.5"])
def test_load_backbone_matches_from_pretrained(tmp_path, version):
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2VLForConditionalGeneration

    d = tiny_qwen_dir(tmp_path / "q", version=version)
    arch = "qwen2_vl" if version == "2" else "qwen2_5_vl"
    ours, rest, _ = qwenvl.load_backbone(d, dtype="float32", device="cpu", arch=arch)
    assert set(rest) <= {"lm_head.weight"}
    cls = Qwen2VLForConditionalGeneration if version == "2" else Qwen2_5_VLForConditionalGeneration
    ref = cls.from_pretrained(str(d), dtype=torch.float32).model.eval()
    proc = qwenvl.load_processor(d, arch)
    batch = proc(text=["<|vision_start|><|image_pad|><|vision_end|>" + TEXTS[0]], images=images(1),
                 return_tensors="pt")
    with torch.inference_mode():
        a = ours(**batch).last_hidden_state
        b = ref(**batch).last_hidden_state
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_normalize_key_layouts():
    n = qwenvl.normalize_key
    assert n("model.layers.0.mlp.up_proj.weight") == "language_model.layers.0.mlp.up_proj.weight"
    assert n("model.language_model.norm.weight") == "language_model.norm.weight"
    assert n("model.visual.merger.mlp.0.weight") == "visual.merger.mlp.0.weight"
    assert n("visual.blocks.0.attn.qkv.weight") == "visual.blocks.0.attn.qkv.weight"
    assert n("base_model.model.model.layers.1.self_attn.q_proj") == "language_model.layers.1.self_attn.q_proj"
    assert n("base_model.model.custom_text_proj.weight") == "custom_text_proj.weight"
    assert n("multi_vector_projector.bias") == "multi_vector_projector.bias"
    assert n("lm_head.weight") == "lm_head.weight"
