"""``python -m benchmark``: run tasks on a model, list models and tasks, analyze, report.

    python -m benchmark run --model MODEL --task 3xcm [--task ...] --dataset PATH_OR_HUB_ID
    python -m benchmark ls
    python -m benchmark analyze ...   (benchmark.analysis)
    python -m benchmark report RESULTS_DIR... --output DIR   (benchmark.report)

Bad input (unknown model/task, bad dataset) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from pathlib import Path

from benchmark import registry
from benchmark.data import DataError
from benchmark.results import (
    ModelInfo,
    ResultFile,
    TaskInfo,
    environment,
    git_commit,
    now_iso,
    write_results,
)
from benchmark.tasks.base import RunContext, TaskOutput

log = logging.getLogger("benchmark")

# Subcommands implemented in their own modules (thin delegation, imported when used).
DELEGATED = {
    "analyze": "benchmark.analysis.cli:main",
    "report": "benchmark.report.cli:main",
}


def build_run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmark run",
                                description="Score a model on one or more tasks.")
    p.add_argument("--model", required=True,
                   help="registered name (see `ls`), family:arg (open_clip:ViT-L-14/openai), "
                        "or module.path:Class of your own adapter")
    p.add_argument("--task", action="append", required=True, help="task name (repeatable)")
    p.add_argument("--dataset", help="release folder or hub id ORG/NAME")
    p.add_argument("--revision", help="hub revision of --dataset")
    p.add_argument("--output-dir", type=Path, default=Path("results"),
                   help="results go to OUTPUT_DIR/<model-slug>/<task>.json (default ./results)")
    p.add_argument("--cache-dir", type=Path,
                   help="embedding cache (default $XCM_CACHE_DIR or ~/.cache/xcm3)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--device", help="cpu / cuda / cuda:1 (default: cuda when present)")
    p.add_argument("--dtype", choices=["float32", "float16", "bfloat16"],
                   help="model dtype (default: bf16/fp16 on GPU, float32 on CPU)")
    p.add_argument("--batch-size", type=int, help="batch size for texts and images")
    p.add_argument("--seed", type=int, default=0, help="seed of bootstraps and sampling")
    p.add_argument("-q", "--quiet", action="store_true", help="no table on stdout")
    for name in sorted(registry.tasks()):
        try:
            registry.load_task(name).add_arguments(p)
        except registry.RegistryError as e:
            log.debug("task %s unavailable: %s", name, e)
    return p


def run(argv: list[str]) -> int:
    args = build_run_parser().parse_args(argv)
    from benchmark.cache import EmbeddingCache

    tasks = [registry.load_task(t)() for t in args.task]  # unknown task: error before loading
    overrides = {k: v for k, v in (("device", args.device), ("dtype", args.dtype)) if v}
    adapter = registry.load_model(args.model, **overrides)
    if args.batch_size:
        adapter.text_batch_size = adapter.image_batch_size = args.batch_size
    cache = None if args.no_cache else EmbeddingCache(args.cache_dir)
    from benchmark.data.images import set_hash_memo

    set_hash_memo(cache.root / "filehash.sqlite" if cache else None)
    ctx = RunContext(adapter, cache, args, args.output_dir)
    for task in tasks:
        t0 = time.perf_counter()
        out: TaskOutput = task.run(ctx)
        out.timings["total_s"] = time.perf_counter() - t0
        path = write_results(args.output_dir, make_result(ctx, out))
        if not args.quiet:
            print(task.format_table(out))
        log.info("wrote %s", path)
        print(f"results: {path}", file=sys.stderr)
    return 0


def make_result(ctx: RunContext, out: TaskOutput) -> ResultFile:
    a = ctx.adapter
    settings = {
        "device": a.device, "dtype": a.dtype, "text_batch_size": a.text_batch_size,
        "image_batch_size": a.image_batch_size, "cache": str(ctx.cache.path) if ctx.cache else None,
        **out.settings,
    }
    return ResultFile(
        git_commit=git_commit(), date=now_iso(), environment=environment(),
        model=ModelInfo(**a.spec.as_dict()), task=TaskInfo(**out.task), settings=settings,
        timings=out.timings, scores=out.scores, **out.extra,
    )


def ls(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="python -m benchmark ls",
                            description="List registered models and tasks.").parse_args(argv)
    models = registry.models()
    width = max(len(n) for n in models)
    print("models:")
    for name, e in sorted(models.items()):
        ck = e.kwargs.get("checkpoint", "")
        flag = " [paper]" if e.paper else ""
        print(f"  {name:<{width}}  {ck}{flag}  {e.description}")
    print("model families (family:ARG): " + ", ".join(sorted(registry.FAMILIES)))
    print("tasks:")
    for name, target in sorted(registry.tasks().items()):
        try:
            desc = registry.import_target(target).description
        except registry.RegistryError as e:
            desc = f"(unavailable: {e})"
        print(f"  {name:<12} {desc}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    commands = ["run", "ls", *DELEGATED]
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__.strip())
        print(f"\ncommands: {', '.join(commands)}")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "run":
            return run(rest)
        if cmd == "ls":
            return ls(rest)
        if cmd in DELEGATED:
            mod, _, fn = DELEGATED[cmd].partition(":")
            return int(getattr(importlib.import_module(mod), fn)(rest) or 0)
        print(f"error: unknown command {cmd!r}{registry.suggest(cmd, commands)}", file=sys.stderr)
        return 2
    except (DataError, registry.RegistryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
