"""The whole 3XCM pipeline in miniature: build a release, load it, score it.

``python -m builder.demo [--workdir W] [--real] [--seed S]``

Default (offline, a few minutes on a laptop CPU): a small generated world, a ``folder:`` image
tree ``world/<concept>/<country>/*.jpg`` over six concepts and all 16 countries (each concept a
stripe pattern, each country a palette, each image its own shapes), with planted problems the
stages must handle: a resized near-duplicate (image dedup), an identical copy (crawl dedup) and
a file that is not an image (a recorded download failure). Tiny random-init embedding models
are built on the fly (a BGE-M3-shaped XLM-R for concept dedup, an open_clip ViT for image
dedup), the LLM stages run ``--llm offline``, and every stage runs through its own
``main(argv)``: concepts, concept_dedup, queries, crawl, image_dedup, tagging, triplets sample,
triplets export. Then the release is loaded with ``datasets.load_dataset`` (both configs,
offline) and the evaluator scores it with the ``hash`` model, printing the SP table.

``--real`` (network and ``GEMINI_API_KEY`` needed): the same pipeline with the real services on
a small scope: Gemini generates concepts, native queries and tags; DuckDuckGo image search
(``ddgs``) crawls three of the demo concepts in all 16 countries, four results per query. The
embedding models stay tiny (no multi-GB downloads); use the stages directly for a full build.

The human review stage (Label Studio) is not part of the demo: images whose near-duplicate
evidence falls in the review band stay ``needs_review`` and out of the release (the demo's
thresholds leave the band empty).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from benchmark.clikit import add_workdir
from builder.stagekit import configure, report

log = logging.getLogger(__name__)

DEMO_CONCEPTS = ["train", "costume", "school", "taxi", "craft", "tea culture"]
# Countries whose query texts the demo shows: pairs sharing a language, with their own terms.
SHOWN_COUNTRIES = ("USA", "GBR", "ESP", "ARG", "PRT", "BRA")
REAL_CONCEPTS = DEMO_CONCEPTS[:3]
PER_CELL = 3
DEFAULT_WORKDIR = "./xcm-work/demo"  # under the ignored default work dir
REAL_MODEL = "gemini:gemini-2.5-flash"
TINY_CLIP_CFG: dict[str, Any] = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


class DemoError(RuntimeError):
    """A stage failed or could not run; the message names it."""


# -- the generated world ---------------------------------------------------------------------------

def synth_jpeg(ci: int, ki: int, variant: int, size: int = 64) -> bytes:
    """A JPEG: stripes (angle, frequency) encode the concept, the palette the country, and
    three random shapes make each image of a cell distinct (phash distance >= ~14)."""
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng([ci, ki, variant])
    hue = (ki * 47) % 256
    base = np.array([hue, (hue * 3 + 80) % 256, 255 - hue], np.float32)
    yy, xx = np.mgrid[0:size, 0:size] / size
    ang = np.pi * ci / len(DEMO_CONCEPTS)
    wave = np.sin(2 * np.pi * (2 + ci) * (xx * np.cos(ang) + yy * np.sin(ang)) + rng.uniform(0, 6.3))
    img = base * (0.35 + 0.65 * (0.5 + 0.5 * wave))[..., None] + rng.normal(0, 10, (size, size, 3))
    im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(im)
    for _ in range(3):
        x, y = (int(v) for v in rng.integers(0, size - 16, 2))
        w, h = (int(v) for v in rng.integers(10, 28, 2))
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x, y, x + w, y + h], fill=fill)
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def make_world(root: Path, concepts: list[str], per_cell: int = PER_CELL) -> dict[str, str]:
    """Write ``root/<concept>/<country>/NN.jpg``; returns the planted problems (path -> what)."""
    from PIL import Image

    from benchmark import tables

    codes = [c.code for c in tables.countries()]
    for ci, concept in enumerate(concepts):
        for ki, code in enumerate(codes):
            cell = root / concept / code
            cell.mkdir(parents=True, exist_ok=True)
            for v in range(per_cell):
                (cell / f"{v:02d}.jpg").write_bytes(synth_jpeg(ci, ki, v))
    planted = {}
    a = root / concepts[0] / codes[3]  # a resized copy: a near duplicate for image dedup
    with Image.open(a / "00.jpg") as im:
        buf = io.BytesIO()
        im.resize((48, 48)).save(buf, "JPEG", quality=90)
    (a / "90-resized.jpg").write_bytes(buf.getvalue())
    planted[f"{concepts[0]}/{codes[3]}/90-resized.jpg"] = "near duplicate of 00.jpg"
    b = root / concepts[1] / codes[5]  # identical bytes: the crawl marks one 'duplicate'
    (b / "91-copy.jpg").write_bytes((b / "01.jpg").read_bytes())
    planted[f"{concepts[1]}/{codes[5]}/91-copy.jpg"] = "identical copy of 01.jpg"
    c = root / concepts[2] / codes[7]  # not an image: a recorded download failure
    (c / "92-broken.jpg").write_bytes(b"this is not an image\n" * 8)
    planted[f"{concepts[2]}/{codes[7]}/92-broken.jpg"] = "not an image"
    return planted


# -- tiny random-init models ----------------------------------------------------------------------

def tiny_bge_m3(root: Path, corpus: list[str], hidden: int = 32) -> Path:
    """A BGE-M3-shaped random XLM-R folder that FlagEmbedding loads like ``BAAI/bge-m3``.

    ``initializer_range=0.5`` spreads the vectors (the default gives cosines near 1.0).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    root.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>",
    ).save_pretrained(root)
    torch.manual_seed(0)
    cfg = XLMRobertaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=66,
        initializer_range=0.5, pad_token_id=tok.token_to_id("<pad>"),
        bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
    )
    XLMRobertaModel(cfg).save_pretrained(root)
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), root / "colbert_linear.pt")
    torch.save(torch.nn.Linear(hidden, 1).state_dict(), root / "sparse_linear.pt")
    return root


def tiny_open_clip(root: Path) -> Path:
    """An open_clip ``local-dir:`` folder with a random-init tiny ViT (seeded)."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    name = "xcm-demo-tiny-clip"
    root.mkdir(parents=True, exist_ok=True)
    if name not in open_clip.list_models():
        cfg_path = root / f"{name}.json"
        cfg_path.write_text(json.dumps(TINY_CLIP_CFG))
        open_clip.add_model_config(cfg_path)
    torch.manual_seed(0)
    state = open_clip.create_model(name, pretrained=None).state_dict()
    (root / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": TINY_CLIP_CFG,
        "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073],
                           "std": [0.26862954, 0.26130258, 0.27577711],
                           "interpolation": "bicubic", "resize_mode": "shortest"},
    }))
    save_file({k: v.contiguous() for k, v in state.items()}, str(root / "open_clip_model.safetensors"))
    return root


# -- the plan ---------------------------------------------------------------------------------------

def plan(w: Path, real: bool, seed: int) -> list[tuple[str, str, list[str]]]:
    """(stage, module, argv) for every stage, in order."""
    work = str(w / "work")
    llm = REAL_MODEL if real else "offline"
    llm_args = ["--llm", llm, "--llm-rpm", "30" if real else "0"]
    concepts = REAL_CONCEPTS if real else DEMO_CONCEPTS
    search = ["--search", "ddgs", "--per-query", "4", "--languages", "english,native"] if real \
        else ["--search", f"folder:{w / 'world'}"]
    return [
        ("concepts", "builder.concepts",
         ["--workdir", work, "--countries", "all", "--curated", str(w / "concepts.txt"),
          "--n-concepts", "20", *llm_args]),
        ("concept_dedup", "builder.concept_dedup",
         ["--workdir", work, "--embedder", f"bge-m3:{w / 'models' / 'bge-m3-tiny'}",
          "--device", "cpu"]),
        ("queries", "builder.queries", ["--workdir", work, "--countries", "all", *llm_args]),
        ("crawl", "builder.crawl",
         ["--workdir", work, "--countries", "all", "--concepts", ",".join(concepts), *search]),
        ("image_dedup", "builder.image_dedup",
         ["--workdir", work, "--model", f"open_clip:local-dir:{w / 'models' / 'clip-tiny'}",
          "--phash-distance", "4", "--cosine", "0.9999", "--review-cosine", "0.9999",
          "--cache-dir", str(w / "embeddings")]),
        ("tagging", "builder.tagging",
         ["--workdir", work, "--images-per-request", "8", *llm_args]),
        ("triplets sample", "triplets.cli", ["sample", "--workdir", work, "--seed", str(seed)]),
        ("triplets export", "triplets.cli",
         ["export", "--workdir", work, "--out", str(w / "release")]),
    ]


def prepare(w: Path, real: bool) -> None:
    """The world (offline), the curated concept list and the tiny models."""
    concepts = REAL_CONCEPTS if real else DEMO_CONCEPTS
    w.mkdir(parents=True, exist_ok=True)
    (w / "concepts.txt").write_text("\n".join(concepts) + "\n", encoding="utf-8")
    if not real and not (w / "world").is_dir():
        planted = make_world(w / "world", concepts)
        (w / "world-planted.json").write_text(json.dumps(planted, indent=1))
    from benchmark import tables

    if not (w / "models" / "bge-m3-tiny" / "config.json").is_file():
        corpus = tables.concepts() + [f"{c} {k.name}" for c in concepts for k in tables.countries()]
        tiny_bge_m3(w / "models" / "bge-m3-tiny", corpus)
    if not (w / "models" / "clip-tiny" / "open_clip_model.safetensors").is_file():
        tiny_open_clip(w / "models" / "clip-tiny")


def run_stage(name: str, module: str, argv: list[str]) -> float:
    """Call the stage's ``main(argv)``; raise :class:`DemoError` if it fails."""
    report(f"\n=== [{name}] python -m {module.replace('.cli', '')} {' '.join(argv)}")
    t0 = time.perf_counter()
    rc = importlib.import_module(module).main(argv)
    if rc:
        raise DemoError(f"stage {name} exited with code {rc}")
    return time.perf_counter() - t0


def load_release(release: Path, cache: Path) -> tuple[int, int]:
    """``datasets.load_dataset`` of both configs, offline; returns (triplets, images)."""
    import datasets

    trip = datasets.load_dataset(str(release), "triplets", split="test", cache_dir=str(cache))
    imgs = datasets.load_dataset(str(release), "images", cache_dir=str(cache))
    n_img = sum(len(s) for s in imgs.values())
    first = trip[0]
    report(f"\nload_dataset: {len(trip)} triplets, {n_img} images; first triplet: "
          f"{first['query_text']!r} ({first['query_concept']}, {first['query_country']})")
    report(query_text_line(trip))
    return len(trip), n_img


def query_text_line(trip: Any, concept: str = DEMO_CONCEPTS[0],
                    countries: tuple[str, ...] = SHOWN_COUNTRIES) -> str:
    """One line of the release's query texts of ``concept`` in a few countries: countries that
    share a language keep their own term (PRT comboio, BRA trem)."""
    seen: dict[str, str] = {}
    for r in trip:
        if r["query_concept"] == concept and r["query_country"] in countries:
            seen.setdefault(r["query_country"], f"{r['query_text']} ({r['query_locale']})")
    return f"query texts of {concept!r}: " + ", ".join(
        f"{k} {seen[k]}" for k in countries if k in seen)


def run_demo(workdir: str | Path, real: bool = False, seed: int = 0) -> dict[str, Any]:
    """Prepare, run every stage, load the release, score it; returns timings and counts."""
    w = Path(workdir).resolve()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    prepare(w, real)
    timings["prepare"] = time.perf_counter() - t0
    for name, module, argv in plan(w, real, seed):
        timings[name] = run_stage(name, module, argv)
    n_trip, n_img = load_release(w / "release", w / "hf-cache")
    from benchmark import cli as bench

    report("\n=== [evaluate] python -m benchmark run --model hash --task 3xcm")
    t1 = time.perf_counter()
    rc = bench.main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(w / "release"),
                     "--output-dir", str(w / "results"), "--cache-dir", str(w / "embeddings")])
    if rc:
        raise DemoError(f"the evaluator exited with code {rc}")
    timings["evaluate"] = time.perf_counter() - t1
    timings["total"] = time.perf_counter() - t0
    return {"triplets": n_trip, "images": n_img, "timings": timings,
            "release": str(w / "release"), "results": str(w / "results" / "hash" / "3xcm.json")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m builder.demo", description=__doc__.split("\n\n")[0])
    add_workdir(p, default=DEFAULT_WORKDIR, help=f"demo folder (default {DEFAULT_WORKDIR})")
    p.add_argument("--real", action="store_true",
                   help="real services on a small scope (needs network and GEMINI_API_KEY)")
    p.add_argument("--seed", type=int, default=0, help="triplet sampling seed (default 0)")
    args = p.parse_args(argv)
    if args.real and not (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")):
        report("error: --real needs GEMINI_API_KEY (or GOOGLE_API_KEY) and network access",
               error=True)
        return 2
    # The models are built locally and the release is a local folder: never ask the Hub.
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(var, "1")
    configure()
    try:
        out = run_demo(args.workdir, args.real, args.seed)
    except DemoError as e:
        report(f"error: {e}", error=True)
        return 1
    t = out["timings"]
    report(f"\ndemo done in {t['total']:.0f} s: {out['triplets']} triplets over {out['images']} "
          f"images; release {out['release']}; results {out['results']}")
    report("  " + ", ".join(f"{k} {v:.1f}s" for k, v in t.items() if k != "total"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
