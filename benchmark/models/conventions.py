"""Model conventions as data: a ``reference`` and an ``authors`` profile per paper model.

``run --conventions reference|authors``: the model card's intended use, or what the paper's
code did (``data/authors/CONVENTIONS.md``). A profile is an overlay on the zoo record, never
its identity; the resolved record is recorded in results and keys the embedding cache.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmark import zoo

PROFILES = ("reference", "authors")
DEFAULT_PROFILE = "reference"
# clip.load("ViT-L/14", device=...) keeps fp16 weights on CUDA and casts to fp32 on the CPU
CLIP_LOAD_DTYPE = "float16 on cuda, float32 on cpu (clip.load)"
TWO_STAGE_L2 = "two-stage-l2"
EXACT = "exact"
RETRIEVALS = (EXACT, TWO_STAGE_L2)
IDENTITY = ("similarity", "target", "extra", "checkpoint", "revision")  # the zoo record's
SIMILARITY_WORDS = {"cosine": "cosine", "maxsim": "MaxSim, padding masked"}


class ConventionsError(LookupError):
    """An unknown profile, or a profile the model does not have (one line)."""


@dataclass(frozen=True)
class Conventions:
    """How one model embeds and scores under one profile: words beside the operative fields."""

    implementation: str  # the code path followed (library, class, loader)
    dtype: str | None = None  # None: --dtype, else the device default (bf16/fp16 GPU, fp32 CPU)
    text: str = ""  # tokenisation: padding, truncation
    image: str = ""  # image processor / transform, and the image tower where it is separate
    query_prompt: str = "{text}"  # how a text query is written ({text} = the text)
    document_prompt: str = "{text}"  # how a text document (an XM3600 caption) is written
    pooling: str = ""
    normalization: str = "L2"
    scorer: str = ""  # how the record's similarity is computed, in words ("": its own)
    retrieval: str = EXACT  # xm3600-i2t only: exact, or two-stage-l2 (mean-pooled L2 + MaxSim)
    loads: str | None = None  # another zoo record whose identity (weights, adapter) this loads
    options: Mapping[str, Any] = field(default_factory=dict)  # adapter keyword arguments
    sources: str = ""  # where each convention comes from (not part of the cache key)
    # set by resolve(): the identity (a loaded record's; None: the model's own) and the run
    similarity: str | None = None
    target: str | None = None
    extra: str | None = None
    checkpoint: str | None = None
    revision: str | None = None
    model: str = ""
    profile: str = ""
    deviations: tuple[str, ...] = ()  # what the run changed (e.g. --dtype against the profile)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (results files, ``ls --conventions``)."""
        d = dataclasses.asdict(self)
        del d["scorer"], d["loads"]  # recorded as the similarity and the identity they give
        d["options"] = dict(self.options)
        d["deviations"] = list(self.deviations)
        return d

    def cache_key(self) -> dict[str, Any]:
        """What enters the embedding-cache namespace: everything but the prose sources."""
        d = self.as_dict()
        d.pop("sources")
        return d


# -- shared wording -----------------------------------------------------------------------------
_PIL = "PIL ('slow') image processor of the checkpoint, as transformers 4.x loaded it"
_COLQWEN_QUERY = "Query: {text}" + "<|endoftext|>" * 10
_COLQWEN_IMAGE = (f"{_PIL}; prompt <|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>"
                  "Describe the image.<|im_end|><|endoftext|>; the checkpoint's pixel bounds")
_GME_CHAT = ("<|im_start|>system\\n{instruction}<|im_end|>\\n<|im_start|>user\\n{text}<|im_end|>"
             "\\n<|im_start|>assistant\\n<|endoftext|>")
_GME_DEFAULT = "You are a helpful assistant."
_GME_T2I = "Find an image that matches the given text."
_GME_IMAGE = (f"{_PIL}; GME fetch_image resize, then 256-1280 image tokens of 28x28 px; "
              f"instruction {_GME_DEFAULT!r}")
_JINA_IMAGE = (f"{_PIL}; prompt <|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>"
               "Describe the image.<|im_end|>\\n")
_MCLIP_TEXT = ("XLM-R tokenizer, padding longest, truncation at 512 (the package truncates "
               "nothing; no caption reaches it)")
_MCLIP_POOL = "attention-masked mean of XLM-R states, then the linear map (multilingual-clip)"


def _profiles(ref: Conventions, **authors: Any) -> dict[str, Conventions]:
    """The reference record and the authors' (the reference with ``authors`` changed)."""
    return {"reference": ref, "authors": dataclasses.replace(ref, **authors)}


def _colqwen(dtype_src: str) -> dict[str, Conventions]:
    return _profiles(Conventions(
        implementation="colpali-engine ColQwen2_5 + ColQwen2_5_Processor, re-implemented on "
                       "transformers' Qwen2_5_VLModel (LoRA merged)",
        text="left padding; no truncation",
        image=_COLQWEN_IMAGE,
        query_prompt=_COLQWEN_QUERY, document_prompt=_COLQWEN_QUERY,
        pooling="none: one 128-d vector per token (custom_text_proj), padding dropped",
        normalization="L2 per token (float32)",
        sources="colpali-engine <= 0.3.12 process_queries (the prefix the checkpoints were "
                "trained with; 0.3.13+ dropped it); model cards",
    ), dtype="bfloat16",
        scorer="colpali score_multi_vector, one document per call (no zero padding "
               "enters: equals masked MaxSim)",
        retrieval=TWO_STAGE_L2,
        normalization="L2 per token in bfloat16 (ColQwen2_5.forward: proj / proj.norm())",
        options={"scorer": "colpali-per-document", "normalize_dtype": "model"},
        sources=f"colpali-engine git 9bee9b2b (= v0.3.12 + a sampler fix): process_queries "
                f"'Query: ' + text + '<|endoftext|>' x 10; {dtype_src}; RQ2 scores per "
                f"candidate (BE l.26-39, 103-118); RQ1 two-stage: mean-pooled vectors in faiss "
                f"IndexFlatL2 top-100, reranked one caption per score_multi_vector call, top "
                f"100 kept, ties in L2 order (colqwen25_score_v2.py l.76-196, 2B cells 1-5)")


def _gme() -> dict[str, Conventions]:
    return _profiles(Conventions(
        implementation="gme_inference.py GmeQwen2VL, re-implemented on transformers' "
                       "Qwen2VLModel (sequential positions, as upstream)",
        text="right padding, truncation at 1800 tokens",
        image=_GME_IMAGE,
        query_prompt=_GME_CHAT.replace("{instruction}", _GME_T2I),
        document_prompt=_GME_CHAT.replace("{instruction}", _GME_DEFAULT),
        pooling="last token", normalization="L2 (float32)",
        sources="model card: text->image queries with the instruction "
                f"{_GME_T2I!r}; corpus sides use the default instruction",
    ), dtype="float16",
        query_prompt=_GME_CHAT.replace("{instruction}", _GME_DEFAULT),
        normalization="L2 in float16 (the wrapper normalises the float16 output)",
        options={"query_instruction": None, "normalize_dtype": "model"},
        sources="R1E cell 8, gme_embed_v3.py: AutoModel float16, get_text_embeddings(texts=...) "
                "with no instruction, so the wrapper's default 'You are a helpful assistant.' "
                "for every text; get_image_embeddings(images=[PIL])")


def _mclip(image_ref: str, image_model: str, image_auth: str, auth_dtype: str,
           why: str) -> dict[str, Conventions]:
    return _profiles(Conventions(
        implementation="multilingual-clip MultilingualCLIP text tower (built from its state "
                       "dict) + open_clip image tower",
        text=_MCLIP_TEXT, image=image_ref, pooling=_MCLIP_POOL,
        sources="M-CLIP model cards: each text tower with the image tower it was trained on",
    ), dtype="float32", image=image_auth,
        options={"image_model": image_model, "image_dtype": auth_dtype}, sources=why)


def _chinese_clip() -> dict[str, Conventions]:
    return _profiles(Conventions(
        implementation="transformers AutoModel + AutoProcessor (ChineseCLIPModel)",
        text="padding=True, truncation at text_config.max_position_embeddings (512)",
        image=f"ChineseCLIPImageProcessor, {_PIL}",
        pooling="get_text_features / get_image_features", normalization="L2",
        sources="OFA-Sys model card (processor(text=..., padding=True))",
    ), dtype="float32", sources="R2E cells 8-10 (the same code as CLIP-L/14, float32)")


def _jina() -> dict[str, Conventions]:
    ref = Conventions(
        implementation="modeling_jina_embeddings_v4.py, re-implemented on transformers' "
                       "Qwen2_5_VLModel (retrieval LoRA merged)",
        text="padding longest, truncation at 32768 tokens",
        image=_JINA_IMAGE,
        query_prompt="Query: {text}", document_prompt="Passage: {text}",
        pooling="mean over the attention mask (texts), over <|vision_start|>..<|vision_end|> "
                "(images); single vector",
        normalization="L2 (float32)",
        sources="model card: encode_text(task='retrieval', prompt_name='query'|'passage')",
    )
    return _profiles(
        ref, dtype="float16", document_prompt="Query: {text}",
        implementation=ref.implementation + "; float16 weights, every encode under "
                       "torch.autocast(dtype=bfloat16) (the remote code's _process_batches)",
        image=_JINA_IMAGE.replace(_PIL, "torchvision ('fast') image processor "
                                  "(JinaEmbeddingsV4Processor.from_pretrained(use_fast=True))"),
        normalization="L2 under bfloat16 autocast (the remote code's F.normalize inside "
                      "torch.autocast), then float32",
        options={"document_prompt": "query", "normalize_dtype": "model",
                 "image_backend": "torchvision", "autocast": "bfloat16"},
        sources="R1E cell 16, embed_jina_rq1_single_vector.py l.98-102: AutoModel float16, "
                "encode_text(task='retrieval', prompt_name='query') for every caption; RQ2 "
                "(embed_jina_rq2_single_vector.py) the same; encode_image(task='retrieval'). "
                "The remote code (modeling_jina_embeddings_v4.py, docs/models.md) loads its "
                "processor with use_fast=True and runs forward, pooling and F.normalize under "
                "torch.autocast(device_type, dtype=torch.bfloat16)",
    )


def _clip_l14(m: zoo.Model) -> dict[str, Conventions]:
    return {  # the authors loaded the transformers snapshot (clip-l14-hf)
        "reference": Conventions(
            implementation="open_clip ViT-L-14/openai",
            text="open_clip tokenizer, context 77 (padded and truncated to 77)",
            image="open_clip validation transform: shortest side to 224 (bicubic), centre "
                  "crop, OpenAI mean/std; QuickGELU",
            pooling="EOT token, projection", normalization="L2",
            sources="open_clip zero-shot code and CLIP_benchmark",
        ),
        "authors": Conventions(
            implementation="transformers AutoModel + AutoProcessor", loads="clip-l14-hf",
            dtype="float32", options={"image_backend": "pil"},
            text="CLIPProcessor: padding=True, truncation at text_config.max_position_embeddings (77)",
            image=f"CLIPImageProcessor, {_PIL}",
            pooling="get_text_features / get_image_features", normalization="L2",
            sources="R2E cells 8-10: AutoModel/AutoProcessor, no dtype (float32), one string "
                    "per call; transformers 4.53.3 pinned (slow image processor by default)",
        ),
    }


# Each paper model's two profiles, built from its zoo record (benchmark/zoo.py: profiles=True):
# the identity (checkpoint, revision, downloads) is the record's; the prose is here.
_BUILD: dict[str, Callable[[zoo.Model], dict[str, Conventions]]] = {
    "clip-l14": _clip_l14,
    "chinese-clip-l14": lambda m: _chinese_clip(),
    "mclip-xlmr-l14": lambda m: _mclip(
        "open_clip ViT-L-14/openai (the run's dtype)", "ViT-L-14/openai",
        f"OpenAI CLIP ViT-L/14 as clip.load gives it ({CLIP_LOAD_DTYPE}; "
        "same weights and preprocessing as open_clip's ViT-L-14/openai)",
        CLIP_LOAD_DTYPE,
        "RQ1: embed_mclip_rq1.py l.25-29, 66-68 and R1E cell 18 (MultilingualCLIP float32, "
        "clip.load('ViT-L/14')). RQ2 as written (embed_mclip_rq2.py l.24-27) pairs this 768-d "
        "text tower with the 640-d ViT-B-16-plus-240, which cannot produce a score "
        "(CONVENTIONS.md section 5); the published RQ2 pickles were regenerated elsewhere. "
        "Choice: the image tower the authors' own RQ1 code paired with this text tower, for "
        "both RQs",
    ),
    "mclip-xlmr-b16plus": lambda m: _mclip(
        "open_clip ViT-B-16-plus-240/laion400m_e32 (the run's dtype)",
        "ViT-B-16-plus-240/laion400m_e32", "open_clip ViT-B-16-plus-240/laion400m_e32, float32",
        "float32",
        "RQ2: embed_mclip_rq2.py l.24-27 and R2E cell 29 (open_clip ViT-B-16-plus-240 "
        "laion400m_e32, float32, MultilingualCLIP float32). RQ1: no code for this model; the "
        "same tower (the only one matching its 640-d text vectors)",
    ),
    "colqwen2.5-v0.2": lambda m: _colqwen("bfloat16 (colqwen25_embed.py l.22-30, R2E)"),
    "colqwen2.5-3b-m": lambda m: _colqwen("bfloat16 (col_series_embed25_v2.py)"),
    "colqwen2.5-7b-m": lambda m: _colqwen("bfloat16 (colqwen25_embed.py; R1E cell 12 used "
                                          "float16)"),
    "gme-qwen2-2b": lambda m: _gme(),
    "gme-qwen2-7b": lambda m: _gme(),
    "jina-v4": lambda m: _jina(),
}


def paper_conventions(records: Mapping[str, zoo.Model]) -> dict[str, dict[str, Conventions]]:
    """Profile -> record per model of ``records`` with profiles (zoo order); a zoo model with
    profiles and no builder here, or a builder for no such model, is a ConventionsError."""
    if set(records) != set(_BUILD):
        raise ConventionsError(
            f"conventions builders {sorted(set(_BUILD) - set(records))} have no zoo model with "
            f"profiles; zoo models {sorted(set(records) - set(_BUILD))} have no builder")
    out = {name: _BUILD[name](m) for name, m in records.items()}
    known = zoo.models()
    for name, recs in out.items():
        for c in recs.values():
            if bad := [f for f in IDENTITY if getattr(c, f) is not None]:
                raise ConventionsError(f"{name}: a profile cannot re-declare the record's "
                                       f"{', '.join(bad)}")
            sim = known.get(c.loads or name, records[name]).similarity
            if c.loads not in (None, *known) or c.scorer and sim not in c.scorer.lower():
                raise ConventionsError(f"{name}: loads {c.loads!r} / scorer {c.scorer!r} "
                                       f"disagree with the zoo ({sim})")
    return out


PAPER_CONVENTIONS: dict[str, dict[str, Conventions]] = paper_conventions(zoo.paper_models())


def resolve(name: str, profile: str) -> Conventions | None:
    """The record of ``name`` under ``profile``; None for a model without profiles under
    ``reference`` (its adapter's own defaults). ``authors`` for such a model is an error."""
    if profile not in PROFILES:
        raise ConventionsError(f"unknown conventions {profile!r}; choose one of "
                               f"{', '.join(PROFILES)}")
    recs = PAPER_CONVENTIONS.get(name)
    if recs is None:
        if profile == DEFAULT_PROFILE:
            return None
        raise ConventionsError(
            f"model {name!r} has no {profile!r} conventions: only the paper's ten models have "
            f"them ({', '.join(PAPER_CONVENTIONS)}); run it with --conventions reference"
        )
    rec = recs[profile]
    base = zoo.models()[rec.loads] if rec.loads else None
    ident = {} if base is None else {"target": base.target, "extra": base.extra,
                                     "checkpoint": base.checkpoint, "revision": base.revision}
    sim = rec.scorer or SIMILARITY_WORDS[(base or zoo.models()[name]).similarity]
    return dataclasses.replace(rec, model=name, profile=profile, similarity=sim, **ident)


def differences(name: str) -> dict[str, tuple[Any, Any]]:
    """Field -> (reference value, authors value) where the two profiles of ``name`` differ."""
    a, b = (resolve(name, p).as_dict() for p in PROFILES)  # type: ignore[union-attr]
    skip = {"profile", "sources", "model", "deviations"}
    return {k: (a[k], b[k]) for k in a if k not in skip and a[k] != b[k]}


_UNSET = {"dtype": "(the run's --dtype, else bf16/fp16 on a GPU, float32 on the CPU)",
          "target": "(the zoo entry's)", "extra": "(the zoo entry's)",
          "checkpoint": "(the zoo entry's)", "revision": "(the zoo entry's)"}


def _show(field_name: str, value: Any) -> str:
    if value is None:
        return _UNSET.get(field_name, "-")
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True) if value else "{}"
    return str(value)


def format_differences(names: list[str] | None = None) -> str:
    """``ls --conventions``: per paper model, every field where the profiles differ."""
    lines = ["conventions: fields where --conventions reference and authors differ "
             "(benchmark/models/conventions.py; sources: docs/models.md)"]
    width = max(len(p) for p in PROFILES)
    for name in names or list(PAPER_CONVENTIONS):
        lines.append(name)
        for key, values in differences(name).items():
            lines.append(f"  {key}")
            lines.extend(f"    {p + ':':<{width + 1}} {_show(key, v)}"
                         for p, v in zip(PROFILES, values, strict=True))
        lines.append(f"  sources ({PROFILES[1]}): {resolve(name, PROFILES[1]).sources}")  # type: ignore[union-attr]
    return "\n".join(lines)


def resolve_dtype(spec: str | None, device: str) -> str | None:
    """A record's dtype on ``device``: ``clip.load``'s rule resolved, others as they are."""
    if spec == CLIP_LOAD_DTYPE:
        return "float16" if device.startswith("cuda") else "float32"
    return spec


def settings(adapter: Any) -> dict[str, Any]:
    """``settings.conventions`` of a results file: the profile and its resolved fields."""
    rec = getattr(adapter, "profile", None)
    if rec is None:
        return {"profile": DEFAULT_PROFILE, "fields": None,
                "note": "no profiles for this model: its adapter's own conventions"}
    return {"profile": rec.profile, "fields": rec.as_dict()}
