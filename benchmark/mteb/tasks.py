"""Our three tasks inside mteb: ``mteb.evaluate(model, tasks=[...])`` scores 3XCM and XM3600.

=====================  ============  ===========================================  ==========
mteb task name         our task      data                                         main score
=====================  ============  ===========================================  ==========
``3XCMT2I``            ``3xcm``      a 3XCM release / the authors' layout         ``sp``
``3XCMI2I``            ``3xcm-i2i``  the same                                     ``sp``
``XM3600I2TMixedPool`` ``xm3600-i2t`` XM3600 (official, mteb, authors' layouts)    ``dlbkl_at_10``
=====================  ============  ===========================================  ==========

Each is an ``mteb.AbsTask`` whose ``load_data`` reads the data with our loaders
(:mod:`benchmark.data`: the release folder or hub id, the authors' published layout, XM3600 in
any of its layouts) and whose ``_evaluate_subset`` runs *our* task on the model mteb hands it,
wrapped in :class:`benchmark.mteb.models.MTEBModel` (the same wrapper ``--model
mteb:NAME`` uses): the same embedding calls, the same similarity, and the same metric
functions (:mod:`benchmark.metrics`), so the scores are our evaluator's to the last digit.
Options are our task configs' fields (``XCMTextToImage(dataset=..., bootstrap=..., seed=...)``;
seed 0 by default, as ``benchmark run``), not mteb's seed 42.

Scores (one subset ``default``, split ``test``; mteb's own key style, ``@k`` -> ``_at_k``):
3XCM: ``sp``, ``m_sem``, ``m_cul``, ``m_non`` (win rates), ``wins_*``, ``ties``,
``sp_ci95_lo``/``hi``, ``z_*``, and the same per group in ``by_country``, ``by_language``,
``by_concept``; SP is lower-is-better (mteb assumes higher). XM3600: ``accuracy_at_k``,
``ndcg_at_k``, ``ndcg_authors_at_k``, ``lbkl_at_k``, ``dlbkl_at_k`` (lower is better), per
locale in ``by_locale``, the rank counts as in our results. ``xcm3`` holds our task record and
settings (dataset, fingerprint, n, conventions), which the report's reader
(:mod:`benchmark.mteb.results`) turns back into our results. mteb writes its JSON
with scores rounded to 6 decimals (``TaskResult.to_disk``); the in-memory TaskResult is exact.

mteb 2.26 has no plugin or entry-point mechanism for external tasks: ``mteb.get_task`` reads a
registry built from the ``mteb.tasks`` package at import. :func:`register` adds our classes to
it, which ``python -m benchmark.mteb.run run ...`` does before calling mteb's own CLI.

mteb is imported only when a class is first asked for (module ``__getattr__``).
"""

from __future__ import annotations

import functools
import logging
import tempfile
from pathlib import Path
from typing import Any

from benchmark.tasks.base import RunContext, TaskOutput
from core import datatables

log = logging.getLogger(__name__)

HF_SUBSET, SPLIT = "default", "test"
NAMES = {"t2i": "3XCMT2I", "i2i": "3XCMI2I", "i2t": "XM3600I2TMixedPool"}
OURS = {"t2i": "3xcm", "i2i": "3xcm-i2i", "i2t": "xm3600-i2t"}
MAIN = {"t2i": "sp", "i2i": "sp", "i2t": "dlbkl_at_10"}
CLASS_NAMES = {"XCMTextToImage": "t2i", "XCMImageToImage": "i2i", "XM3600MixedPool": "i2t"}
# BCP-47 language of data/countries.csv -> mteb's ISO 639-3 + script (Yoruba is not in XM3600)
EXTRA_LANGS = {"yo": "yor-Latn"}
CITATION = "3XCM: perspectival bias in cross-modal retrieval (see the repository's README)"
DESCRIPTIONS = {
    "t2i": "3XCM association bias, text -> image: a concept in a country's native language "
           "against a semantic, a cultural and a non-relevant image; SP = M_cul / M_sem "
           "(lower is better).",
    "i2i": "3XCM association bias, image -> image: the query's anchor image against the "
           "triplet's three images; SP = M_cul / M_sem (lower is better).",
    "i2t": "XM3600 prevalence bias, image -> text over one mixed pool of the captions in 36 "
           "languages: Accuracy@k, NDCG@k, LBKL@k, DLBKL@k (main; lower is better).",
}


def _xm3600_langs() -> dict[str, list[str]]:
    from mteb.tasks.retrieval.multilingual.xm3600_t2i_retrieval import _LANGUAGES

    return dict(_LANGUAGES)


def eval_langs(kind: str) -> list[str]:
    """mteb language codes of a task: the 16 countries' languages, or XM3600's 36."""
    xm = _xm3600_langs()
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


# -- scores: ours <-> mteb's key style --------------------------------------------------------
XCM_KEYS = {"n": "n", "wins_sem": "wins_sem", "wins_cul": "wins_cul", "wins_non": "wins_non",
            "ties": "ties", "M_sem": "m_sem", "M_cul": "m_cul", "M_non": "m_non", "SP": "sp",
            "SP_ci95_undefined_resamples": "sp_ci95_undefined_resamples", "z_sem": "z_sem",
            "z_cul": "z_cul", "z_non": "z_non"}
XCM_GROUPS = ("by_country", "by_language", "by_concept")
XM_NESTED = ("retrieved_language_counts", "pool_language_counts", "pool_tier_counts",
             "two_stage_agreement")


CI_KEYS = ("SP_ci95", "M_sem_ci95", "M_cul_ci95", "M_non_ci95")


def xcm_flat(s: dict[str, Any]) -> dict[str, Any]:
    """One group's 3XCM scores (:mod:`benchmark.metrics.association`) in mteb's key style."""
    out = {XCM_KEYS[k]: v for k, v in s.items() if k in XCM_KEYS}
    for k in CI_KEYS:
        if k in s:
            out[f"{k.lower()}_lo"], out[f"{k.lower()}_hi"] = s[k]
    out.update({f"mde_{k.lower()}": v for k, v in (s.get("mde") or {}).items()})
    out.update({k.lower(): s[k] for k in ("SP_note", "units") if k in s})
    return out


def xcm_unflat(s: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`xcm_flat`."""
    inv = {v: k for k, v in XCM_KEYS.items()}
    out = {inv[k]: v for k, v in s.items() if k in inv}
    for k in CI_KEYS:
        if f"{k.lower()}_lo" in s:
            out[k] = [s.get(f"{k.lower()}_lo"), s.get(f"{k.lower()}_hi")]
    out["SP_ci95"] = [s.get("sp_ci95_lo"), s.get("sp_ci95_hi")]
    mde = {k: s[f"mde_{k.lower()}"] for k in ("SP", "M_sem", "M_cul", "M_non")
           if f"mde_{k.lower()}" in s}
    out.update({"mde": mde} if mde else {})
    out.update({k: s[k.lower()] for k in ("SP_note", "units") if k.lower() in s})
    return out


def at_k(s: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("@", "_at_"): v for k, v in s.items()}


def from_at_k(s: dict[str, Any]) -> dict[str, Any]:
    import re

    return {re.sub(r"_at_(\d+)$", r"@\1", k): v for k, v in s.items()}


def to_mteb_scores(kind: str, out: TaskOutput) -> dict[str, Any]:
    """Our task's output as one mteb ScoresDict (strict JSON: NaN -> None)."""
    from benchmark.results import sanitize

    sc = out.scores
    if kind == "i2t":
        res = at_k(sc["overall"])
        res["by_locale"] = {c: at_k(v) for c, v in sc["by_locale"].items()}
        res.update({k: sc[k] for k in XM_NESTED if k in sc})
    else:
        res = xcm_flat(sc["overall"])
        res.update({g: {k: xcm_flat(v) for k, v in sc[g].items()} for g in XCM_GROUPS if g in sc})
    res["xcm3"] = {"task": out.task, "settings": out.settings, "timings": out.timings,
                   "main_score_lower_is_better": True}
    return sanitize(res)


def from_mteb_scores(kind: str, scores: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`to_mteb_scores`: our results file's ``scores``."""
    if kind == "i2t":
        skip = {"by_locale", "xcm3", "main_score", "hf_subset", "languages", "mteb_version",
                *XM_NESTED}
        out: dict[str, Any] = {"overall": from_at_k({k: v for k, v in scores.items()
                                                     if k not in skip})}
        out["by_locale"] = {c: from_at_k(v) for c, v in scores.get("by_locale", {}).items()}
        out.update({k: scores[k] for k in XM_NESTED if k in scores})
        return out
    out = {"overall": xcm_unflat(scores)}
    out.update({g: {k: xcm_unflat(v) for k, v in scores[g].items()}
                for g in XCM_GROUPS if g in scores})
    return out


# -- the AbsTask classes (built on first use) ---------------------------------------------------
def _our_task(kind: str) -> Any:
    from benchmark.registry import load_task

    return load_task(OURS[kind])


@functools.cache
def _classes() -> dict[str, type]:
    from mteb import AbsTask

    from benchmark.mteb.models import MTEBModel

    class _XCM3Task(AbsTask):
        kind = ""
        defaults: dict[str, Any] = {}  # class-wide options (`mteb run` sets the dataset)

        def __init__(self, config: Any = None, **options: Any):
            ours = _our_task(self.kind)
            self.config = config or ours.config_class(**{**self.defaults, **options})
            super().__init__(seed=self.config.seed)
            self.metadata = metadata(self.kind).model_copy(deep=True)
            self.metadata.dataset["path"] = str(self._source() or self.metadata.dataset["path"])
            self.hf_subsets = [HF_SUBSET]
            self._memo: dict[tuple[Any, ...], Any] = {}

        def _source(self) -> Any:
            c = self.config
            return getattr(c, "xm3600", None) or c.dataset or getattr(c, "triplets_csv", None)

        def _context(self, adapter: Any = None, output_dir: Path | None = None) -> RunContext:
            return RunContext(adapter, None, output_dir or Path("."), memo=self._memo)

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            if self.data_loaded:
                return
            if self.kind == "i2t":
                from benchmark.tasks.xm3600 import load_data

                ds = load_data(self._context(), self.config)
            else:
                from benchmark.tasks.xcm import load_xcm

                ds = load_xcm(self._context(), self.config)
            self.metadata.dataset["revision"] = ds.fingerprint
            self.dataset = {HF_SUBSET: {SPLIT: ds}}
            self.data_loaded = True

        def _evaluate_subset(self, model: Any, data_split: Any, *, hf_split: str,
                             hf_subset: str, encode_kwargs: Any,
                             prediction_folder: Path | None = None, num_proc: int | None = None,
                             **kwargs: Any) -> dict[str, Any]:
            adapter = model if isinstance(model, MTEBModel) else MTEBModel.from_encoder(model)
            if encode_kwargs.get("batch_size"):
                adapter.text_batch_size = adapter.image_batch_size = encode_kwargs["batch_size"]
            task = _our_task(self.kind)(self.config)
            if prediction_folder is not None:  # the per-item outcomes go with the predictions
                out = task.run(self._context(adapter, Path(prediction_folder)))
            else:
                with tempfile.TemporaryDirectory(prefix="xcm3-mteb-") as tmp:
                    out = task.run(self._context(adapter, Path(tmp)))
            self.metadata.dataset["revision"] = out.task["data_fingerprint"]
            return to_mteb_scores(self.kind, out)

        def _calculate_descriptive_statistics_from_split(
            self, split: str, *, hf_subset: str | None = None, compute_overall: bool = False,
            num_proc: int | None = None,
        ) -> dict[str, Any]:
            """Counts of the loaded data (what our results files record as ``task``)."""
            self.load_data()
            ds = self.dataset[HF_SUBSET][SPLIT]
            if self.kind == "i2t":
                return {"num_samples": len(ds.image_ids), "num_captions": len(ds.captions)}
            return {"num_samples": len(ds.triplets), "num_images": len(ds.images.ids)}

    out: dict[str, type] = {}
    for cls_name, kind in CLASS_NAMES.items():
        out[cls_name] = type(cls_name, (_XCM3Task,), {
            "kind": kind, "metadata": metadata(kind), "__module__": __name__,
            "__doc__": f"mteb task {NAMES[kind]}: our ``{OURS[kind]}`` inside mteb."})
    return out


def __getattr__(name: str) -> Any:
    if name in CLASS_NAMES:
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tasks(kinds: tuple[str, ...] = ("t2i", "i2i", "i2t"), **options: Any) -> list[Any]:
    """Instances of our mteb tasks (``options``: each task's config fields it has)."""
    import dataclasses

    out = []
    by_kind = {k: c for c, k in CLASS_NAMES.items()}
    for kind in kinds:
        cls = _classes()[by_kind[kind]]
        fields = {f.name for f in dataclasses.fields(_our_task(kind).config_class)}
        out.append(cls(**{k: v for k, v in options.items() if k in fields}))
    return out


def register(**defaults: Any) -> None:
    """Add our tasks to mteb's task registry (for ``mteb.get_task`` / ``mteb run``);
    ``defaults``: options every instance gets (``dataset=``, ``xm3600=``)."""
    import dataclasses
    import importlib

    # the module, not the function of the same name that the package exports
    gt = importlib.import_module("mteb.get_tasks")
    for cls_name, kind in CLASS_NAMES.items():
        cls = _classes()[cls_name]
        fields = {f.name for f in dataclasses.fields(_our_task(kind).config_class)}
        cls.defaults = {k: v for k, v in defaults.items() if k in fields and v is not None}
        gt._TASKS_REGISTRY[NAMES[kind]] = cls
        if cls not in gt.TASK_LIST:
            gt.TASK_LIST = (*gt.TASK_LIST, cls)
