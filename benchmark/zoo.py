"""Every registered model and task, in one place (names -> lazily imported classes).

Model entries pin their checkpoint and revision. Sections are kept apart so that work on one
model family does not touch another's lines.
"""

from __future__ import annotations

from benchmark.registry import register_family, register_model, register_task

# -- tasks -------------------------------------------------------------------------------------
register_task("3xcm", "benchmark.tasks.xcm:XCMTextToImage")
register_task("3xcm-i2i", "benchmark.tasks.xcm:XCMImageToImage")
register_task("xm3600-i2t", "benchmark.tasks.xm3600:XM3600ImageToText")
register_task("3xcm-matrix", "benchmark.tasks.matrix:XCMMatrix")

# -- test / demo models ------------------------------------------------------------------------
register_model(
    "hash", "benchmark.models.hash:HashModel",
    description="deterministic fake: vectors seeded by the sha256 of each input (tests, demos)",
)

# -- open_clip family --------------------------------------------------------------------------
register_family("open_clip", "benchmark.models.openclip:OpenCLIPModel", extra="openclip")
register_model(
    "clip-l14", "benchmark.models.openclip:OpenCLIPModel", extra="openclip", paper=True,
    description="OpenAI CLIP ViT-L/14 (paper: clip-vit-large-patch14)",
    checkpoint="ViT-L-14/openai",
    # open_clip's 'openai' tag resolves to timm/vit_large_patch14_clip_224.openai on the hub.
    revision="open_clip:ViT-L-14/openai",
)

# -- transformers dual encoders (benchmark/models/hf_clip.py) ----------------------------------
# Revisions marked None could not be looked up when this was written (no hub access); the
# adapters record the commit of the snapshot they load (hub.effective_revision) in every result.
_HF = "benchmark.models.hf_clip:HFDualEncoder"
register_family("hf_clip", _HF, extra="hf")
register_model(
    "chinese-clip-l14", _HF, extra="hf", paper=True,
    description="Chinese-CLIP ViT-L/14 (paper: chinese-clip-vit-large-patch14)",
    checkpoint="OFA-Sys/chinese-clip-vit-large-patch14", revision=None,
)
register_model(
    "clip-l14-hf", _HF, extra="hf",
    description="OpenAI CLIP ViT-L/14 through transformers (the hub repo the authors' results are named after)",
    # revision as pinned by mteb (model_implementations/clip_models.py)
    checkpoint="openai/clip-vit-large-patch14", revision="32bd64288804d66eefd0ccbe215aa642df71cc41",
)
# revisions as pinned by mteb (model_implementations/siglip_models.py, the version that adds
# the SigLIP 2 ModelMetas); mteb pins no revision for the NaFlex repo, so it stays unpinned.
_SIGLIP2_REVISIONS = {
    "google/siglip2-base-patch16-256": "3f9f96cb90da5dbc758b01813f2f6f1aee24c1ab",
    "google/siglip2-so400m-patch14-384": "e8e487298228002f3d8a82e0cd5c8ea9c567f57f",
    "google/siglip2-giant-opt-patch16-384": "a713301b217d38485fb2204c808367d10bc3cc40",
}
for _name, _repo, _desc in (
    ("siglip2-base-256", "google/siglip2-base-patch16-256", "SigLIP 2 B/16 256 px, multilingual"),
    ("siglip2-so400m-384", "google/siglip2-so400m-patch14-384", "SigLIP 2 So400m/14 384 px, multilingual"),
    ("siglip2-giant-384", "google/siglip2-giant-opt-patch16-384", "SigLIP 2 g-opt/16 384 px, multilingual"),
    ("siglip2-base-naflex", "google/siglip2-base-patch16-naflex", "SigLIP 2 B/16 NaFlex (native aspect), multilingual"),
):
    register_model(_name, _HF, extra="hf", description=_desc, checkpoint=_repo,
                   revision=_SIGLIP2_REVISIONS.get(_repo))

# -- Multilingual-CLIP (benchmark/models/mclip.py) --------------------------------------------
_MCLIP = "benchmark.models.mclip:MCLIPModel"
register_model(
    "mclip-xlmr-l14", _MCLIP, extra="mclip", paper=True,
    description="M-CLIP XLM-R Large text tower + OpenAI CLIP ViT-L/14 image tower",
    checkpoint="M-CLIP/XLM-Roberta-Large-Vit-L-14", revision=None,
    image_model="ViT-L-14/openai",
)
register_model(
    "mclip-xlmr-b16plus", _MCLIP, extra="mclip", paper=True,
    description="M-CLIP XLM-R Large text tower + open_clip ViT-B-16-plus-240 (laion400m_e32)",
    checkpoint="M-CLIP/XLM-Roberta-Large-Vit-B-16Plus", revision=None,
    image_model="ViT-B-16-plus-240/laion400m_e32",
)

# -- ColQwen2.5 (benchmark/models/colqwen.py): multi-vector, MaxSim ----------------------------
_COLQWEN = "benchmark.models.colqwen:ColQwenModel"
register_family("colqwen", _COLQWEN, extra="qwen")
register_model(
    "colqwen2.5-v0.2", _COLQWEN, extra="qwen", paper=True,
    description="ColQwen2.5 v0.2 (vidore), LoRA on vidore/colqwen2.5-base",
    checkpoint="vidore/colqwen2.5-v0.2", revision="6f6fcdfd1a114dfe365f529701b33d66b9349014",
)
register_model(
    "colqwen2.5-3b-m", _COLQWEN, extra="qwen", paper=True,
    description="ColQwen2.5 3B multilingual v1.0 (Metric-AI)",
    checkpoint="Metric-AI/ColQwen2.5-3b-multilingual-v1.0", revision=None,
)
register_model(
    "colqwen2.5-7b-m", _COLQWEN, extra="qwen", paper=True,
    description="ColQwen2.5 7B multilingual v1.0 (Metric-AI)",
    checkpoint="Metric-AI/ColQwen2.5-7b-multilingual-v1.0", revision=None,
)

# -- GME-Qwen2-VL (benchmark/models/gme.py) ----------------------------------------------------
_GME = "benchmark.models.gme:GMEModel"
register_family("gme", _GME, extra="qwen")
register_model(
    "gme-qwen2-2b", _GME, extra="qwen", paper=True,
    description="GME-Qwen2-VL 2B Instruct: last-token embeddings",
    checkpoint="Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", revision="ce765ae71b8cdb208203cd8fb64a170b1b84293a",
)
register_model(
    "gme-qwen2-7b", _GME, extra="qwen", paper=True,
    description="GME-Qwen2-VL 7B Instruct: last-token embeddings",
    checkpoint="Alibaba-NLP/gme-Qwen2-VL-7B-Instruct", revision="477027a6480f8630363be77751f169cc3434b673",
)

# -- Jina (benchmark/models/jina.py) -----------------------------------------------------------
_JV4 = "benchmark.models.jina:JinaV4Model"
register_family("jina_v4", _JV4, extra="qwen")
register_model(
    "jina-v4", _JV4, extra="qwen", paper=True,
    description="jina-embeddings-v4, retrieval adapter, single vector (as the paper)",
    checkpoint="jinaai/jina-embeddings-v4", revision="853c867b65b749f3c3c72a06868140d842e04f06",
)
register_model(
    "jina-v4-multi", _JV4, extra="qwen",
    description="jina-embeddings-v4, retrieval adapter, multi-vector (MaxSim)",
    checkpoint="jinaai/jina-embeddings-v4", revision="853c867b65b749f3c3c72a06868140d842e04f06",
    multi_vector=True,
)
register_model(
    "jina-clip-v2", "benchmark.models.jina:JinaCLIPModel", extra="hf",
    description="jina-clip-v2 (remote code; see docs/models.md for what is unverified)",
    # revision as pinned by mteb (model_implementations/jina_clip.py)
    checkpoint="jinaai/jina-clip-v2", revision="344d954da76eb8ad47a7aaff42d012e30c15b8fe",
)
