"""The one short GPU script: throughput per model family with random weights, the RQ1 search on
the GPU, and the projected H200-hours of the paper's suite (ten models, RQ1 + RQ2).

    python tests/perf/gpu_suite.py [--dtype bfloat16] [--out gpu-suite.json]   # a GPU machine
    python tests/perf/gpu_suite.py --tiny                                       # tiny, CPU (tested)

Nothing is downloaded (the device machines have no internet):

- open_clip towers (CLIP-L/14; ViT-B-16-plus-240, M-CLIP B/16+'s image tower) go through
  ``benchmark smoke`` (:func:`benchmark.smoke.run_smoke`) with ``open_clip:NAME/random``: the
  adapter's own batching and preprocessing of 640x480 images, random weights.
- The other families have no random-weights path in their adapters, so their backbones (the
  transformers classes the adapters run) are built from the published architecture sizes with
  random weights, in ``--dtype``, and timed on synthetic inputs: XLM-R large / base (M-CLIP
  text towers), a BERT-base (Chinese-CLIP's text tower), Qwen2-VL 2B / 7B (GME) and
  Qwen2.5-VL 3B / 7B (ColQwen2.5, jina-v4) with 24-token texts and 640x480 images
  (644x476 after Qwen's 28-px rounding: 1,564 patches, 391 visual tokens). Pooling heads
  and tokenisation are left out (small next to the backbone).
- The RQ1 search: :func:`benchmark.retrieval.exact_topk` (3,600 x 261,375 x 768, top-99) on
  the device; multi-vector MaxSim (391 x 128 query tokens, 24 x 128 caption tokens) on a
  tenth of the pool, scaled by ten.

Item counts: RQ1 = XM3600, 3,600 images and 261,375 captions; RQ2 = the authors' 3XCM
triplets (``data/authors/xcm-bench.csv``): its distinct images and (concept, country) queries.
The projection per paper model is images / images-per-s + texts / texts-per-s + its search.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's package and tests

import numpy as np  # noqa: E402

RQ1_IMAGES, RQ1_TEXTS = 3600, 261375
GOAL_HOURS = 3.0


@dataclass
class Sizes:
    """Shapes of one run: full (the real architectures) or tiny (CPU test)."""

    tiny: bool
    batch_texts: int = 64
    batch_images: int = 16
    reps: int = 3
    text_tokens: int = 24
    grid: tuple[int, int] = (34, 46)  # Qwen patch grid of a 640x480 image (476x644)
    search: tuple[int, int, int] = (RQ1_IMAGES, RQ1_TEXTS, 768)
    maxsim: tuple[int, int, int, int, int] = (RQ1_IMAGES, RQ1_TEXTS // 10, 391, 24, 128)


TINY = Sizes(True, batch_texts=4, batch_images=2, reps=1, grid=(4, 4), search=(64, 2000, 32),
             maxsim=(8, 200, 4, 3, 8))

# Published architecture sizes (config.json of each checkpoint); tiny stand-ins for --tiny.
XLMR = {"xlmr-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                           intermediate_size=4096, vocab_size=250002),
        "xlmr-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                          intermediate_size=3072, vocab_size=250002),
        "bert-base-zh": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                             intermediate_size=3072, vocab_size=21128)}
QWEN_TEXT = {"qwen2-vl-2b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                                 num_key_value_heads=2, intermediate_size=8960),
             "qwen2-vl-7b": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                                 num_key_value_heads=4, intermediate_size=18944),
             "qwen2.5-vl-3b": dict(hidden_size=2048, num_hidden_layers=36, num_attention_heads=16,
                                   num_key_value_heads=2, intermediate_size=11008),
             "qwen2.5-vl-7b": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                                   num_key_value_heads=4, intermediate_size=18944)}
TINY_TEXT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=64)

# paper model -> (text family, image family, multi-vector)
PAPER = {
    "CLIP-L/14": ("openclip-L14", "openclip-L14", False),
    "Chinese-CLIP-L/14": ("bert-base-zh", "openclip-L14", False),
    "M-CLIP XLM-R-L/14": ("xlmr-large", "openclip-L14", False),
    "M-CLIP XLM-R-B/16plus": ("xlmr-base", "openclip-B16plus", False),
    "ColQwen2.5 v0.2": ("qwen2.5-vl-3b", "qwen2.5-vl-3b", True),
    "ColQwen2.5 3B-M": ("qwen2.5-vl-3b", "qwen2.5-vl-3b", True),
    "ColQwen2.5 7B-M": ("qwen2.5-vl-7b", "qwen2.5-vl-7b", True),
    "GME-Qwen2-VL 2B": ("qwen2-vl-2b", "qwen2-vl-2b", False),
    "GME-Qwen2-VL 7B": ("qwen2-vl-7b", "qwen2-vl-7b", False),
    "jina-embeddings-v4": ("qwen2.5-vl-3b", "qwen2.5-vl-3b", False),
}


def rq2_counts() -> tuple[int, int]:
    """(images, query texts) of the authors' 3XCM triplets."""
    import pandas as pd

    from core import datatables

    df = pd.read_csv(datatables.data_path("authors/xcm-bench.csv"))
    cols = [c for c in df.columns if c.endswith("image_id")]
    images = set().union(*(set(df[c]) for c in cols))
    return len(images), len(df[["query_concept", "query_country"]].drop_duplicates())


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(fn: Any, device: str, reps: int) -> float:
    """Seconds per call of ``fn`` (one warm-up call first)."""
    fn()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / reps


def openclip_rates(name: str, sz: Sizes, device: str, dtype: str | None) -> dict[str, float]:
    """texts/s and images/s of ``benchmark smoke`` on ``open_clip:NAME/random``."""
    from benchmark.smoke import run_smoke

    n = 8 if sz.tiny else 128
    size = (40, 30) if sz.tiny else (640, 480)
    res = run_smoke(f"open_clip:{name}/random", n, device, dtype, None, size)
    return {"texts_per_s": res["texts_per_second"], "images_per_s": res["images_per_second"]}


def encoder_rate(kind: str, sz: Sizes, device: str, dtype: Any) -> dict[str, float]:
    """texts/s of an XLM-R / BERT text tower of ``kind``'s sizes, random weights."""
    import torch
    from transformers import BertConfig, BertModel, XLMRobertaConfig, XLMRobertaModel

    dims = dict(TINY_TEXT, vocab_size=1000) if sz.tiny else XLMR[kind]
    dims.pop("num_key_value_heads", None)
    cfg_cls, model_cls = ((BertConfig, BertModel) if kind.startswith("bert")
                          else (XLMRobertaConfig, XLMRobertaModel))
    with torch.device(device):
        model = model_cls(cfg_cls(**dims)).to(dtype).eval()
        ids = torch.randint(5, dims["vocab_size"], (sz.batch_texts, sz.text_tokens))
    with torch.inference_mode():
        s = timed(lambda: model(input_ids=ids), device, sz.reps)
    return {"texts_per_s": sz.batch_texts / s}


def qwen_rates(kind: str, sz: Sizes, device: str, dtype: Any) -> dict[str, float]:
    """texts/s and images/s of a Qwen2-VL / Qwen2.5-VL backbone of ``kind``'s sizes."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLModel, Qwen2VLConfig, Qwen2VLModel

    v25 = kind.startswith("qwen2.5")
    vocab = 512 if sz.tiny else 152064
    text = dict(TINY_TEXT if sz.tiny else QWEN_TEXT[kind], vocab_size=vocab, bos_token_id=0,
                eos_token_id=1, pad_token_id=0, rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1] if sz.tiny
                              else [16, 24, 24]})
    h = text["hidden_size"]
    special = dict(image_token_id=text["vocab_size"] - 4, video_token_id=text["vocab_size"] - 3,
                   vision_start_token_id=text["vocab_size"] - 2,
                   vision_end_token_id=text["vocab_size"] - 1)
    if v25:
        vision = (dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                       fullatt_block_indexes=[1]) if sz.tiny
                  else dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16,
                            fullatt_block_indexes=[7, 15, 23, 31]))
        cfg = Qwen2_5_VLConfig(text_config=text, vision_config=dict(
            vision, out_hidden_size=h, patch_size=14, spatial_merge_size=2,
            temporal_patch_size=2, window_size=112), **special)
        model_cls = Qwen2_5_VLModel
    else:
        vision = (dict(depth=2, embed_dim=32, num_heads=2, mlp_ratio=2) if sz.tiny
                  else dict(depth=32, embed_dim=1280, num_heads=16, mlp_ratio=4))
        cfg = Qwen2VLConfig(text_config=text, vision_config=dict(
            vision, hidden_size=h, patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
            **special)
        model_cls = Qwen2VLModel
    gh, gw = sz.grid
    n_vis = gh * gw // 4
    with torch.device(device):
        torch.manual_seed(0)
        model = model_cls(cfg).to(dtype).eval()
        ids = torch.randint(0, special["image_token_id"], (sz.batch_texts, sz.text_tokens))
        img_ids = torch.cat([torch.full((sz.batch_images, 1), special["vision_start_token_id"]),
                             torch.full((sz.batch_images, n_vis), special["image_token_id"]),
                             torch.full((sz.batch_images, 1), special["vision_end_token_id"]),
                             torch.randint(0, 100, (sz.batch_images, 12))], dim=1)
        types = (img_ids == special["image_token_id"]).int()  # 1: image token (processor's)
        pixels = torch.randn(sz.batch_images * gh * gw, 3 * 2 * 14 * 14).to(dtype)
        grid = torch.tensor([[1, gh, gw]] * sz.batch_images)
    with torch.inference_mode():
        st = timed(lambda: model(input_ids=ids), device, sz.reps)
        si = timed(lambda: model(input_ids=img_ids, pixel_values=pixels, image_grid_thw=grid,
                                 mm_token_type_ids=types), device, sz.reps)
    return {"texts_per_s": sz.batch_texts / st, "images_per_s": sz.batch_images / si}


def search_seconds(sz: Sizes, device: str) -> dict[str, float]:
    """The RQ1 exact search (single vectors), and exact MaxSim scaled to the whole pool."""
    from benchmark import retrieval
    from benchmark.embeddings import MultiVector

    rng = np.random.default_rng(0)
    nq, nd, dim = sz.search
    q = rng.standard_normal((nq, dim), dtype=np.float32)
    d = rng.standard_normal((nd, dim), dtype=np.float32)
    backend = "torch" if device.startswith("cuda") else "numpy"
    t0 = time.perf_counter()
    retrieval.exact_topk(q, d, 99, backend=backend, device=device, progress=False)
    single = time.perf_counter() - t0
    mq, md, lq, ld, mdim = sz.maxsim
    qv = MultiVector(rng.standard_normal((mq, lq, mdim), dtype=np.float32), np.full(mq, lq))
    dv = MultiVector(rng.standard_normal((md, ld, mdim), dtype=np.float32), np.full(md, ld))
    t0 = time.perf_counter()
    retrieval.exact_topk(qv, dv, min(99, md), backend=backend, device=device, progress=False)
    multi = (time.perf_counter() - t0) * (RQ1_TEXTS / md if not sz.tiny else 1)
    return {"single_vector_s": single, "maxsim_s": multi, "backend": backend}


def measure(sz: Sizes, device: str, dtype_name: str) -> dict[str, dict[str, float]]:
    import torch

    dtype = getattr(torch, dtype_name)
    fams: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if sz.tiny:
            from tests.benchmark.models.tiny import register_tiny_openclip_config

            name = register_tiny_openclip_config(Path(tmp))
            fams["openclip-L14"] = fams["openclip-B16plus"] = openclip_rates(
                name, sz, device, None)
        else:
            fams["openclip-L14"] = openclip_rates("ViT-L-14", sz, device, dtype_name)
            fams["openclip-B16plus"] = openclip_rates("ViT-B-16-plus-240", sz, device, dtype_name)
    for kind in XLMR:
        fams[kind] = encoder_rate(kind, sz, device, dtype)
    for kind in QWEN_TEXT:
        fams[kind] = qwen_rates(kind, sz, device, dtype)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return fams


def project(fams: dict[str, dict[str, float]], search: dict[str, float]) -> dict[str, Any]:
    """Hours per paper model (RQ1 + RQ2 embedding and the RQ1 search) and the total."""
    rq2_images, rq2_texts = rq2_counts()
    images, texts = RQ1_IMAGES + rq2_images, RQ1_TEXTS + rq2_texts
    rows = {}
    for model, (tfam, ifam, multi) in PAPER.items():
        s = (images / fams[ifam]["images_per_s"] + texts / fams[tfam]["texts_per_s"]
             + (search["maxsim_s"] if multi else search["single_vector_s"]))
        rows[model] = round(s / 3600, 4)
    return {"items": {"rq1_images": RQ1_IMAGES, "rq1_texts": RQ1_TEXTS,
                      "rq2_images": rq2_images, "rq2_texts": rq2_texts},
            "hours_per_model": rows, "total_hours": round(sum(rows.values()), 3),
            "goal_hours": GOAL_HOURS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (the test)")
    p.add_argument("--device", default=None, help="default: cuda when present, else cpu")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--out", type=Path, help="also write the numbers as JSON")
    a = p.parse_args(argv)
    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() and not a.tiny else "cpu")
    sz = TINY if a.tiny else Sizes(False)
    dtype = "float32" if a.tiny else a.dtype
    t0 = time.perf_counter()
    fams = measure(sz, device, dtype)
    search = search_seconds(sz, device)
    proj = project(fams, search)
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    out = {"device": device, "gpu": gpu, "dtype": dtype, "tiny": a.tiny, "families": fams,
           "search": search, "projection": proj, "suite_seconds": time.perf_counter() - t0}
    print(f"device {device} ({gpu or 'CPU'}), {dtype}{'  [tiny shapes: not a measurement]' if a.tiny else ''}")
    for k, v in fams.items():
        print(f"  {k:<18} " + "  ".join(f"{m} {x:,.1f}" for m, x in v.items()))
    print(f"  RQ1 search {search['single_vector_s']:.2f} s single-vector, "
          f"{search['maxsim_s']:.1f} s MaxSim ({search['backend']})")
    for m, h in proj["hours_per_model"].items():
        print(f"  {m:<24} {h:8.3f} h")
    print(f"projected H200-hours, ten models, RQ1 + RQ2: {proj['total_hours']:.2f} "
          f"(goal {GOAL_HOURS:.0f})")
    if a.out:
        a.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
