"""``python -m benchmark``: run tasks on a model, list models and tasks, analyze, report, smoke.

    python -m benchmark run --model MODEL --task 3xcm [--task ...] --dataset PATH_OR_HUB_ID
    python -m benchmark ls
    python -m benchmark analyze --model MODEL --dataset PATH   (benchmark.analysis)
    python -m benchmark report RESULTS_DIR... --output DIR     (benchmark.report)
    python -m benchmark smoke --model MODEL [--device cuda]    (benchmark.smoke)
    python -m benchmark reproduce --output-dir DIR [--dry-run]  (benchmark.reproduce)

Every command's flags come from typed configs (:mod:`benchmark.config`): ``run`` fills a
:class:`~benchmark.tasks.base.RunConfig` and each task's own config. Logging is configured
once (:func:`benchmark.logs.configure_logging`). Bad input (unknown model/task, bad dataset)
is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from typing import Any

from benchmark import files, registry
from benchmark.analysis import cli as analysis_cli
from benchmark.config import add_options, from_args
from benchmark.data import DataError
from benchmark.logs import configure_logging
from benchmark.report import cli as report_cli
from benchmark.reproduce import cli as reproduce_cli
from benchmark.smoke import SmokeConfig, format_smoke, run_smoke
from benchmark.tables import TableError
from benchmark.tasks.base import RunConfig, TaskConfig, open_context, run_task

log = logging.getLogger("benchmark")

USER_ERRORS = (DataError, registry.RegistryError, TableError)


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
                       description="Score a model on one or more tasks.")
    seen: set[str] = set()
    add_options(p, RunConfig, seen=seen)
    p.add_argument("--task", action="append", required=True, help="task name (repeatable)")
    add_options(p, TaskConfig, seen=seen)
    for name, cls in task_classes().items():
        add_options(p, cls.config_class, seen=seen, title=f"{name} task")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    cfg = from_args(RunConfig, args)
    classes = [registry.load_task(t) for t in args.task]  # unknown task: error before loading
    ctx = open_context(cfg)
    for cls in classes:
        task = cls(from_args(cls.config_class, args))
        out, path = run_task(ctx, task)
        if not cfg.quiet:
            print(task.format_table(out))
        print(f"results: {path}", file=sys.stderr)
    return 0


def add_ls(sub: Any) -> None:
    p = sub.add_parser("ls", help="list registered models and tasks",
                       description="List registered models and tasks.")
    p.set_defaults(handler=ls)


def ls(args: argparse.Namespace) -> int:
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
    p = argparse.ArgumentParser(prog="python -m benchmark", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_run(sub)
    add_ls(sub)
    analysis_cli.add_parser(sub)
    report_cli.add_parser(sub)
    add_smoke(sub)
    reproduce_cli.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except USER_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
