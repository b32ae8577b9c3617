"""ColQwen2.5 adapter: tiny Qwen2.5-VL base + a LoRA adapter made with peft in the test."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from benchmark.embeddings import MultiVector
from tests.benchmark.models.checks import check_adapter
from tests.benchmark.models.tiny import TEXTS, tiny_qwen_dir

pytest.importorskip("peft")

TARGETS = r"(.*(language_model).*(down_proj|gate_proj|up_proj|k_proj|q_proj|v_proj|o_proj).*$)"
PROC_FILES = ("tokenizer.json", "tokenizer_config.json", "processor_config.json")


def _peft_colqwen(base_dir, adapter_dir):
    """colpali's ColQwen2_5 layout (a Qwen2_5_VLModel + custom_text_proj) wrapped by peft with
    random LoRA weights, saved as an adapter folder; returns the peft model (reference)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2_5_VLModel

    from benchmark.models import qwenvl

    net, _, _ = qwenvl.load_backbone(base_dir, dtype="float32", device="cpu", arch="qwen2_5_vl")
    torch.manual_seed(3)
    net.custom_text_proj = torch.nn.Linear(32, 128)
    assert isinstance(net, Qwen2_5_VLModel)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, modules_to_save=["custom_text_proj"])
    peft_model = get_peft_model(net, cfg)
    for name, p in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    peft_model.peft_config["default"].base_model_name_or_path = str(base_dir)
    peft_model.save_pretrained(str(adapter_dir))
    for f in PROC_FILES:
        shutil.copy(base_dir / f, adapter_dir / f)
    return peft_model.eval()


@pytest.fixture(scope="module")
def colqwen(tmp_path_factory):
    root = tmp_path_factory.mktemp("colqwen")
    base = tiny_qwen_dir(root / "base", version="2.5", seed=1)
    peft_model = _peft_colqwen(base, root / "adapter")
    return root / "adapter", peft_model


def _load(folder, **kw):
    from benchmark.models.colqwen import ColQwenModel

    return ColQwenModel(name="colqwen-tiny", checkpoint=str(folder), device="cpu", **kw)


def test_colqwen_multivector_and_maxsim(colqwen):
    m = _load(colqwen[0])
    out = check_adapter(m, dim=128, multi=True)
    t = out["texts"]
    # query tokens: prefix + text + 10 augmentation tokens, no padding kept
    n_tokens = [len(m.processor.tokenizer("Query: " + s + "<|endoftext|>" * 10)["input_ids"]) for s in TEXTS]
    assert list(t.lengths) == n_tokens
    assert m.load_info["lora_modules"] == 2 * 7
    assert m.conventions("text", "query")["query_augmentation"] == "<|endoftext|>" * 10


def test_colqwen_matches_peft_forward(colqwen):
    """The merged LoRA gives peft's unmerged outputs (same prompt, same head)."""
    import torch

    folder, ref = colqwen
    m = _load(folder)
    batch = m.processor(text=["Query: " + TEXTS[0] + "<|endoftext|>" * 10], return_tensors="pt")
    with torch.inference_mode():
        h = ref(**batch, use_cache=False).last_hidden_state
        p = ref.base_model.model.custom_text_proj(h)[0]
    p = torch.nn.functional.normalize(p, dim=-1).numpy()
    got = m.encode_texts(TEXTS[:1])
    assert isinstance(got, MultiVector)
    np.testing.assert_allclose(got.to_list()[0], p, atol=1e-4)
    # and the LoRA matters: the base alone would differ
    m_base = ref.base_model.model
    with ref.disable_adapter(), torch.inference_mode():
        h0 = m_base(**batch, use_cache=False).last_hidden_state
    assert not np.allclose(h0.numpy(), h.numpy(), atol=1e-3)


def test_colqwen_old_colpali_key_layout(colqwen, tmp_path):
    """Adapters trained with colpali-engine <= 0.3.9 (ColQwen2_5 subclassing
    Qwen2_5_VLForConditionalGeneration) name LoRA weights base_model.model.model.layers.*."""
    from safetensors.torch import load_file, save_file

    folder, _ = colqwen
    d = tmp_path / "old"
    shutil.copytree(folder, d)
    st = load_file(str(d / "adapter_model.safetensors"))
    st = {k.replace("base_model.model.language_model.", "base_model.model.model."): v for k, v in st.items()}
    save_file(st, str(d / "adapter_model.safetensors"))
    a, b = _load(folder), _load(d)
    np.testing.assert_allclose(a.encode_texts(TEXTS).vectors, b.encode_texts(TEXTS).vectors, atol=1e-6)


def test_colqwen_adapter_key_that_lands_nowhere_is_an_error(colqwen, tmp_path):
    from safetensors.torch import load_file, save_file

    folder, _ = colqwen
    d = tmp_path / "bad"
    shutil.copytree(folder, d)
    st = load_file(str(d / "adapter_model.safetensors"))
    k = next(k for k in st if "lora_A" in k and "q_proj" in k)
    st[k.replace("q_proj", "zz_proj")] = st[k].clone()
    kb = k.replace("lora_A", "lora_B")
    st[kb.replace("q_proj", "zz_proj")] = st[kb].clone()
    save_file(st, str(d / "adapter_model.safetensors"))
    m = _load(d)  # weights load lazily: the error comes with the first encode
    with pytest.raises(ValueError, match="zz_proj"):
        m.encode_texts(TEXTS[:1])


def test_colqwen_max_visual_tokens_recorded(colqwen):
    m = _load(colqwen[0], max_num_visual_tokens=8)
    assert m.conventions("image", "document")["max_pixels"] == 8 * 28 * 28
    cfg = json.loads((colqwen[0] / "adapter_config.json").read_text())
    assert cfg["r"] == 4


def test_colqwen_weights_load_only_when_encoding(colqwen):
    """A run scored from cached embeddings builds the adapter (spec, conventions, similarity)
    but never needs the weights."""
    m = _load(colqwen[0])
    assert m._net is None
    m.conventions("image", "document")
    m.similarity(MultiVector.from_list([np.ones((2, 4), np.float32)]),
                 MultiVector.from_list([np.ones((3, 4), np.float32)]))
    assert m._net is None
    m.encode_texts(TEXTS[:1])
    assert m._net is not None
