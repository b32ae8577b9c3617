"""Every registered model and task, in one place (names -> lazily imported classes): plain
data that imports nothing of the package; :mod:`benchmark.registry` reads it when imported.

Model entries pin their checkpoint and revision; an entry with its adapter's defaults is the
model's ``reference`` conventions, and the paper's ten models also have ``authors`` conventions
(:mod:`benchmark.models.conventions`, applied by ``registry.load_model``). One table per adapter class, so that work on
one model family does not touch another's lines. Revisions marked None could not be looked up
when this was written (no hub access); the adapters record the commit of the snapshot they
load (``hub.effective_revision``) in every result.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class M(NamedTuple):
    """One model of a family table: name, checkpoint, pinned revision, description."""

    name: str
    checkpoint: str
    revision: str | None
    description: str
    paper: bool = False  # one of the paper's ten models
    kwargs: dict[str, Any] = {}  # further constructor arguments of the adapter


class Family(NamedTuple):
    """One adapter class: its ``module:Class``, the pip extra of its libraries, its
    ``prefix:ARG`` family prefix (None: no family), and its registered models."""

    target: str
    extra: str
    models: list[M]
    prefix: str | None = None


FAMILIES: list[Family] = []


def family(target: str, extra: str, models: list[M], prefix: str | None = None) -> None:
    """Add the table of one adapter class (read by the registry, in this order)."""
    FAMILIES.append(Family(target, extra, models, prefix))


# -- tasks -------------------------------------------------------------------------------------
TASKS: dict[str, str] = {
    "3xcm": "benchmark.tasks.xcm:XCMTextToImage",
    "3xcm-i2i": "benchmark.tasks.xcm:XCMImageToImage",
    "xm3600-i2t": "benchmark.tasks.xm3600:XM3600ImageToText",
    "3xcm-matrix": "benchmark.tasks.matrix:XCMMatrix",
}

# -- test / demo models ------------------------------------------------------------------------
family("benchmark.models.hash:HashModel", "", models=[
    M("hash", "", None,
      "deterministic fake: vectors seeded by the sha256 of each input (tests, demos)"),
])

# -- mteb family (benchmark/models/mteb_models.py): mteb:NAME is any model of mteb's registry,
# pinned by its ModelMeta's revision (`python -m benchmark ls --mteb` lists them) ------------
family("benchmark.models.mteb_models:MTEBModel", "mteb", models=[], prefix="mteb")

# -- open_clip family --------------------------------------------------------------------------
# open_clip's 'openai' tag resolves to timm/vit_large_patch14_clip_224.openai on the hub.
family("benchmark.models.openclip:OpenCLIPModel", "openclip", prefix="open_clip", models=[
    M("clip-l14", "ViT-L-14/openai", "open_clip:ViT-L-14/openai",
      "OpenAI CLIP ViT-L/14 (paper: clip-vit-large-patch14)", paper=True),
])

# -- transformers dual encoders (benchmark/models/hf_clip.py) ----------------------------------
# clip-l14-hf: revision as pinned by mteb (model_implementations/clip_models.py); SigLIP 2:
# as pinned by mteb (model_implementations/siglip_models.py, the version that adds the SigLIP 2
# ModelMetas); mteb pins no revision for the NaFlex repo, so it stays unpinned.
family("benchmark.models.hf_clip:HFDualEncoder", "hf", prefix="hf_clip", models=[
    # PIL image processor: the card's transformers 4.x default (transformers 5 defaults to
    # torchvision, whose resized pixels differ); see benchmark/models/conventions.py
    M("chinese-clip-l14", "OFA-Sys/chinese-clip-vit-large-patch14", None,
      "Chinese-CLIP ViT-L/14 (paper: chinese-clip-vit-large-patch14)", paper=True,
      kwargs={"image_backend": "pil"}),
    M("clip-l14-hf", "openai/clip-vit-large-patch14", "32bd64288804d66eefd0ccbe215aa642df71cc41",
      "OpenAI CLIP ViT-L/14 through transformers (the hub repo the authors' results are named "
      "after)"),
    M("siglip2-base-256", "google/siglip2-base-patch16-256",
      "3f9f96cb90da5dbc758b01813f2f6f1aee24c1ab", "SigLIP 2 B/16 256 px, multilingual"),
    M("siglip2-so400m-384", "google/siglip2-so400m-patch14-384",
      "e8e487298228002f3d8a82e0cd5c8ea9c567f57f", "SigLIP 2 So400m/14 384 px, multilingual"),
    M("siglip2-giant-384", "google/siglip2-giant-opt-patch16-384",
      "a713301b217d38485fb2204c808367d10bc3cc40", "SigLIP 2 g-opt/16 384 px, multilingual"),
    M("siglip2-base-naflex", "google/siglip2-base-patch16-naflex", None,
      "SigLIP 2 B/16 NaFlex (native aspect), multilingual"),
])

# -- Multilingual-CLIP (benchmark/models/mclip.py) --------------------------------------------
family("benchmark.models.mclip:MCLIPModel", "mclip", models=[
    M("mclip-xlmr-l14", "M-CLIP/XLM-Roberta-Large-Vit-L-14", None,
      "M-CLIP XLM-R Large text tower + OpenAI CLIP ViT-L/14 image tower", paper=True,
      kwargs={"image_model": "ViT-L-14/openai"}),
    M("mclip-xlmr-b16plus", "M-CLIP/XLM-Roberta-Large-Vit-B-16Plus", None,
      "M-CLIP XLM-R Large text tower + open_clip ViT-B-16-plus-240 (laion400m_e32)", paper=True,
      kwargs={"image_model": "ViT-B-16-plus-240/laion400m_e32"}),
])

# -- ColQwen2.5 (benchmark/models/colqwen.py): multi-vector, MaxSim ----------------------------
family("benchmark.models.colqwen:ColQwenModel", "qwen", prefix="colqwen", models=[
    M("colqwen2.5-v0.2", "vidore/colqwen2.5-v0.2", "6f6fcdfd1a114dfe365f529701b33d66b9349014",
      "ColQwen2.5 v0.2 (vidore), LoRA on vidore/colqwen2.5-base", paper=True),
    M("colqwen2.5-3b-m", "Metric-AI/ColQwen2.5-3b-multilingual-v1.0", None,
      "ColQwen2.5 3B multilingual v1.0 (Metric-AI)", paper=True),
    M("colqwen2.5-7b-m", "Metric-AI/ColQwen2.5-7b-multilingual-v1.0", None,
      "ColQwen2.5 7B multilingual v1.0 (Metric-AI)", paper=True),
])

# -- GME-Qwen2-VL (benchmark/models/gme.py) ----------------------------------------------------
family("benchmark.models.gme:GMEModel", "qwen", prefix="gme", models=[
    M("gme-qwen2-2b", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct",
      "ce765ae71b8cdb208203cd8fb64a170b1b84293a",
      "GME-Qwen2-VL 2B Instruct: last-token embeddings", paper=True),
    M("gme-qwen2-7b", "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct",
      "477027a6480f8630363be77751f169cc3434b673",
      "GME-Qwen2-VL 7B Instruct: last-token embeddings", paper=True),
])

# -- Jina (benchmark/models/jina.py) -----------------------------------------------------------
_JV4_REV = "853c867b65b749f3c3c72a06868140d842e04f06"
family("benchmark.models.jina:JinaV4Model", "qwen", prefix="jina_v4", models=[
    M("jina-v4", "jinaai/jina-embeddings-v4", _JV4_REV,
      "jina-embeddings-v4, retrieval adapter, single vector (as the paper)", paper=True),
    M("jina-v4-multi", "jinaai/jina-embeddings-v4", _JV4_REV,
      "jina-embeddings-v4, retrieval adapter, multi-vector (MaxSim)",
      kwargs={"multi_vector": True}),
])
# revision as pinned by mteb (model_implementations/jina_clip.py)
family("benchmark.models.jina:JinaCLIPModel", "hf", models=[
    M("jina-clip-v2", "jinaai/jina-clip-v2", "344d954da76eb8ad47a7aaff42d012e30c15b8fe",
      "jina-clip-v2 (remote code; see docs/models.md for what is unverified)"),
])
