"""M-CLIP: tiny XLM-R text tower (multilingual-clip layout) + tiny open_clip image tower."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.models import hub
from benchmark.registry import load_model
from tests.benchmark.models.checks import check_adapter
from tests.benchmark.models.tiny import TEXTS, tiny_mclip_dir, tiny_openclip_dir

pytest.importorskip("multilingual_clip")


@pytest.fixture(scope="module")
def towers(tmp_path_factory):
    root = tmp_path_factory.mktemp("mclip")
    mclip, base = tiny_mclip_dir(root / "M-CLIP-tiny")
    clip = tiny_openclip_dir(root / "clip-tiny", seed=2)
    return mclip, base, clip


def _load(towers, **kw):
    from benchmark.models.mclip import MCLIPModel

    mclip, _, clip = towers
    return MCLIPModel(name="mclip-tiny", checkpoint=str(mclip), image_model=f"local-dir:{clip}",
                      device="cpu", **kw)


def test_mclip_encodes_and_scores(towers):
    m = _load(towers)
    check_adapter(m, dim=32)
    assert m.spec.extra["image_model"].startswith("local-dir:")
    assert m.conventions("image", "document")["image_revision"].startswith("sha256:")
    assert m.conventions("text", "query")["max_length"] == 64


def test_mclip_text_tower_matches_multilingual_clip_package(towers):
    """The package's own MultilingualCLIP (built with its config + state dict, the workaround for
    transformers 5) gives the same text vectors, up to normalisation."""
    import torch
    from multilingual_clip.Config_MCLIP import MCLIPConfig
    from multilingual_clip.pt_multilingual_clip import MultilingualCLIP
    from transformers import AutoTokenizer

    mclip, base, _ = towers
    cfg = MCLIPConfig.from_pretrained(str(mclip))
    cfg.modelBase = str(base)
    ref = MultilingualCLIP(cfg)
    ref.load_state_dict(torch.load(mclip / "pytorch_model.bin", weights_only=True))
    ref.eval()
    with torch.inference_mode():
        want = ref.forward(TEXTS, AutoTokenizer.from_pretrained(str(mclip))).numpy()
    want = want / np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(_load(towers).encode_texts(TEXTS), want, atol=1e-5)


def test_mclip_dimension_mismatch_is_an_error(towers, tmp_path):
    mclip, _, _ = towers
    other, _ = tiny_mclip_dir(tmp_path / "M-CLIP-48", image_dim=48)
    from benchmark.models.mclip import MCLIPModel

    with pytest.raises(ValueError, match="own image tower"):
        MCLIPModel(name="x", checkpoint=str(other), image_model=f"local-dir:{towers[2]}", device="cpu")


def test_mclip_registered_names_fail_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(hub.WEIGHTS_ENV, raising=False)
    with pytest.raises(hub.CheckpointNotFound, match="M-CLIP/XLM-Roberta-Large-Vit-B-16Plus"):
        load_model("mclip-xlmr-b16plus", device="cpu")
