"""transformers dual encoders (Chinese-CLIP, SigLIP 2, SigLIP) on tiny random checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.models import hub
from benchmark.registry import load_model
from tests.benchmark.models.checks import check_adapter
from tests.benchmark.models.tiny import TEXTS, tiny_chinese_clip_dir, tiny_siglip_dir

pytest.importorskip("transformers")


def test_chinese_clip(tmp_path):
    d = tiny_chinese_clip_dir(tmp_path / "cnclip")
    m = load_model(f"hf_clip:{d}", device="cpu")
    assert m.family == "chinese_clip"
    check_adapter(m, dim=16)
    conv = m.conventions("text", "query")
    assert conv["padding"] is True and conv["max_length"] == 128
    assert m.conventions("image", "document")["size"] == {"height": 32, "width": 32}


@pytest.mark.parametrize("version", ["2", "1"])
def test_siglip(tmp_path, version):
    d = tiny_siglip_dir(tmp_path / f"siglip{version}", version=version)
    m = load_model(f"hf_clip:{d}", device="cpu")
    assert m.family == ("siglip2" if version == "2" else "siglip")
    check_adapter(m, dim=32)
    conv = m.conventions("text", "query")
    assert conv["padding"] == "max_length" and conv["max_length"] == 64
    if version == "2":
        assert m.conventions("image", "document")["max_num_patches"] == 16
    # max_length padding is part of the model: a longest-padded batch differs
    tok = m.processor.tokenizer(TEXTS[:1], padding="max_length", max_length=64, return_tensors="pt")
    assert tok["input_ids"].shape[1] == 64


def test_siglip_padding_changes_vectors(tmp_path):
    from benchmark.models.hf_clip import HFDualEncoder

    d = tiny_siglip_dir(tmp_path / "s2", version="2")
    a = HFDualEncoder(name="a", checkpoint=str(d), device="cpu")
    b = HFDualEncoder(name="b", checkpoint=str(d), device="cpu", text_padding=True)
    assert not np.allclose(a.encode_texts(TEXTS), b.encode_texts(TEXTS), atol=1e-4)


def test_hf_registered_names_fail_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.CheckpointNotFound, match="OFA-Sys/chinese-clip-vit-large-patch14"):
        load_model("chinese-clip-l14", device="cpu")
    with pytest.raises(hub.CheckpointNotFound, match="google/siglip2"):
        load_model("siglip2-base-256", device="cpu")


def test_hf_clip_model(tmp_path):
    from tests.benchmark.models.tiny import tiny_hf_clip_dir

    d = tiny_hf_clip_dir(tmp_path / "clip")
    m = load_model(f"hf_clip:{d}", device="cpu")
    assert m.family == "clip"
    check_adapter(m, dim=16)
    assert m.conventions("text", "query")["max_length"] == 77
