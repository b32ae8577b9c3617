"""mteb family: ``--model mteb:NAME`` runs any model of mteb's registry through its own wrapper,
called as mteb's retrieval evaluator calls it (docs/mteb.md); cosine and MaxSim are scored by
us, any other similarity by the wrapper. The ModelMeta is part of every cache key.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from benchmark.embeddings import Embeddings, MultiVector
from benchmark.models import hub
from benchmark.models.base import Adapter, as_float32, model_spec
from benchmark.mteb.meta import DESCRIPTIONS, EXTRA_LANGS, HF_SUBSET, MAIN, NAMES, OURS, SPLIT
from core import datatables

log = logging.getLogger(__name__)

DEFAULT_BATCH = 32  # mteb.evaluate's default encode batch size
META_FIELDS = ("name", "revision", "release_date", "languages", "n_parameters", "embed_dim",
               "license", "open_weights", "similarity_fn_name", "modalities", "model_type",
               "framework", "reference", "max_tokens", "use_instructions")


def meta_record(meta: Any) -> dict[str, Any]:
    """The JSON record of an mteb ``ModelMeta`` that results files and cache keys carry."""
    import mteb

    d = meta.to_dict()
    rec = {k: d.get(k) for k in META_FIELDS}
    rec["similarity_fn_name"] = (None if meta.similarity_fn_name is None
                                 else str(meta.similarity_fn_name.value))
    rec["loader"] = d.get("loader")
    rec["mteb_version"] = mteb.__version__
    return rec


def find_meta(name: str, revision: str | None = None) -> Any:
    """mteb's ModelMeta of ``name`` from its registry; a one-line error with close names."""
    import mteb

    try:
        return mteb.get_model_meta(name, revision)
    except (KeyError, ValueError) as e:
        msg = e.args[0] if e.args else str(e)
        raise hub.ModelLoadError(f"mteb:{name}: {msg} (see `python -m benchmark ls --mteb`)") from None


def text_image_metas() -> list[Any]:
    """mteb's ModelMetas with a text and an image encoder and a loader, sorted by name."""
    import mteb

    metas = mteb.get_model_metas(modalities=["text", "image"])
    return sorted((m for m in metas if m.loader is not None and m.name), key=lambda m: m.name)


def format_listing(metas: list[Any]) -> str:
    """The lines of ``python -m benchmark ls --mteb``: name, revision, embedding size,
    similarity, and ``api`` for models without open weights (they call a service)."""
    lines = [f"mteb models with text and image encoders ({len(metas)}; run as --model mteb:NAME):"]
    width = max((len(m.name) for m in metas), default=0) + 5
    for m in metas:
        sim = "-" if m.similarity_fn_name is None else m.similarity_fn_name.value
        dim = m.embed_dim if not isinstance(m.embed_dim, list) else max(m.embed_dim)
        lines.append(f"  {'mteb:' + m.name:<{width}}  {m.revision or '-':<40}  "
                     f"dim={dim or '-'}  {sim}{'' if m.open_weights else '  api'}")
    return "\n".join(lines)


def eval_langs(kind: str) -> list[str]:
    """mteb language codes of a task: the 16 countries' languages, or XM3600's 36."""
    from mteb.tasks.retrieval.multilingual.xm3600_t2i_retrieval import _LANGUAGES as xm
    if kind == "i2t":
        return sorted({c for codes in xm.values() for c in codes})
    out = set()
    for c in datatables.countries():
        lang = c.language.split("-")[0]
        out.add(EXTRA_LANGS.get(lang) or xm[lang][0])
    return sorted(out)


@functools.cache
def metadata(kind: str) -> Any:
    """The ``mteb.TaskMetadata`` of task ``kind`` (``t2i``, ``i2i``, ``i2t``)."""
    from mteb import TaskMetadata

    return TaskMetadata(
        name=NAMES[kind], description=DESCRIPTIONS[kind],
        dataset={"path": "xcm3/" + OURS[kind], "revision": "given-at-load"},
        type="Any2AnyRetrieval", category=kind, modalities=["text", "image"] if kind != "i2i"
        else ["image"], eval_splits=[SPLIT], eval_langs=eval_langs(kind),
        main_score=MAIN[kind], domains=["Web"] if kind != "i2t" else ["Encyclopaedic"],
        license="not specified", annotations_creators="human-annotated",
        sample_creation="found", bibtex_citation="", reference=None,
    )


def _multi(arr: np.ndarray) -> MultiVector:
    """(n, L, d) padded token vectors -> MultiVector; all-zero trailing rows are padding."""
    nonzero = np.abs(arr).sum(axis=-1) > 0  # (n, L)
    lengths = np.where(nonzero.any(axis=1), arr.shape[1] - np.argmax(nonzero[:, ::-1], axis=1), 0)
    return MultiVector(arr.astype(np.float32), lengths.astype(np.int64))


class MTEBModel(Adapter):
    """An mteb encoder (``mteb:NAME``), or an already loaded one (:meth:`from_encoder`)."""

    text_batch_size = DEFAULT_BATCH
    image_batch_size = DEFAULT_BATCH

    def __init__(self, name: str, checkpoint: str, revision: str | None = None,
                 device: str | None = None, dtype: str | None = None, encoder: Any = None,
                 **kw: Any):
        what = f"model {name}"
        hub.require(("mteb", "torch", "datasets"), "mteb", what)
        meta = encoder.mteb_model_meta if encoder is not None else find_meta(checkpoint, revision)
        mods = set(meta.modalities or [])
        if not {"text", "image"} <= mods:
            raise hub.ModelLoadError(
                f"{what}: mteb's {meta.name} has modalities {sorted(mods)}; the 3XCM tasks need "
                f"text and image (see `python -m benchmark ls --mteb`)")
        if dtype is not None:
            log.warning("%s: --dtype %s ignored: an mteb loader picks its own dtype", what, dtype)
        self.meta = meta
        self.record = meta_record(meta)
        sim = self.record["similarity_fn_name"]
        super().__init__(model_spec(name, "mteb", str(meta.name), meta.revision,
                                    multi_vector=sim == "MaxSim", mteb=self.record),
                         device=device, dtype="mteb-loader")
        if encoder is None:
            hub.sync_offline_flag()
            try:
                encoder = meta.load_model(device=self.device)
            except (OSError, ImportError) as e:
                raise hub.ModelLoadError(f"{what}: mteb could not load {meta.name}: {e}") from e
        self.encoder = encoder
        self._custom_sim = sim not in ("cosine", "MaxSim")

    @classmethod
    def from_encoder(cls, encoder: Any, device: str | None = None) -> MTEBModel:
        """Wrap an encoder mteb already loaded (``mteb.evaluate`` hands ours one)."""
        meta = encoder.mteb_model_meta
        return cls(name=f"mteb:{meta.name}", checkpoint=str(meta.name), revision=meta.revision,
                   device=device or getattr(encoder, "device", None), encoder=encoder)

    # -- mteb's side of each encode ----------------------------------------------------------
    @staticmethod
    def task_metadata(modality: str, role: str) -> Any:
        """The TaskMetadata an embedding of ``modality`` in ``role`` is encoded with."""
        kind = "t2i" if (modality, role) in (("text", "query"), ("image", "document")) else "i2t"
        return metadata(kind)

    def conventions(self, modality: str, role: str) -> dict[str, Any]:
        md = self.task_metadata(modality, role)
        return {"mteb": self.record, "task_metadata": md.name, "task_type": md.type,
                "category": md.category, "prompt_type": role, "hf_split": SPLIT,
                "hf_subset": HF_SUBSET}

    def _encode(self, column: str, items: list[Any], modality: str, role: str) -> Embeddings:
        from datasets import Dataset, Features, Value
        from datasets import Image as ImageFeature
        from mteb._create_dataloaders import create_dataloader
        from mteb.types import PromptType

        md = self.task_metadata(modality, role)
        feat = ImageFeature() if column == "image" else Value("string")
        ds = Dataset.from_dict({"id": [str(i) for i in range(len(items))], column: items},
                               features=Features({"id": Value("string"), column: feat}))
        ptype = PromptType.query if role == "query" else PromptType.document
        loader = create_dataloader(ds, task_metadata=md, prompt_type=ptype,
                                   batch_size=max(1, len(items)))
        out = as_float32(self.encoder.encode(loader, task_metadata=md, hf_split=SPLIT,
                                            hf_subset=HF_SUBSET, prompt_type=ptype,
                                            show_progress_bar=False))
        return _multi(out) if out.ndim == 3 else out

    def _encode_text_batch(self, texts: list[str], role: str) -> Embeddings:
        return self._encode("text", list(texts), "text", role)

    def _encode_image_batch(self, images: list[Any], role: str) -> Embeddings:
        return self._encode("image", [im.convert("RGB") for im in images], "image", role)

    # -- similarity ---------------------------------------------------------------------------
    def uses_default_similarity(self) -> bool:
        return not self._custom_sim

    def similarity(self, queries: Embeddings, docs: Embeddings) -> np.ndarray:
        if not self._custom_sim:
            return super().similarity(queries, docs)
        fn = getattr(self.encoder, "similarity", None)
        if not callable(fn):  # no similarity of its own and none named: mteb's fallback
            return super().similarity(queries, docs)
        q = queries.vectors if isinstance(queries, MultiVector) else queries
        d = docs.vectors if isinstance(docs, MultiVector) else docs
        return as_float32(fn(q, d))
