"""open_clip family through its real loading paths on a tiny random-init model."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmark.models import hub
from benchmark.registry import load_model
from tests.benchmark.models.checks import check_adapter
from tests.benchmark.models.tiny import (
    TEXTS,
    images,
    register_tiny_openclip_config,
    tiny_openclip_dir,
    tiny_openclip_state,
)

pytest.importorskip("open_clip")


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return tiny_openclip_dir(tmp_path_factory.mktemp("oc") / "tiny-clip")


def test_local_dir_loads_and_encodes(clip_dir):
    m = load_model(f"open_clip:local-dir:{clip_dir}", device="cpu")
    assert m.spec.family == "open_clip" and m.spec.revision.startswith("sha256:")
    out = check_adapter(m, dim=32)
    # scores are cosines of unit vectors
    assert (np.abs(out["scores"]) <= 1.0 + 1e-5).all()
    conv = m.conventions("image", "document")
    assert "Normalize" in conv["preprocess"] and "0x" not in conv["preprocess"]
    assert m.conventions("text", "query")["context_length"] == 77


def test_same_weights_same_vectors_across_loads(clip_dir):
    a = load_model(f"open_clip:local-dir:{clip_dir}", device="cpu")
    b = load_model(f"open_clip:local-dir:{clip_dir}", device="cpu")
    assert a.spec.revision == b.spec.revision
    np.testing.assert_array_equal(a.encode_texts(TEXTS), b.encode_texts(TEXTS))


def test_architecture_with_weights_file_matches_local_dir(clip_dir, tmp_path):
    name = register_tiny_openclip_config(tmp_path / "cfg")
    weights = clip_dir / "open_clip_model.safetensors"
    a = load_model(f"open_clip:{name}/{weights}", device="cpu")
    b = load_model(f"open_clip:local-dir:{clip_dir}", device="cpu")
    np.testing.assert_allclose(a.encode_texts(TEXTS), b.encode_texts(TEXTS), atol=1e-6)


def test_pretrained_tag_resolves_through_weights_dir(tmp_path, monkeypatch):
    """A (model, tag) pair resolves its hub repo via $XCM_WEIGHTS_DIR, with the tag's QuickGELU
    and preprocessing applied (open_clip itself would only warn about QuickGELU)."""
    import open_clip
    from open_clip import pretrained as P
    from safetensors.torch import save_file

    name = register_tiny_openclip_config(tmp_path / "cfg")
    monkeypatch.setitem(P._PRETRAINED, name, {"tiny": P._pcfg(
        hf_hub="xcm-test/tiny-clip.tiny/", quick_gelu=True, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25),
    )})
    repo = tmp_path / "weights" / "xcm-test" / "tiny-clip.tiny"
    repo.mkdir(parents=True)
    state = tiny_openclip_state(tmp_path / "cfg", seed=1)
    save_file({k: v.contiguous() for k, v in state.items()}, str(repo / "open_clip_model.safetensors"))
    monkeypatch.setenv(hub.WEIGHTS_ENV, str(tmp_path / "weights"))
    m = load_model(f"open_clip:{name}/tiny", device="cpu")
    assert m.spec.revision == f"open_clip:{name}/tiny"
    assert isinstance(m.model.visual.transformer.resblocks[0].mlp.gelu, open_clip.model.QuickGELU)
    assert "0.25" in m.conventions("image", "document")["preprocess"]
    check_adapter(m, dim=32)


def test_missing_weights_offline_fail_fast_with_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(hub.WEIGHTS_ENV, raising=False)
    t0 = time.perf_counter()
    with pytest.raises(hub.CheckpointNotFound) as e:
        load_model("clip-l14", device="cpu")
    assert time.perf_counter() - t0 < 5
    msg = str(e.value)
    assert "\n" not in msg
    assert "timm/vit_large_patch14_clip_224.openai" in msg
    assert "HF_HUB_OFFLINE=1" in msg and hub.WEIGHTS_ENV in msg and "hf download timm/" in msg


def test_bad_checkpoint_strings(tmp_path):
    with pytest.raises(ValueError, match="MODEL/PRETRAINED"):
        load_model("open_clip:ViT-L-14", device="cpu")
    with pytest.raises(hub.CheckpointNotFound, match="open_clip_config.json"):
        load_model(f"open_clip:local-dir:{tmp_path}", device="cpu")


def test_images_of_other_modes_are_converted(clip_dir):
    m = load_model(f"open_clip:local-dir:{clip_dir}", device="cpu")
    rgb = images(1)[0]
    a = m.encode_images([rgb.convert("RGBA")])
    b = m.encode_images([rgb])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_missing_library_names_the_extra(monkeypatch):
    import importlib.util

    from benchmark.registry import RegistryError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "open_clip" else real(n, *a))
    with pytest.raises(RegistryError) as e:
        load_model("open_clip:ViT-B-32/openai", device="cpu")
    assert "pip install -e '.[openclip]'" in str(e.value) and "\n" not in str(e.value)


def test_cli_prints_one_line_for_missing_weights(monkeypatch, capsys, tmp_path):
    from benchmark import cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc = cli.main(["run", "--model", "clip-l14", "--task", "3xcm", "--device", "cpu",
                   "--output-dir", str(tmp_path), "--no-cache"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "XCM_WEIGHTS_DIR" in err[0]
