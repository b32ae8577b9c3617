"""What a task is: a typed config, a ``run`` on a model adapter, and a printed table.

``run`` fills a :class:`RunConfig` and each task's :class:`TaskConfig`, opens one
:class:`RunContext` (adapter, caches, a memo of loaded datasets) and writes each task's
:class:`TaskOutput` through :func:`run_task`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from benchmark.cache import EmbeddingCache, EmbedStats, Shard, dir_problem, embed_cached
from benchmark.data.images import FileHashMemo
from benchmark.embeddings import Embeddings
from benchmark.models.base import Adapter
from benchmark.results import (
    RESULTS_KIND,
    ResultFile,
    TaskInfo,
    environment,
    model_conflict,
    model_slug,
    write_results,
)
from core import files
from core.errors import DataError
from core.files import sha256_text
from core.options import option
from core.provenance import git_commit, utcnow

DTYPES = ["float32", "float16", "bfloat16"]


@dataclass
class RunConfig:
    """Which model, how it runs, where embeddings and results go (``run`` and ``analyze``)."""

    model: str = option("registered name (see `ls`), family:arg (open_clip:ViT-L-14/openai), "
                        "or module.path:Class of your own adapter")
    output_dir: Path = option("results go to OUTPUT_DIR/<model-slug>/<task>.json "
                              "(default ./results)", Path("results"))
    cache_dir: Path | None = option("embedding cache (default $XCM_CACHE_DIR or ~/.cache/xcm3)",
                                    None)
    no_cache: bool = option("do not read or write the cache", False)
    device: str | None = option("cpu / cuda / cuda:1 (default: cuda when present)", None)
    dtype: str | None = option("model dtype (default: bf16/fp16 on GPU, float32 on CPU)", None,
                               choices=DTYPES)
    batch_size: int | None = option("batch size for texts and images", None, minimum=1)
    conventions: str = option(
        "model conventions: reference (the model card's intended use) or authors (what the "
        "paper's code did; paper models only). `ls --conventions` shows the differences",
        "reference", choices=["reference", "authors"])
    quiet: bool = option("no table on stdout, no progress bars, no INFO logs", False,
                         flags=("-q", "--quiet"))


@dataclass
class ScaleConfig:
    """Scale-out options of ``run``: several models over devices, shards of the embedding."""

    devices: str | None = option(
        "comma-separated devices (cuda:0,cuda:1 / cpu,cpu): the models of --model A,B,... run "
        "one per device at a time, each in its own process; one model over several devices "
        "is sharded over them, then scored", None)
    shard: str | None = option(
        "I/N: embed only shard I (0-based) of the items not yet cached, store them, and stop "
        "before scoring; a run without --shard then scores from the cache", None)
    cache_shard_file: bool = option(
        "with --shard: write CACHE_DIR/shards/shard-I-of-N.sqlite, not the shared file (a "
        "cache on NFS or several machines); then `python -m benchmark cache merge`", False)


class OutputError(Exception):
    """The output dir cannot take results files (one clear line; the CLI exits with 2)."""


def check_output_dir(path: Path, claim: bool = True, *, create: bool = True) -> None:
    """Fail before any compute when results could not be written to ``path`` (a file, not
    writable, or with ``claim`` a folder of files no run of ours wrote); without ``create``
    nothing is made, the folder rule only checked."""
    probe = path
    while not create and not probe.exists() and probe.parent != probe:
        probe = probe.parent
    problem = dir_problem(probe)
    if problem:
        raise OutputError(f"output dir {path} {problem}: pass another --output-dir")
    if claim or not create:
        try:
            (files.claim if create else files.may_write_into)(path, RESULTS_KIND)
        except files.FolderNotOursError as e:
            raise OutputError(f"--output-dir {e}") from e


@contextmanager
def leaves_nothing_if_refused(out: Path) -> Iterator[None]:
    """Inside, a run that raises removes what it made in ``out`` and nothing else: new empty
    folders, and our marker while it lists no file (``out`` too when it was new)."""
    before = {p.name for p in out.iterdir()} if out.is_dir() else None
    try:
        yield
    except BaseException:
        if out.is_dir():
            for p in out.iterdir():
                if before is not None and p.name in before:
                    continue
                if p.is_dir() and not any(p.iterdir()):
                    p.rmdir()
                elif p.name == files.OWNER_MARKER and (files.read_marker(out) or {}).get(
                        "files") == {}:
                    p.unlink()
            if before is None and not any(out.iterdir()):
                out.rmdir()
        raise


@dataclass
class TaskConfig:
    """What every task reads: the dataset and the seed."""

    dataset: str | None = option(
        "dataset folder or hub id ORG/NAME: a 3XCM release, the authors' published 3XCM "
        "(configs image_metadata + benchmark), or XM3600 for xm3600-i2t", None)
    revision: str | None = option("hub revision of --dataset", None)
    seed: int = option("seed of bootstraps and sampling", 0, minimum=0)


@dataclass
class RunContext:
    """What the tasks of one run share: the adapter, the caches, where results go."""

    adapter: Adapter
    cache: EmbeddingCache | None = None
    output_dir: Path = Path("results")
    device: str | None = None  # the device asked for (retrieval backends follow it)
    hash_memo: FileHashMemo | None = None  # sha256 of image files, for folder datasets
    memo: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # datasets loaded, by source


@dataclass
class TaskOutput:
    """What a task hands back to be written: task info, settings, timings, scores."""

    task: dict[str, Any]
    scores: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class Task:
    """Base of every task: ``config_class`` is its config (and the source of its flags)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    config_class: ClassVar[type[TaskConfig]] = TaskConfig

    def __init__(self, config: TaskConfig | None = None):
        self.config = config if config is not None else self.config_class()

    def run(self, ctx: RunContext) -> TaskOutput:
        raise NotImplementedError  # abstract: each task implements its run

    def prefill(self, ctx: RunContext) -> None:
        """Embed into the cache what :meth:`run` needs and score nothing (``--shard``: the
        context's cache embeds only its shard)."""
        raise DataError(f"task {self.name} cannot run sharded (--shard)")

    def format_table(self, out: TaskOutput) -> str:
        """A plain-text table of the main scores (printed by the CLI)."""
        return ""

    def save_parquet(self, ctx: RunContext, kind: str, df: pd.DataFrame) -> Path:
        """``<output-dir>/<model-slug>/<task>.<kind>.parquet``, written atomically."""
        path = ctx.output_dir / model_slug(ctx.adapter.spec.name) / f"{self.name}.{kind}.parquet"
        with files.atomic_path(path, suffix=".parquet") as tmp:
            df.to_parquet(tmp, index=False)
        files.mark_folder(ctx.output_dir, RESULTS_KIND, [path])
        return path

    def save_outcomes(self, ctx: RunContext, df: pd.DataFrame, unit: str, id_column: str,
                      group_column: str) -> dict[str, Any]:
        """Write ``<task>.outcomes.parquet`` and return the results file's ``outcomes`` record."""
        path = self.save_parquet(ctx, "outcomes", df)
        return {"file": path.name, "sha256": files.sha256_file(path), "rows": int(len(df)),
                "unit": unit, "id_column": id_column, "group_column": group_column,
                "columns": [str(c) for c in df.columns]}


def open_context(run: RunConfig, shard: Shard | None = None,
                 shard_file: bool = False) -> RunContext:
    """Check where results and embeddings go, then load the model and open the caches."""
    from benchmark import registry

    if shard is not None and run.no_cache:
        raise DataError("--shard fills the embedding cache: it cannot run with --no-cache")
    check_output_dir(run.output_dir, create=False)  # nothing made until the model loads
    cache = (None if run.no_cache
             else EmbeddingCache(run.cache_dir, shard=shard, shard_file=shard_file))
    overrides = {k: v for k, v in (("device", run.device), ("dtype", run.dtype)) if v}
    adapter = registry.load_model(run.model, conventions=run.conventions, **overrides)
    check_output_dir(run.output_dir)
    check_output_dir(run.output_dir / model_slug(adapter.spec.name), claim=False)
    for p in sorted((run.output_dir / model_slug(adapter.spec.name)).glob("*.json")):
        if why := model_conflict(p, adapter.spec.name):
            raise OutputError(why)
    if run.batch_size:
        adapter.text_batch_size = adapter.image_batch_size = run.batch_size
    memo = None
    if cache is not None:
        name = f"filehash-{shard.label}.sqlite" if shard_file and shard else "filehash.sqlite"
        memo = FileHashMemo(cache.path.parent / name)
    return RunContext(adapter, cache, run.output_dir, run.device, memo)


def embed_texts(ctx: RunContext, texts: list[str], role: str) -> tuple[Embeddings, EmbedStats]:
    return embed_cached(ctx.adapter, "text", role, [sha256_text(t) for t in texts],
                        lambda idx: [texts[i] for i in idx], ctx.cache)


def embed_images(ctx: RunContext, ds: Any, ids: list[str], role: str
                 ) -> tuple[Embeddings, EmbedStats]:
    """Embeddings of the images ``ids`` of ``ds.images``, each checked decodable first."""
    def load(idx: list[int]) -> Any:
        wanted = [ids[i] for i in idx]
        ds.images.check_decodable(wanted)
        return ds.images.load(wanted)

    return embed_cached(ctx.adapter, "image", role, [ds.images.sha256[i] for i in ids], load,
                        ctx.cache)


def result_file(ctx: RunContext, out: TaskOutput) -> ResultFile:
    """The results file of a task's output: provenance, model spec, run settings, scores."""
    from benchmark.models import conventions

    a = ctx.adapter
    settings = {
        "device": a.device, "dtype": a.dtype, "text_batch_size": a.text_batch_size,
        "image_batch_size": a.image_batch_size, "cache": str(ctx.cache.path) if ctx.cache else None,
        **out.settings,
    }
    # the profile and its resolved fields, beside the task's per-side adapter conventions
    settings["conventions"] = {**conventions.settings(a), **(out.settings.get("conventions") or {})}
    return ResultFile(
        git_commit=git_commit(), date=utcnow(), environment=environment(),
        model=a.spec, task=TaskInfo(**out.task), settings=settings,
        timings=out.timings, scores=out.scores, **out.extra,
    )


def run_task(ctx: RunContext, task: Task) -> tuple[TaskOutput, Path]:
    """Run one task and write its results file; (output, path of the file)."""
    t0 = time.perf_counter()
    out = task.run(ctx)
    out.timings["total_s"] = time.perf_counter() - t0
    return out, write_results(ctx.output_dir, result_file(ctx, out))
