"""Our three tasks inside mteb: ``mteb.evaluate(model, tasks=[...])`` scores 3XCM and XM3600.

``3XCMT2I``, ``3XCMI2I`` and ``XM3600I2TMixedPool`` run *our* task on the model mteb hands
them: our scores to the last digit, in mteb's key style, with our task record as ``xcm3``.
:func:`register` adds them to mteb's registry; mteb is imported on first use.
"""

from __future__ import annotations

import functools
import logging
import tempfile
from pathlib import Path
from typing import Any

from benchmark.mteb.meta import (
    CLASS_NAMES,
    HF_SUBSET,
    NAMES,
    OURS,
    SPLIT,
    XCM_GROUPS,
    XM_NESTED,
    at_k,
    xcm_flat,
)
from benchmark.mteb.models import MTEBModel, metadata
from benchmark.tasks.base import RunContext, TaskOutput

log = logging.getLogger(__name__)


# -- scores --------------------------------------------------------------------------------
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


# -- the AbsTask classes (built on first use) ---------------------------------------------------
def _our_task(kind: str) -> Any:
    from benchmark.registry import load_task

    return load_task(OURS[kind])


@functools.cache
def _classes() -> dict[str, type]:
    from mteb import AbsTask

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
            from benchmark.tasks.xcm import load_xcm
            from benchmark.tasks.xm3600 import load_data

            ds = (load_data if self.kind == "i2t" else load_xcm)(self._context(), self.config)
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


def _options(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """The ``options`` that are fields of task ``kind``'s config (None left out)."""
    import dataclasses

    fields = {f.name for f in dataclasses.fields(_our_task(kind).config_class)}
    return {k: v for k, v in options.items() if k in fields and v is not None}


def tasks(kinds: tuple[str, ...] = ("t2i", "i2i", "i2t"), **options: Any) -> list[Any]:
    """Instances of our mteb tasks (``options``: each task's config fields it has)."""
    by_kind = {k: c for c, k in CLASS_NAMES.items()}
    return [_classes()[by_kind[kind]](**_options(kind, options)) for kind in kinds]


def register(**defaults: Any) -> None:
    """Add our tasks to mteb's task registry (for ``mteb.get_task`` / ``mteb run``);
    ``defaults``: options every instance gets (``dataset=``, ``xm3600=``)."""
    import importlib

    # the module, not the function of the same name that the package exports
    gt = importlib.import_module("mteb.get_tasks")
    for cls_name, kind in CLASS_NAMES.items():
        cls = _classes()[cls_name]
        cls.defaults = _options(kind, defaults)
        gt._TASKS_REGISTRY[NAMES[kind]] = cls
        if cls not in gt.TASK_LIST:
            gt.TASK_LIST = (*gt.TASK_LIST, cls)
