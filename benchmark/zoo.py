"""Every registered model and task: one typed record per model, plain data importing nothing
of the package. A :class:`Model` is the model's whole identity (like mteb's ``ModelMeta``);
the registry, ``ls``, the adapters' arguments and the profiles derive from it. A malformed
record is a :class:`ZooError` at import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

COMMIT = re.compile(r"^[0-9a-f]{40}$")
MODALITIES = ("text", "image")
SIMILARITIES = ("cosine", "maxsim")
REPO_TYPES = ("model", "dataset")
CONVENTIONS_MD = "data/authors/CONVENTIONS.md §1"  # where the authors' downloads are cited


class ZooError(ValueError):
    """A malformed model record (one line naming the model and the field)."""


@dataclass(frozen=True)
class Download:
    """One hub repo a model's authors' conventions load. ``revision`` None: the model's own
    pin when ``repo`` is its checkpoint (:meth:`Model.pinned_downloads`), else unpinned."""

    repo: str
    role: str
    source: str = CONVENTIONS_MD
    revision: str | None = None
    repo_type: str = "model"


@dataclass(frozen=True)
class Model:
    """One model: ``parameters`` in millions, ``embedding_size`` per vector (or token),
    ``languages`` ISO 639 (``mul``; empty: any), conventions ``profiles``."""

    name: str
    checkpoint: str
    revision: str | None
    description: str
    paper: bool = False  # one of the paper's ten models
    options: Mapping[str, Any] = field(default_factory=dict)  # further adapter arguments
    parameters: float | None = None
    embedding_size: int | None = None
    languages: tuple[str, ...] = ()
    modalities: tuple[str, ...] = MODALITIES
    similarity: str = "cosine"
    profiles: bool = False
    downloads: tuple[Download, ...] = ()
    target: str = ""
    extra: str = ""

    def __post_init__(self) -> None:
        bad = _problem(self)
        if bad:
            raise ZooError(f"zoo model {self.name!r}: {bad}")

    @property
    def kwargs(self) -> dict[str, Any]:
        """The adapter's arguments: the pin, the options, and a multi-vector similarity."""
        pin = {"checkpoint": self.checkpoint, "revision": self.revision} if self.checkpoint else {}
        return {**pin, **self.options, **({"multi_vector": True} if self.similarity == "maxsim"
                                          else {})}

    def pinned_downloads(self) -> tuple[Download, ...]:
        """The downloads, a repo that is the checkpoint pinned at the model's revision."""
        return tuple(replace(d, revision=self.revision)
                     if d.revision is None and d.repo == self.checkpoint else d
                     for d in self.downloads)


def _problem(m: Model) -> str:
    """What is wrong with record ``m`` ('' when nothing)."""
    if not m.name or any(c.isspace() for c in m.name) or ":" in m.name:
        return "the name must be one word without ':'"
    if m.target and ":" not in m.target:
        return f"target {m.target!r} is not module:Class"
    if m.revision is not None and not COMMIT.match(m.revision) and ":" not in m.revision:
        return f"revision {m.revision!r} is neither a 40-hex commit nor a tag"
    if m.parameters is not None and not m.parameters > 0:
        return f"parameters {m.parameters!r} must be > 0 (millions)"
    if m.embedding_size is not None and (not isinstance(m.embedding_size, int)
                                         or m.embedding_size <= 0):
        return f"embedding_size {m.embedding_size!r} must be a positive int"
    if not m.modalities or set(m.modalities) - set(MODALITIES):
        return f"modalities {m.modalities!r} must be drawn from {MODALITIES}"
    if m.similarity not in SIMILARITIES:
        return f"similarity {m.similarity!r} must be one of {SIMILARITIES}"
    if any(not re.fullmatch(r"[a-z]{2,3}", lang) for lang in m.languages):
        return f"languages {m.languages!r} must be ISO 639 codes"
    if m.profiles and not m.paper:
        return "only the paper's models have conventions profiles"
    for d in m.downloads:
        if d.repo_type not in REPO_TYPES or "/" not in d.repo or not d.role:
            return f"download {d.repo!r}: needs owner/name, a role and a type in {REPO_TYPES}"
        if d.revision is not None and not COMMIT.match(d.revision):
            return f"download {d.repo!r}: revision {d.revision!r} is not a 40-hex commit"
    if m.paper and not m.downloads:
        return "a paper model lists the hub repos it downloads"
    return ""


M = Model  # the tables below are written with the short name


class Family(NamedTuple):
    """One adapter class: ``module:Class``, pip extra, models, ``prefix:ARG`` prefix (or None)."""

    target: str
    extra: str
    models: list[Model]
    prefix: str | None = None


FAMILIES: list[Family] = []


def family(target: str, extra: str, models: list[Model], prefix: str | None = None) -> None:
    """Add the table of one adapter class (read by the registry, in this order)."""
    FAMILIES.append(Family(target, extra, [replace(m, target=target, extra=extra)
                                           for m in models], prefix))


def models() -> dict[str, Model]:
    """Every record of the tables, in table order (a name twice: the registry refuses it)."""
    return {m.name: m for fam in FAMILIES for m in fam.models}


def paper_models() -> dict[str, Model]:
    """The records with conventions profiles (the paper's ten), in table order."""
    return {n: m for n, m in models().items() if m.profiles}


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
      "deterministic fake: vectors seeded by the sha256 of each input (tests, demos)",
      embedding_size=64),
])

# -- mteb family (benchmark/mteb/models.py): mteb:NAME is any model of mteb's registry,
# pinned by its ModelMeta's revision (`python -m benchmark ls --mteb` lists them) ------------
family("benchmark.mteb.models:MTEBModel", "mteb", models=[], prefix="mteb")

# Parameters of the paper's models: Table 6 (data/paper/table6_models.csv; a test checks).
# clip-l14-hf: revision as pinned by mteb (model_implementations/clip_models.py); the authors'
# conventions of clip-l14 load this same snapshot.
CLIP_L14_HF = "openai/clip-vit-large-patch14"
CLIP_L14_HF_REVISION = "32bd64288804d66eefd0ccbe215aa642df71cc41"

# -- open_clip family --------------------------------------------------------------------------
# open_clip's 'openai' tag resolves to timm/vit_large_patch14_clip_224.openai on the hub.
family("benchmark.models.openclip:OpenCLIPModel", "openclip", prefix="open_clip", models=[
    M("clip-l14", "ViT-L-14/openai", "open_clip:ViT-L-14/openai",
      "OpenAI CLIP ViT-L/14 (paper: clip-vit-large-patch14)", paper=True, profiles=True,
      parameters=427.6, embedding_size=768, languages=("en",),
      downloads=(Download(CLIP_L14_HF, "weights (authors: transformers AutoModel + "
                          "AutoProcessor)", revision=CLIP_L14_HF_REVISION,
                          source=f"{CONVENTIONS_MD}; revision as the zoo pins it for "
                                 "clip-l14-hf (mteb's pin)"),)),
])

# -- transformers dual encoders (benchmark/models/hf_clip.py) ----------------------------------
# SigLIP 2: as pinned by mteb (model_implementations/siglip_models.py, the version that adds
# the SigLIP 2 ModelMetas); mteb pins no revision for the NaFlex repo, so it stays unpinned.
_HF_WEIGHTS = "weights (transformers AutoModel + AutoProcessor)"
family("benchmark.models.hf_clip:HFDualEncoder", "hf", prefix="hf_clip", models=[
    # PIL image processor: the card's transformers 4.x default (transformers 5 defaults to
    # torchvision, whose resized pixels differ); see benchmark/models/conventions.py
    M("chinese-clip-l14", "OFA-Sys/chinese-clip-vit-large-patch14", None,
      "Chinese-CLIP ViT-L/14 (paper: chinese-clip-vit-large-patch14)", paper=True,
      options={"image_backend": "pil"}, profiles=True, parameters=406.2, embedding_size=768,
      languages=("zh",),
      downloads=(Download("OFA-Sys/chinese-clip-vit-large-patch14", _HF_WEIGHTS),)),
    M("clip-l14-hf", CLIP_L14_HF, CLIP_L14_HF_REVISION,
      "OpenAI CLIP ViT-L/14 through transformers (the hub repo the authors' results are named "
      "after)", parameters=427.6, embedding_size=768, languages=("en",)),
    M("siglip2-base-256", "google/siglip2-base-patch16-256",
      "3f9f96cb90da5dbc758b01813f2f6f1aee24c1ab", "SigLIP 2 B/16 256 px, multilingual",
      embedding_size=768, languages=("mul",)),
    M("siglip2-so400m-384", "google/siglip2-so400m-patch14-384",
      "e8e487298228002f3d8a82e0cd5c8ea9c567f57f", "SigLIP 2 So400m/14 384 px, multilingual",
      embedding_size=1152, languages=("mul",)),
    M("siglip2-giant-384", "google/siglip2-giant-opt-patch16-384",
      "a713301b217d38485fb2204c808367d10bc3cc40", "SigLIP 2 g-opt/16 384 px, multilingual",
      embedding_size=1536, languages=("mul",)),
    M("siglip2-base-naflex", "google/siglip2-base-patch16-naflex", None,
      "SigLIP 2 B/16 NaFlex (native aspect), multilingual", embedding_size=768,
      languages=("mul",)),
])

# -- Multilingual-CLIP (benchmark/models/mclip.py) --------------------------------------------
_MCLIP_TEXT = "text tower and tokenizer"
family("benchmark.models.mclip:MCLIPModel", "mclip", models=[
    M("mclip-xlmr-l14", "M-CLIP/XLM-Roberta-Large-Vit-L-14", None,
      "M-CLIP XLM-R Large text tower + OpenAI CLIP ViT-L/14 image tower", paper=True,
      options={"image_model": "ViT-L-14/openai"}, profiles=True, parameters=998.3,
      embedding_size=768, languages=("mul",),
      downloads=(Download("M-CLIP/XLM-Roberta-Large-Vit-L-14", _MCLIP_TEXT),
                 Download("timm/vit_large_patch14_clip_224.openai",
                          "image tower, RQ1 (authors: OpenAI clip.load ViT-L/14, the same "
                          "weights)"))),
    M("mclip-xlmr-b16plus", "M-CLIP/XLM-Roberta-Large-Vit-B-16Plus", None,
      "M-CLIP XLM-R Large text tower + open_clip ViT-B-16-plus-240 (laion400m_e32)", paper=True,
      options={"image_model": "ViT-B-16-plus-240/laion400m_e32"}, profiles=True,
      parameters=768.9, embedding_size=640, languages=("mul",),
      downloads=(Download("M-CLIP/XLM-Roberta-Large-Vit-B-16Plus", _MCLIP_TEXT),
                 Download("timm/vit_base_patch16_plus_clip_240.laion400m_e32",
                          "image tower (open_clip ViT-B-16-plus-240 laion400m_e32)"))),
])

# -- ColQwen2.5 (benchmark/models/colqwen.py): multi-vector, MaxSim ----------------------------
_LORA = "LoRA adapter and processor"
_COL = {"paper": True, "profiles": True, "embedding_size": 128, "similarity": "maxsim"}
family("benchmark.models.colqwen:ColQwenModel", "qwen", prefix="colqwen", models=[
    M("colqwen2.5-v0.2", "vidore/colqwen2.5-v0.2", "6f6fcdfd1a114dfe365f529701b33d66b9349014",
      "ColQwen2.5 v0.2 (vidore), LoRA on vidore/colqwen2.5-base", parameters=3814.8,
      languages=("en",), **_COL,
      downloads=(Download("vidore/colqwen2.5-v0.2", _LORA),
                 Download("vidore/colqwen2.5-base", "LoRA base (named in the adapter's "
                          "adapter_config.json)", source="benchmark/models/colqwen.py"))),
    M("colqwen2.5-3b-m", "Metric-AI/ColQwen2.5-3b-multilingual-v1.0", None,
      "ColQwen2.5 3B multilingual v1.0 (Metric-AI)", parameters=3994.6, languages=("mul",),
      **_COL, downloads=(Download("Metric-AI/ColQwen2.5-3b-multilingual-v1.0", _LORA),)),
    M("colqwen2.5-7b-m", "Metric-AI/ColQwen2.5-7b-multilingual-v1.0", None,
      "ColQwen2.5 7B multilingual v1.0 (Metric-AI)", parameters=8071.1, languages=("mul",),
      **_COL, downloads=(Download("Metric-AI/ColQwen2.5-7b-multilingual-v1.0", _LORA),)),
])

# -- GME-Qwen2-VL (benchmark/models/gme.py) ----------------------------------------------------
_REMOTE = "weights and remote code"
family("benchmark.models.gme:GMEModel", "qwen", prefix="gme", models=[
    M("gme-qwen2-2b", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct",
      "ce765ae71b8cdb208203cd8fb64a170b1b84293a",
      "GME-Qwen2-VL 2B Instruct: last-token embeddings", paper=True, profiles=True,
      parameters=2209.0, embedding_size=1536, languages=("mul",),
      downloads=(Download("Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", _REMOTE),)),
    M("gme-qwen2-7b", "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct",
      "477027a6480f8630363be77751f169cc3434b673",
      "GME-Qwen2-VL 7B Instruct: last-token embeddings", paper=True, profiles=True,
      parameters=7070.6, embedding_size=3584, languages=("mul",),
      downloads=(Download("Alibaba-NLP/gme-Qwen2-VL-7B-Instruct", _REMOTE),)),
])

# -- Jina (benchmark/models/jina.py) -----------------------------------------------------------
_JV4_REV = "853c867b65b749f3c3c72a06868140d842e04f06"
family("benchmark.models.jina:JinaV4Model", "qwen", prefix="jina_v4", models=[
    M("jina-v4", "jinaai/jina-embeddings-v4", _JV4_REV,
      "jina-embeddings-v4, retrieval adapter, single vector (as the paper)", paper=True,
      profiles=True, parameters=3934.7, embedding_size=2048, languages=("mul",),
      downloads=(Download("jinaai/jina-embeddings-v4", _REMOTE),)),
    M("jina-v4-multi", "jinaai/jina-embeddings-v4", _JV4_REV,
      "jina-embeddings-v4, retrieval adapter, multi-vector (MaxSim)",
      parameters=3934.7, embedding_size=128,
      languages=("mul",), similarity="maxsim"),
])
# revision as pinned by mteb (model_implementations/jina_clip.py)
family("benchmark.models.jina:JinaCLIPModel", "hf", models=[
    M("jina-clip-v2", "jinaai/jina-clip-v2", "344d954da76eb8ad47a7aaff42d012e30c15b8fe",
      "jina-clip-v2 (remote code; see docs/models.md for what is unverified)",
      embedding_size=1024, languages=("mul",)),
])
