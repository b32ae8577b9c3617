"""GME-Qwen2-VL adapter on a tiny random Qwen2-VL checkpoint (real loading path)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.registry import load_model
from tests.benchmark.models.checks import check_adapter
from tests.benchmark.models.tiny import TEXTS, images, tiny_qwen_dir, v452_names

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory):
    return tiny_qwen_dir(tmp_path_factory.mktemp("gme") / "tiny-qwen2vl", version="2")


def _gme(folder, **kw):
    from benchmark.models.gme import GMEModel

    return GMEModel(name="gme-tiny", checkpoint=str(folder), device="cpu", **kw)


def test_gme_encodes_and_scores(qwen2_dir):
    m = _gme(qwen2_dir)
    check_adapter(m, dim=32)
    assert m.spec.revision.startswith("sha256:")
    q = m.conventions("text", "query")
    assert q["instruction"] == "Find an image that matches the given text."
    assert m.conventions("image", "document")["instruction"] == "You are a helpful assistant."
    assert m.conventions("image", "document")["min_pixels"] == 256 * 28 * 28


def test_gme_query_instruction_changes_text_embeddings(qwen2_dir):
    m = _gme(qwen2_dir)
    q = m.encode_texts(TEXTS, role="query")
    d = m.encode_texts(TEXTS, role="document")
    assert not np.allclose(q, d)
    # the pooled token is the last non-pad token: padding a batch does not change a vector
    alone = m.encode_texts(TEXTS[:1], role="query")
    np.testing.assert_allclose(alone[0], q[0], atol=1e-5)


def test_gme_last_token_is_the_pooled_hidden_state(qwen2_dir):
    """Recompute one text embedding by hand: the chat template, no position ids, last token."""
    import torch

    from benchmark.models.gme import chat

    m = _gme(qwen2_dir)
    prompt = chat("Find an image that matches the given text.", TEXTS[0])
    ids = m.processor.tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        h = m.backbone.language_model(input_ids=ids).last_hidden_state[0, -1]
    ref = torch.nn.functional.normalize(h, dim=-1).numpy()
    np.testing.assert_allclose(m.encode_texts(TEXTS[:1])[0], ref, atol=1e-5)


def test_gme_images_are_resized_like_upstream():
    from benchmark.models.gme import fetch_image, smart_resize

    assert smart_resize(40, 44) == (56, 84)  # below 4 tokens: scaled up, ceil to 28s
    assert smart_resize(280, 560) == (280, 560)
    img = fetch_image(images(1, size=100)[0])
    assert img.size[0] % 28 == 0 and img.size[1] % 28 == 0


def test_gme_loads_transformers_v452_weight_names(qwen2_dir, tmp_path):
    """Checkpoints saved by transformers >= 4.52 name weights model.language_model.* /
    model.visual.*; they load to the same vectors."""
    import shutil

    from safetensors.torch import load_file, save_file

    d = tmp_path / "v452"
    shutil.copytree(qwen2_dir, d)
    save_file(v452_names(load_file(str(d / "model.safetensors"))), str(d / "model.safetensors"))
    a, b = _gme(qwen2_dir), _gme(d)
    np.testing.assert_allclose(a.encode_images(images(2)), b.encode_images(images(2)), atol=1e-6)


def test_gme_missing_weight_is_an_error(qwen2_dir, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    d = tmp_path / "broken"
    shutil.copytree(qwen2_dir, d)
    st = load_file(str(d / "model.safetensors"))
    st.pop(next(k for k in st if k.startswith("visual.")))
    save_file(st, str(d / "model.safetensors"))
    m = _gme(d)  # weights load lazily: the error comes with the first encode
    with pytest.raises(ValueError, match="missing"):
        m.encode_texts(TEXTS[:1])


def test_gme_registered_names_fail_fast_offline(monkeypatch):
    from benchmark.models import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.CheckpointNotFound, match="Alibaba-NLP/gme-Qwen2-VL-2B-Instruct"):
        load_model("gme-qwen2-2b", device="cpu")
