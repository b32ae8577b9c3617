"""``python -m benchmark``: run tasks on a model, list models and tasks, analyze, report, smoke.

    python -m benchmark run --model MODEL --task 3xcm [--task ...] --dataset PATH_OR_HUB_ID
    python -m benchmark run --model A,B,C --devices cuda:0,cuda:1 ...   (benchmark.launch)
    python -m benchmark run --model MODEL --shard I/N ...   (fill shard I of the cache, no scores)
    python -m benchmark cache merge [--cache-dir DIR] [SHARD_FILE...]
    python -m benchmark ls
    python -m benchmark analyze --model MODEL --dataset PATH   (benchmark.analysis)
    python -m benchmark report RESULTS_DIR... --output DIR     (benchmark.report)
    python -m benchmark compare RESULT_A RESULT_B   (paired test; benchmark.report.compare)
    python -m benchmark smoke --model MODEL [--device cuda]    (benchmark.smoke)
    python -m benchmark reproduce --output-dir DIR [--dry-run]  (benchmark.reproduce)

Flags come from typed configs (:mod:`core.options`); exits follow :mod:`core.clikit`.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path
from typing import Any

from benchmark import launch, registry
from benchmark.analysis import cli as analysis_cli
from benchmark.cache import CacheError, Shard, check_cache_dir, default_cache_dir
from benchmark.cache_merge import merge_shards
from benchmark.report import cli as report_cli
from benchmark.reproduce import cli as reproduce_cli
from benchmark.results import model_slug
from benchmark.smoke import SmokeConfig, format_smoke, run_smoke
from benchmark.tasks.base import (
    OutputError,
    RunConfig,
    ScaleConfig,
    TaskConfig,
    check_output_dir,
    leaves_nothing_if_refused,
    open_context,
    run_task,
)
from core import files
from core.clikit import RESUME, CliKit, add_version
from core.datatables import TableError
from core.devices import default_device
from core.errors import DataError
from core.logs import configure_logging
from core.options import add_options, from_args, plain

log = logging.getLogger("benchmark")

USER_ERRORS = (DataError, registry.RegistryError, TableError, CacheError, OutputError)


def task_classes() -> dict[str, Any]:
    """Registered task name -> its class (tasks whose module does not import are left out)."""
    out: dict[str, Any] = {}
    for name in sorted(registry.tasks()):
        try:
            out[name] = registry.load_task(name)
        except registry.RegistryError as e:
            log.debug("task %s unavailable: %s", name, e)
    return out


def add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="score a model on one or more tasks",
                       description="Score a model (or several: --model A,B) on one or more "
                                   "tasks.")
    seen: set[str] = set()
    add_options(p, RunConfig, seen=seen)
    add_options(p, ScaleConfig, seen=seen, title="scale out")
    p.add_argument("--task", action="append", required=True, help="task name (repeatable)")
    add_options(p, TaskConfig, seen=seen)
    for name, cls in task_classes().items():
        add_options(p, cls.config_class, seen=seen, title=f"{name} task")
    p.set_defaults(handler=run, parser=p)


def run(args: argparse.Namespace) -> int:
    cfg = from_args(RunConfig, args)
    scale = from_args(ScaleConfig, args)
    models = [m.strip() for m in cfg.model.split(",") if m.strip()]
    if not models:
        raise DataError("--model: no model named")
    try:
        shard = Shard.parse(scale.shard) if scale.shard else None
    except ValueError as e:
        raise DataError(str(e)) from None
    devices = [d.strip() for d in (scale.devices or "").split(",") if d.strip()]
    if scale.devices is not None and not devices:
        raise DataError("--devices: no device named (e.g. cuda:0,cuda:1 or cpu,cpu)")
    sharded_over_devices = len(models) == 1 and len(devices) > 1 and shard is None
    if scale.cache_shard_file and shard is None and not sharded_over_devices:
        raise DataError("--cache-shard-file needs --shard I/N (or one model over --devices)")
    classes = [registry.load_task(t) for t in args.task]  # unknown task: error before loading
    for cls in classes:  # a bad task option: error before loading
        from_args(cls.config_class, args)
    if len(models) > 1 or devices:
        return launch_run(args, cfg, scale, models, devices, sharded_over_devices)
    with leaves_nothing_if_refused(cfg.output_dir):
        return run_tasks(cfg, classes, args, shard, scale.cache_shard_file)


def run_tasks(cfg: RunConfig, classes: list[Any], args: argparse.Namespace,
              shard: Shard | None, shard_file: bool) -> int:
    ctx = open_context(cfg, shard, shard_file)
    for cls in classes:
        task = cls(from_args(cls.config_class, args))
        if shard is not None:
            task.prefill(ctx)
            print(f"{task.name}: shard {shard} of the embeddings is in {ctx.cache.path}; "
                  "stopping before scoring (a run without --shard scores from the cache)",
                  file=sys.stderr)  # what the run did, as the results line (also with -q)
            continue
        out, path = run_task(ctx, task)
        if not cfg.quiet:
            print(task.format_table(out))
        print(f"results: {path}", file=sys.stderr)
    return 0


def launch_run(args: argparse.Namespace, cfg: RunConfig, scale: ScaleConfig,
               models: list[str], devices: list[str], sharded_over_devices: bool) -> int:
    """Several models over ``devices`` (one process each; default: the one default device),
    or one model sharded over them and then scored; a line per job, exit 1 when any failed."""
    if cfg.device and devices:
        raise DataError("--device and --devices: give one of them")
    devices = devices or [cfg.device or default_device()]
    check_output_dir(cfg.output_dir)  # before any process starts (each job checks again)
    if not cfg.no_cache:
        check_cache_dir(cfg.cache_dir or default_cache_dir())
    base = launch.argv_of(args.parser, args, skip={"model", "device", "devices"})
    log_dir = cfg.output_dir / "logs"
    if sharded_over_devices:
        outcomes = shard_over_devices(models[0], base, devices, log_dir, scale, cfg)
    else:
        jobs = [launch.Job(m, [*base, "--model", m], name=model_slug(m)) for m in models]
        outcomes = launch.run_jobs(jobs, devices, log_dir=log_dir)
    for o in outcomes:
        print(o.describe() + ("" if o.ok else f" (log: {o.log})"), file=sys.stderr)
        for path in o.results:
            print(f"results: {path}", file=sys.stderr)
    failed = sum(not o.ok for o in outcomes)
    if failed:
        print(f"error: {failed} of {len(outcomes)} jobs failed", file=sys.stderr)
    return 1 if failed else 0


def shard_over_devices(model: str, base: list[str], devices: list[str], log_dir: Path,
                       scale: ScaleConfig, cfg: RunConfig) -> list[launch.JobOutcome]:
    """One model on a multi-device node: shard i of N embeds on device i, then (all shards
    ok) one scoring run from the cache on the first device."""
    n, slug = len(devices), model_slug(model)
    jobs = [launch.Job(model, [*base, "--model", model, "--shard", f"{i}/{n}"],
                       name=f"{slug}.shard-{i}-of-{n}") for i in range(n)]
    outcomes = launch.run_jobs(jobs, devices, log_dir=log_dir)
    if not all(o.ok for o in outcomes):
        return outcomes
    if scale.cache_shard_file:
        merge_shards(cfg.cache_dir)
    final = [a for a in base if a != "--cache-shard-file"]
    return outcomes + launch.run_jobs([launch.Job(model, [*final, "--model", model],
                                                  name=f"{slug}.score")], devices[:1],
                                      log_dir=log_dir)


def add_cache(sub: Any) -> None:
    p = sub.add_parser("cache", help="embedding cache: merge shard files",
                       description="Embedding cache maintenance.")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    m = csub.add_parser("merge", help="merge shard files into the main cache (idempotent)",
                        description="Fold shard files (--cache-shard-file runs) into "
                                    "CACHE_DIR/embeddings.sqlite; rows already there are kept.")
    m.add_argument("files", nargs="*", type=Path,
                   help="shard files (default: every CACHE_DIR/shards/shard-*.sqlite)")
    m.add_argument("--cache-dir", type=Path, default=None,
                   help="the cache (default $XCM_CACHE_DIR or ~/.cache/xcm3)")
    m.set_defaults(handler=cache_merge)


def cache_merge(args: argparse.Namespace) -> int:
    res = merge_shards(args.cache_dir, args.files or None)
    if not res:
        print("no shard files to merge", file=sys.stderr)
    for r in res:
        print(f"{r.source}: {r.rows} rows, {r.added} new"
              + (f", {r.bad} bad (left out)" if r.bad else ""), file=sys.stderr)
    return 0


def add_ls(sub: Any) -> None:
    p = sub.add_parser("ls", help="list registered models and tasks",
                       description="List registered models and tasks.")
    p.add_argument("--conventions", action="store_true",
                   help="per paper model, every field where the reference and authors "
                        "conventions differ")
    p.add_argument("--mteb", action="store_true",
                   help="the models of mteb's registry with text and image encoders, with their "
                        "revisions (run one as --model mteb:NAME; needs the mteb extra)")
    p.set_defaults(handler=ls)


def record_facts(m: Any) -> str:
    """A zoo record's identity in one field: ``rev=COMMIT12 dim=N SIMILARITY LANGS PARAMSM``."""
    rev = m.revision[:12] if m.revision and ":" not in m.revision else (m.revision or "unpinned")
    parts = [f"rev={rev}", f"dim={m.embedding_size or '?'}", m.similarity,
             ",".join(m.languages) or "any"]
    if m.parameters is not None:
        parts.append(f"{m.parameters:g}M")
    return " ".join(parts)


def ls(args: argparse.Namespace) -> int:
    if getattr(args, "conventions", False):
        from benchmark.models.conventions import format_differences

        print(format_differences())
        return 0
    if getattr(args, "mteb", False):
        from benchmark.models import hub

        hub.require(("mteb",), "mteb", "ls --mteb")
        from benchmark.mteb.models import format_listing, text_image_metas

        print(format_listing(text_image_metas()))
        return 0
    models = registry.models()
    width = max(len(n) for n in models)
    print("models:")
    for name, e in sorted(models.items()):
        ck = e.kwargs.get("checkpoint", "")
        flag = " [paper]" if e.paper else ""
        print(f"  {name:<{width}}  {ck}{flag}  {record_facts(e)}  {e.description}")
    print("model families (family:ARG): " + ", ".join(sorted(registry.FAMILIES)))
    print("tasks:")
    for name, target in sorted(registry.tasks().items()):
        try:
            desc = registry.import_target(target).description
        except registry.RegistryError as e:
            desc = f"(unavailable: {e})"
        print(f"  {name:<12} {desc}")
    return 0


def add_smoke(sub: Any) -> None:
    p = sub.add_parser("smoke", help="load one model, embed generated triplets, print throughput",
                       description="Smoke test of one model where its weights (and a GPU) are.")
    add_options(p, SmokeConfig)
    p.set_defaults(handler=smoke)


def smoke(args: argparse.Namespace) -> int:
    cfg = from_args(SmokeConfig, args)
    res = run_smoke(cfg.model, cfg.triplets, cfg.device, cfg.dtype, cfg.batch_size, cfg.size)
    print(format_smoke(res))
    if cfg.json:
        files.atomic_write_json(cfg.json, res, default=str)
    ok = res["finite"] and all(math.isfinite(x) for x in res["norms"]["texts"] + res["norms"]["images"])
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmark",
                                description=plain(__doc__.split("\n")[0]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_run(sub)
    add_ls(sub)
    analysis_cli.add_parser(sub)
    report_cli.add_parser(sub)
    report_cli.add_compare(sub)
    add_smoke(sub)
    add_cache(sub)
    reproduce_cli.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    args = build_parser().parse_args(argv)
    if getattr(args, "quiet", False):  # warnings, errors and the results line only
        configure_logging(quiet=True)
    kit = CliKit(extra="all", user_errors=lambda: USER_ERRORS,
                 resume=lambda: resume_line(args))
    return kit.run(lambda: args.handler(args))


def resume_line(args: argparse.Namespace) -> str:
    """The end of the line Ctrl-C or SIGTERM prints: what is kept and how to go on."""
    if getattr(args, "handler", None) is run:
        cache = getattr(args, "cache_dir", None) or default_cache_dir()
        return (f"the embeddings computed so far are kept in {cache}; run the same command "
                "again to resume from them")
    return RESUME
