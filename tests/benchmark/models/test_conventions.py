"""Conventions profiles: the paper's ten models under ``reference`` and ``authors``.

Each adapter is built through the real path (``registry.load_model(name, conventions=...)``,
the tiny checkpoint given as the caller's ``checkpoint``) and checked against its record and
against what the authors' code does: the exact prompt strings and token ids fed to the model,
the dtype of the weights, the image processor class, the scorer and the RQ1 retrieval mode.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmark import registry
from benchmark.cache import namespace
from benchmark.models import conventions as conv
from tests.benchmark.models.tiny import (
    TEXTS,
    images,
    tiny_chinese_clip_dir,
    tiny_colqwen_dir,
    tiny_hf_clip_dir,
    tiny_jina_v4_dir,
    tiny_mclip_dir,
    tiny_openclip_dir,
    tiny_qwen_dir,
)

pytest.importorskip("transformers")
pytest.importorskip("open_clip")

COLQWEN = ("colqwen2.5-v0.2", "colqwen2.5-3b-m", "colqwen2.5-7b-m")
GME = ("gme-qwen2-2b", "gme-qwen2-7b")
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("conventions")
    mclip, mclip_base = tiny_mclip_dir(root / "M-CLIP-tiny")
    return {
        "openclip": tiny_openclip_dir(root / "openclip", seed=1),
        "hf_clip": tiny_hf_clip_dir(root / "hf-clip"),
        "cn_clip": tiny_chinese_clip_dir(root / "cn-clip"),
        "mclip": mclip, "mclip_base": mclip_base,
        "mclip_image": tiny_openclip_dir(root / "mclip-image", seed=2),
        "gme": tiny_qwen_dir(root / "gme", version="2"),
        "colqwen": tiny_colqwen_dir(root / "colqwen"),
        "jina": tiny_jina_v4_dir(root / "jina"),
    }


def load(name, profile, **kw):
    return registry.load_model(name, conventions=profile, device="cpu", **kw)


def lines(prompt: str) -> str:
    """A record's prompt template as the model sees it (records show newlines as \\n)."""
    return prompt.replace("\\n", "\n")


def captured(adapter, method: str, call):
    """The first positional argument ``adapter.<method>`` receives during ``call()``."""
    seen = []
    orig = getattr(adapter, method)

    def spy(*a, **k):
        seen.append(a[0])
        return orig(*a, **k)

    setattr(adapter, method, spy)
    try:
        call()
    finally:
        delattr(adapter, method)
    return seen[0]


# -- the table --------------------------------------------------------------------------------
def test_every_paper_model_has_both_profiles():
    paper = {n for n, e in registry.models().items() if e.paper}
    assert paper == set(conv.PAPER_CONVENTIONS) and len(paper) == 10
    for name in paper:
        for p in conv.PROFILES:
            rec = conv.resolve(name, p)
            assert rec.model == name and rec.profile == p and rec.implementation
            assert rec.retrieval in conv.RETRIEVALS
        assert conv.resolve(name, "authors").sources
        assert conv.differences(name), name  # the two profiles differ somewhere
        json.dumps(conv.resolve(name, "authors").as_dict())  # JSON-able, as results need


def test_models_without_profiles_take_reference_only(capsys, tmp_path):
    assert conv.resolve("siglip2-base-256", "reference") is None
    with pytest.raises(registry.RegistryError, match="only the paper's ten models"):
        registry.load_model("hash", conventions="authors")
    with pytest.raises(registry.RegistryError, match="unknown conventions"):
        registry.load_model("hash", conventions="mine")
    assert registry.load_model("hash").profile is None
    from benchmark.cli import main

    assert main(["run", "--model", "hash", "--task", "3xcm", "--conventions", "authors",
                 "--dataset", "data/synthetic-3xcm", "--output-dir", str(tmp_path / "o"),
                 "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no 'authors' conventions" in err[0]
    assert not (tmp_path / "o").exists()  # refused before any results folder is made


def test_ls_conventions_lists_only_differing_fields(capsys):
    from benchmark.cli import main

    assert main(["ls", "--conventions"]) == 0
    out = capsys.readouterr().out
    for name in conv.PAPER_CONVENTIONS:
        assert f"\n{name}\n" in out
    jina = out.split("\njina-v4\n")[1]
    assert "  document_prompt\n    reference: Passage: {text}\n    authors:   Query: {text}" in jina
    assert "query_prompt" not in jina  # the same in both profiles: not shown
    cn = out.split("\nchinese-clip-l14\n")[1].split("\nmclip-xlmr-l14\n")[0]
    assert "  dtype\n" in cn and "    authors:   float32" in cn and "  image\n" not in cn


# -- CLIP-L/14 and Chinese-CLIP -----------------------------------------------------------------
def authors_hf_vectors(folder, texts, imgs):
    """R2E cells 9-10: AutoModel/AutoProcessor (transformers 4.53: the PIL image processor),
    float32, ONE string per call, padding=True, truncation at max_position_embeddings,
    get_*_features, explicit L2."""
    import torch
    from transformers import AutoModel, AutoProcessor

    from benchmark.models.hf_clip import _features

    model = AutoModel.from_pretrained(str(folder)).eval()
    proc = AutoProcessor.from_pretrained(str(folder), backend="pil")
    max_len = model.config.text_config.max_position_embeddings
    out_t, out_i = [], []
    with torch.no_grad():
        for t in texts:
            x = proc(text=t, return_tensors="pt", padding=True, truncation=True, max_length=max_len)
            f = _features(model.get_text_features(**x))
            out_t.append((f / f.norm(dim=-1, keepdim=True))[0].numpy())
        for im in imgs:
            f = _features(model.get_image_features(**proc(images=im, return_tensors="pt")))
            out_i.append((f / f.norm(dim=-1, keepdim=True))[0].numpy())
    return np.stack(out_t), np.stack(out_i)


def test_clip_l14_reference_is_open_clip_authors_is_transformers(tiny):
    import torch

    ref = load("clip-l14", "reference", checkpoint=f"local-dir:{tiny['openclip']}")
    assert type(ref).__name__ == "OpenCLIPModel" and ref.profile.profile == "reference"
    assert ref.dtype == "float32"  # no dtype in the profile: the CPU default
    tok = ref.tokenizer(TEXTS[:1])
    assert tuple(tok.shape) == (1, 77) and int(tok[0, 0]) == 49406  # <start_of_text>, context 77
    assert "CenterCrop" in ref.conventions("image", "document")["preprocess"]

    auth = load("clip-l14", "authors", checkpoint=str(tiny["hf_clip"]))
    assert type(auth).__name__ == "HFDualEncoder" and auth.family == "clip"
    assert auth.profile.target == "benchmark.models.hf_clip:HFDualEncoder"
    assert auth.profile.checkpoint == "openai/clip-vit-large-patch14"
    assert any(d.startswith("checkpoint=") for d in auth.profile.deviations)
    assert auth.dtype == "float32" and next(auth.model.parameters()).dtype == torch.float32
    assert type(auth.processor.image_processor).__name__ == "CLIPImageProcessorPil"
    assert (auth.text_padding, auth.text_max_length) == (True, 77)
    imgs = images(3)
    want_t, want_i = authors_hf_vectors(tiny["hf_clip"], TEXTS, imgs)
    np.testing.assert_allclose(auth.encode_texts(TEXTS), want_t, atol=2e-5)
    np.testing.assert_allclose(auth.encode_images(imgs), want_i, atol=2e-5)


def test_chinese_clip_both_profiles(tiny):
    import torch

    imgs = images(3)
    want_t, want_i = authors_hf_vectors(tiny["cn_clip"], TEXTS, imgs)
    for p in conv.PROFILES:
        m = load("chinese-clip-l14", p, checkpoint=str(tiny["cn_clip"]))
        assert type(m.processor.image_processor).__name__ == "ChineseCLIPImageProcessorPil"
        assert (m.text_padding, m.text_max_length) == (True, 128)  # the tiny config's positions
        assert next(m.model.parameters()).dtype == torch.float32
        assert m.profile.dtype == "float32"  # authors: the record's; reference: CPU default
        np.testing.assert_allclose(m.encode_texts(TEXTS), want_t, atol=2e-5)
        np.testing.assert_allclose(m.encode_images(imgs), want_i, atol=2e-5)
    assert conv.resolve("chinese-clip-l14", "authors").dtype == "float32"
    assert conv.resolve("chinese-clip-l14", "reference").dtype is None


# -- M-CLIP --------------------------------------------------------------------------------------
def test_mclip_image_towers_and_dtypes(tiny):
    import torch
    from multilingual_clip.Config_MCLIP import MCLIPConfig
    from multilingual_clip.pt_multilingual_clip import MultilingualCLIP
    from transformers import AutoTokenizer

    cfg = MCLIPConfig.from_pretrained(str(tiny["mclip"]))
    cfg.modelBase = str(tiny["mclip_base"])
    pkg = MultilingualCLIP(cfg)
    pkg.load_state_dict(torch.load(tiny["mclip"] / "pytorch_model.bin", weights_only=True))
    with torch.inference_mode():
        want = pkg.eval().forward(TEXTS, AutoTokenizer.from_pretrained(str(tiny["mclip"]))).numpy()
    want = want / np.linalg.norm(want, axis=1, keepdims=True)
    towers = {"mclip-xlmr-l14": ("ViT-L-14/openai", conv.CLIP_LOAD_DTYPE),
              "mclip-xlmr-b16plus": ("ViT-B-16-plus-240/laion400m_e32", "float32")}
    for name, (model, image_dtype) in towers.items():
        assert conv.resolve(name, "reference").options == {}  # the zoo entry's own tower
        assert registry.models()[name].kwargs["image_model"] == model
        m = load(name, "authors", checkpoint=str(tiny["mclip"]),
                 image_model=f"local-dir:{tiny['mclip_image']}")
        assert m.profile.options == {"image_model": model, "image_dtype": image_dtype}
        assert any(d.startswith("image_model=") for d in m.profile.deviations)
        assert m.dtype == "float32" and m.image_tower.dtype == "float32"  # CPU: clip.load casts
        assert next(m.text_tower.transformer.parameters()).dtype == torch.float32
        # the text tower is multilingual-clip's own forward (up to the L2 the cosine ignores)
        np.testing.assert_allclose(m.encode_texts(TEXTS), want, atol=1e-5)
    # what clip.load's rule resolves to on CUDA: a float16 image tower beside a float32 text
    # tower (open_clip "fp16": LayerNorm in float32, as clip's own convert_weights)
    m16 = load("mclip-xlmr-l14", "authors", checkpoint=str(tiny["mclip"]),
               image_model=f"local-dir:{tiny['mclip_image']}", image_dtype="float16")
    assert m16.image_tower.dtype == "float16" and m16.dtype == "float32"
    v16, v32 = m16.encode_images(images(2)), m.encode_images(images(2))
    assert 0 < np.abs(v16 - v32).max() < 5e-3
    assert conv.resolve_dtype(conv.CLIP_LOAD_DTYPE, "cuda:1") == "float16"
    assert conv.resolve_dtype(conv.CLIP_LOAD_DTYPE, "cpu") == "float32"
    assert conv.resolve_dtype("bfloat16", "cuda") == "bfloat16"


# -- ColQwen2.5 ---------------------------------------------------------------------------------
def test_colqwen_prompts_token_ids_dtype_scorer(tiny):
    import torch

    for i, name in enumerate(COLQWEN):
        ref = load(name, "reference", checkpoint=str(tiny["colqwen"]))
        auth = load(name, "authors", checkpoint=str(tiny["colqwen"]))
        assert (ref.scorer, auth.scorer) == ("maxsim", "colpali-per-document")
        assert (ref.profile.retrieval, auth.profile.retrieval) == ("exact", "two-stage-l2")
        assert (ref.dtype, auth.dtype) == ("float32", "bfloat16")
        assert ref.uses_default_similarity() and auth.uses_default_similarity()
        for m in (ref, auth):
            rec = m.profile
            assert lines(rec.query_prompt).replace("{text}", "x") == "Query: x" + EOT * 10
            assert type(m.processor.image_processor).__name__ == "Qwen2VLImageProcessorPil"
            assert m.processor.tokenizer.padding_side == "left"
            if i:
                continue
            tok = m.processor.tokenizer
            batch = captured(m, "_forward", lambda m=m: m.encode_texts(TEXTS[:1]))
            want = tok("Query: " + TEXTS[0])["input_ids"] + [tok.convert_tokens_to_ids(EOT)] * 10
            assert batch["input_ids"][0].tolist() == want
            dt = {"reference": torch.float32, "authors": torch.bfloat16}[rec.profile]
            assert m.backbone.dtype == dt and m.proj.weight.dtype == dt
            # authors: colpali normalises in bfloat16, so every component is a bfloat16 value
            v = torch.from_numpy(m.encode_texts(TEXTS[:1]).to_list()[0])
            exact_bf16 = bool((v.to(torch.bfloat16).float() == v).all())
            assert exact_bf16 == (rec.profile == "authors")
            assert m.normalize_dtype == {"reference": "float32", "authors": "model"}[rec.profile]


# -- GME -----------------------------------------------------------------------------------------
def test_gme_instructions_dtype_and_processor(tiny):
    import torch

    from benchmark.models.gme import chat

    ref = load(GME[0], "reference", checkpoint=str(tiny["gme"]))
    auth = load(GME[0], "authors", checkpoint=str(tiny["gme"]))
    t = TEXTS[1]
    q_ref = captured(ref, "_embed", lambda: ref.encode_texts([t], role="query"))
    q_auth = captured(auth, "_embed", lambda: auth.encode_texts([t], role="query"))
    d_auth = captured(auth, "_embed", lambda: auth.encode_texts([t], role="document"))
    assert q_ref == [chat("Find an image that matches the given text.", t)]
    assert q_auth == d_auth == [chat("You are a helpful assistant.", t)]
    assert q_ref == [lines(ref.profile.query_prompt).replace("{text}", t)]
    assert q_auth == [lines(auth.profile.query_prompt).replace("{text}", t)]
    ids = auth.processor.tokenizer(q_auth[0])["input_ids"]
    assert ids[-1] == auth.processor.tokenizer.convert_tokens_to_ids(EOT)  # the pooled token
    assert (ref.dtype, auth.dtype) == ("float32", "float16")
    assert auth.backbone.dtype == torch.float16 and auth.normalize_dtype == "model"
    for m in (ref, auth):
        assert type(m.processor.image_processor).__name__ == "Qwen2VLImageProcessorPil"
        assert m.conventions("image", "document")["min_pixels"] == 256 * 28 * 28
    # GME 7B: the same conventions
    assert conv.differences(GME[1]) == conv.differences(GME[0])
    # authors' float16 vectors are unit norm and close to the float32 ones of the same prompt
    v16 = auth.encode_texts(TEXTS, role="query")
    v32 = registry.load_model(GME[0], conventions="authors", device="cpu", dtype="float32",
                              checkpoint=str(tiny["gme"])).encode_texts(TEXTS, role="query")
    np.testing.assert_allclose(np.linalg.norm(v16, axis=1), 1.0, atol=2e-3)
    assert np.abs(v16 - v32).max() < 0.05 and not np.array_equal(v16, v32)


# -- jina-embeddings-v4 --------------------------------------------------------------------------
def test_jina_prompts_for_captions_and_dtype(tiny):
    import torch

    ref = load("jina-v4", "reference", checkpoint=str(tiny["jina"]))
    auth = load("jina-v4", "authors", checkpoint=str(tiny["jina"]))
    tok = ref.processor.tokenizer
    t = TEXTS[2]
    for m, doc_prefix in ((ref, "Passage: "), (auth, "Query: ")):
        q = captured(m, "_forward", lambda m=m: m.encode_texts([t], role="query"))
        d = captured(m, "_forward", lambda m=m: m.encode_texts([t], role="document"))
        assert q["input_ids"][0].tolist() == tok("Query: " + t)["input_ids"]
        assert d["input_ids"][0].tolist() == tok(doc_prefix + t)["input_ids"]
        assert lines(m.profile.document_prompt).replace("{text}", t) == doc_prefix + t
    # the remote code's processor is from_pretrained(use_fast=True): the torchvision one
    assert type(ref.processor.image_processor).__name__ == "Qwen2VLImageProcessorPil"
    assert type(auth.processor.image_processor).__name__ == "Qwen2VLImageProcessor"
    # ... and it encodes under torch.autocast(bfloat16)
    seen = []
    real = auth._forward_inner

    def spy(batch, image):
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return real(batch, image)

    auth._forward_inner = spy
    auth.encode_texts([t], role="query")
    auth.encode_images(images(1), role="document")
    assert seen == [(True, torch.bfloat16)] * 2
    del auth._forward_inner
    assert ref.autocast is None and auth.conventions("text", "query")["autocast"] == "bfloat16"
    assert (ref.dtype, auth.dtype) == ("float32", "float16")
    assert auth.backbone.dtype == torch.float16
    assert (ref.normalize_dtype, auth.normalize_dtype) == ("float32", "model")
    # authors: a caption and a query of the same text are the same vector (one prompt)
    np.testing.assert_array_equal(auth.encode_texts([t], role="query"),
                                  auth.encode_texts([t], role="document"))


# -- records in results and in the cache key -----------------------------------------------------
def test_profile_in_cache_key_and_settings(tiny):
    ref = load("jina-v4", "reference", checkpoint=str(tiny["jina"]))
    auth = load("jina-v4", "authors", checkpoint=str(tiny["jina"]))
    again = load("jina-v4", "authors", checkpoint=str(tiny["jina"]))
    for modality, role in (("text", "query"), ("image", "document"), ("text", "document")):
        assert namespace(ref, modality, role) != namespace(auth, modality, role)
        assert namespace(auth, modality, role) == namespace(again, modality, role)
    s = conv.settings(auth)
    assert s["profile"] == "authors" and s["fields"]["dtype"] == "float16"
    assert s["fields"]["options"] == {"document_prompt": "query", "normalize_dtype": "model",
                                      "image_backend": "torchvision", "autocast": "bfloat16"}
    assert conv.settings(registry.load_model("hash"))["fields"] is None


def test_caller_dtype_wins_and_is_recorded(tiny):
    m = load("jina-v4", "authors", checkpoint=str(tiny["jina"]), dtype="float32")
    assert m.dtype == "float32" and m.profile.dtype == "float32"
    assert any(d.startswith("dtype='float32'") and "'float16'" in d for d in m.profile.deviations)


def test_cli_run_records_profile_and_misses_the_cache_across_profiles(tiny, tmp_path, monkeypatch):
    """python -m benchmark run --conventions authors on a tiny GME under the paper name (weights
    from $XCM_WEIGHTS_DIR): the results record the profile; switching profiles re-embeds, the
    same profile again embeds nothing."""
    import shutil

    from benchmark.cli import main
    from benchmark.synthetic import write_release
    from tests.benchmark.synth import planted_world

    weights = tmp_path / "weights"
    shutil.copytree(tiny["gme"], weights / "Alibaba-NLP" / "gme-Qwen2-VL-2B-Instruct")
    monkeypatch.setenv("XCM_WEIGHTS_DIR", str(weights))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "release"
    tr, im = planted_world(n_concepts=2, per_cell=1)
    write_release(data, tr, im, "planted")

    def run(profile, out):
        assert main(["run", "--model", "gme-qwen2-2b", "--task", "3xcm", "--dataset", str(data),
                     "--conventions", profile, "--device", "cpu", "--cache-dir",
                     str(tmp_path / "cache"), "--output-dir", str(tmp_path / out), "-q",
                     "--bootstrap", "10"]) == 0
        return json.loads((tmp_path / out / "gme-qwen2-2b" / "3xcm.json").read_text())

    a = run("authors", "a")
    c = a["settings"]["conventions"]
    assert c["profile"] == "authors" and c["fields"]["dtype"] == "float16"
    assert c["fields"]["options"]["query_instruction"] is None
    assert c["query"]["instruction"] == "You are a helpful assistant."
    assert a["settings"]["dtype"] == "float16"
    assert a["timings"]["text_embedding"]["embedded"] > 0
    r = run("reference", "r")
    assert r["settings"]["conventions"]["profile"] == "reference"
    assert r["settings"]["conventions"]["query"]["instruction"].startswith("Find an image")
    assert r["timings"]["image_embedding"]["embedded"] == a["timings"]["image_embedding"]["embedded"]
    a2 = run("authors", "a2")
    assert a2["timings"]["text_embedding"]["embedded"] == 0
    assert a2["timings"]["image_embedding"]["embedded"] == 0
    assert a2["scores"]["overall"] == a["scores"]["overall"]
