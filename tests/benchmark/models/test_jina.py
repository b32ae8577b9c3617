"""jina-embeddings-v4 adapter on a tiny checkpoint in jina's layout; jina-clip-v2 remote code."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmark.models import hub
from benchmark.registry import load_model
from tests.benchmark.models.checks import check_adapter
from tests.benchmark.models.tiny import TEXTS, images, tiny_jina_v4_dir

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def jina_dir(tmp_path_factory):
    return tiny_jina_v4_dir(tmp_path_factory.mktemp("jina") / "tiny-jina-v4")


def _load(folder, **kw):
    from benchmark.models.jina import JinaV4Model

    return JinaV4Model(name="jina-tiny", checkpoint=str(folder), device="cpu", **kw)


def test_jina_single_and_multi_vector(jina_dir):
    single = _load(jina_dir)
    check_adapter(single, dim=32)
    multi = _load(jina_dir, multi_vector=True)
    out = check_adapter(multi, dim=16, multi=True)
    assert multi.spec.multi_vector and not single.spec.multi_vector
    assert single.lora_modules == 2 * 3 + 1
    assert out["texts"].vectors.shape[-1] == 16
    assert single.conventions("text", "query")["prefix"] == "Query: "
    assert single.conventions("text", "document")["prefix"] == "Passage: "
    assert "Describe the image." in single.conventions("image", "document")["prompt"]


def _hooked_reference(m, base_dir, task):
    """Unmerged LoRA: the base weights plus forward hooks adding alpha/r * B(A(x))."""
    from safetensors.torch import load_file

    from benchmark.models import qwenvl

    ref, _, _ = qwenvl.load_backbone(base_dir, dtype="float32", device="cpu", arch="qwen2_5_vl")
    cfg = json.loads((base_dir / "adapters" / "adapter_config.json").read_text())
    scale = cfg["lora_alpha"] / cfg["r"]
    ad = load_file(str(base_dir / "adapters" / "adapter_model.safetensors"))
    mods = dict(ref.named_modules())
    n = 0
    for k, a in ad.items():
        if f".lora_A.{task}." not in k or "projector" in k:
            continue
        path = qwenvl.normalize_key(k.split(".lora_A.")[0])
        b = ad[k.replace("lora_A", "lora_B")]
        mods[path].register_forward_hook(lambda mod, inp, out, a=a, b=b: out + scale * (inp[0] @ a.T @ b.T))
        n += 1
    assert n == 6
    return ref


def test_jina_lora_merge_equals_unmerged_forward(jina_dir):
    import torch

    m = _load(jina_dir)
    ref = _hooked_reference(m, jina_dir, "retrieval")
    batch = m.processor(text=["Query: " + TEXTS[0]], return_tensors="pt")
    with torch.inference_mode():
        h = ref(**batch, use_cache=False).last_hidden_state[0]
    want = torch.nn.functional.normalize(h.mean(dim=0), dim=-1).numpy()
    np.testing.assert_allclose(m.encode_texts(TEXTS[:1], role="query")[0], want, atol=1e-5)


def test_jina_image_pooling_spans_vision_tokens(jina_dir):
    import torch

    m = _load(jina_dir)
    img = images(1)
    batch = m.processor(text=[m.conventions("image", "document")["prompt"]], images=img, return_tensors="pt")
    ids = batch["input_ids"][0]
    with torch.inference_mode():
        h = m.backbone(**batch, use_cache=False).last_hidden_state[0]
    s = int((ids == m._vs).nonzero()[0])
    e = int((ids == m._ve).nonzero()[0])
    assert e - s > 2 and e < len(ids) - 1  # the span excludes the trailing text tokens
    want = torch.nn.functional.normalize(h[s : e + 1].mean(dim=0), dim=-1).numpy()
    np.testing.assert_allclose(m.encode_images(img)[0], want, atol=1e-5)


def test_jina_task_and_prompt_change_embeddings(jina_dir):
    r = _load(jina_dir)
    tm = _load(jina_dir, task="text-matching")
    assert not np.allclose(r.encode_texts(TEXTS), tm.encode_texts(TEXTS), atol=1e-4)
    assert not np.allclose(r.encode_texts(TEXTS, role="query"), r.encode_texts(TEXTS, role="document"), atol=1e-4)
    with pytest.raises(ValueError, match="code"):
        _load(jina_dir, task="code")


def test_jina_truncate_dim(jina_dir):
    full = _load(jina_dir).encode_texts(TEXTS)
    short = _load(jina_dir, truncate_dim=8).encode_texts(TEXTS)
    assert short.shape == (3, 8)
    np.testing.assert_allclose(np.linalg.norm(short, axis=1), 1.0, atol=1e-5)
    ref = full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True)
    np.testing.assert_allclose(short, ref, atol=1e-5)


REMOTE_CODE = '''
import torch
from transformers import PretrainedConfig, PreTrainedModel


class FakeJinaCLIPConfig(PretrainedConfig):
    model_type = "fake-jina-clip"


class FakeJinaCLIPModel(PreTrainedModel):
    config_class = FakeJinaCLIPConfig

    def __init__(self, config):
        super().__init__(config)
        self.emb = torch.nn.EmbeddingBag(256, 8)
        self.calls = []
        self.post_init()

    def encode_text(self, texts, task=None, truncate_dim=None):
        self.calls.append(("text", task, truncate_dim))
        salt = 0 if task is None else 7
        ids = [torch.tensor([(b + salt) % 256 for b in t.encode()]) for t in texts]
        return torch.stack([self.emb(i[None])[0] for i in ids]).detach().numpy()

    def encode_image(self, images, truncate_dim=None):
        self.calls.append(("image", None, truncate_dim))
        ids = [torch.tensor(list(im.resize((4, 4)).tobytes())) for im in images]
        return torch.stack([self.emb(i[None])[0] for i in ids])
'''


def test_jina_clip_runs_remote_code_api(tmp_path):
    d = tmp_path / "fake-jina-clip"
    d.mkdir()
    (d / "modeling_fake.py").write_text(REMOTE_CODE)
    (d / "config.json").write_text(json.dumps({
        "model_type": "fake-jina-clip", "architectures": ["FakeJinaCLIPModel"],
        "auto_map": {"AutoConfig": "modeling_fake.FakeJinaCLIPConfig",
                     "AutoModel": "modeling_fake.FakeJinaCLIPModel"},
    }))
    import torch
    from safetensors.torch import save_file

    save_file({"emb.weight": torch.randn(256, 8, generator=torch.Generator().manual_seed(0))},
              str(d / "model.safetensors"))
    from benchmark.models.jina import JinaCLIPModel

    m = JinaCLIPModel(name="jina-clip-fake", checkpoint=str(d), device="cpu")
    check_adapter(m, dim=8)
    assert ("text", "retrieval.query", None) in m.model.calls
    m.encode_texts(TEXTS, role="document")
    assert ("text", None, None) in m.model.calls  # documents: no task
    assert m.conventions("text", "query")["task"] == "retrieval.query"


def test_jina_registered_names_fail_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name, repo in (("jina-v4", "jinaai/jina-embeddings-v4"), ("jina-clip-v2", "jinaai/jina-clip-v2")):
        with pytest.raises(hub.CheckpointNotFound, match=repo):
            load_model(name, device="cpu")


def test_jina_document_prompt_option(jina_dir):
    a = _load(jina_dir, document_prompt="query")
    assert a.conventions("text", "document")["prefix"] == "Query: "
    np.testing.assert_allclose(a.encode_texts(TEXTS, role="document"), a.encode_texts(TEXTS, role="query"))
    with pytest.raises(ValueError, match="document_prompt"):
        _load(jina_dir, document_prompt="passages")


def test_jina_autocast_bfloat16_as_the_remote_code(jina_dir):
    """autocast="bfloat16": unit vectors within bf16 rounding of the float32 ones, but not
    equal to them (the arithmetic really ran in bfloat16); a bad dtype is one line."""
    plain = _load(jina_dir)
    bf = _load(jina_dir, autocast="bfloat16")
    for enc in (lambda m: m.encode_texts(TEXTS), lambda m: m.encode_images(images(2))):
        a, b = enc(plain), enc(bf)
        np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
        assert 0 < np.abs(a - b).max() < 0.05
    with pytest.raises(ValueError, match="autocast"):
        _load(jina_dir, autocast="int8")
