"""Run a reproduce plan: every job that is not up to date, model by model, in this process.
Each model is loaded once for its jobs; every outcome is recorded in the state file at once,
and a failed job is recorded with its one-line reason while the others go on.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmark import registry
from benchmark.analysis.core import AnalyzeConfig, analyze_context
from benchmark.reproduce import pins
from benchmark.reproduce.plan import Job, Plan, load_state, record, save_state, up_to_date
from benchmark.tasks.base import RunConfig, RunContext, open_context, run_task
from core.hub import one_line

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecSettings:
    """How jobs run (not what they compute: none of this is in a job's fingerprint)."""

    cache_dir: Path | None = None
    no_cache: bool = False
    device: str | None = None
    batch_size: int | None = None
    allow_revision_change: bool = False  # unpinned inputs may resolve to a new revision


@dataclass(frozen=True)
class JobOutcome:
    job: Job
    status: str  # ran | up-to-date | failed
    seconds: float = 0.0
    result: Path | None = None
    detail: str = ""


@dataclass
class Summary:
    outcomes: list[JobOutcome] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return sum(o.status == "ran" for o in self.outcomes)

    @property
    def up_to_date(self) -> int:
        return sum(o.status == "up-to-date" for o in self.outcomes)

    @property
    def failed(self) -> list[JobOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def check_dataset(ctx: RunContext, job: Job, cfg: object, pin: Callable | None) -> None:
    """An unpinned hub dataset's data fingerprint, recorded by the first run, else checked."""
    ds = job.dataset
    if pin is None or ds.local or ds.revision:
        return
    if job.task == "xm3600-i2t":
        from benchmark.tasks.xm3600 import load_data

        fp = load_data(ctx, cfg).fingerprint  # type: ignore[arg-type]
    else:
        from benchmark.tasks.xcm import load_xcm

        fp = load_xcm(ctx, cfg, with_texts=False).fingerprint  # type: ignore[arg-type]
    pin("datasets", f"{ds.spec} (unpinned)", fp)


def run_job(ctx: RunContext, job: Job, pin: Callable | None = None) -> Path:
    """Produce one job's results file with the model already loaded in ``ctx``."""
    ds = job.dataset
    if job.task == "analysis":
        cfg = AnalyzeConfig(dataset=ds.spec, revision=ds.revision, seed=job.seed,
                            bootstrap=job.resamples, metric="euclidean", no_umap=True)
        check_dataset(ctx, job, cfg, pin)
        return analyze_context(ctx, cfg)
    cls = registry.load_task(job.task)
    if job.task == "xm3600-i2t":
        tcfg = cls.config_class(xm3600=ds.spec, revision=ds.revision, seed=job.seed,
                                k=",".join(map(str, job.ks)), grouping="authors",
                                compare_engines=job.compare_engines)
    else:
        tcfg = cls.config_class(dataset=ds.spec, revision=ds.revision, seed=job.seed,
                                bootstrap=job.resamples)
    check_dataset(ctx, job, tcfg, pin)
    _, path = run_task(ctx, cls(tcfg))
    return path


def execute(plan: Plan, settings: ExecSettings | None = None,
            opener: Callable[[RunConfig], RunContext] | None = None) -> Summary:
    """Run every job of ``plan`` that is not up to date; what happened to each."""
    s = settings or ExecSettings()
    open_ctx = opener or open_context
    state = load_state(plan.state_path)
    pins_path = plan.output_dir / pins.PINS_FILE

    def pin(kind: str, name: str, value: object) -> None:
        pins.check_and_record(pins_path, kind, name, value, s.allow_revision_change)

    summary = Summary()
    for model in plan.models:
        todo: dict[Job, str] = {}  # job -> why it runs
        for job in (j for j in plan.jobs if j.model == model):
            done, why = up_to_date(plan, job, state.get(job.name))
            if done:
                summary.outcomes.append(JobOutcome(job, "up-to-date", 0.0,
                                                   plan.result_path(job), why))
            else:
                log.info("%s: runs (%s)", job.name, why)
                todo[job] = why
        if not todo:
            continue
        first = next(iter(todo))
        t0 = time.perf_counter()
        try:
            ctx: RunContext | None = open_ctx(RunConfig(
                model=model, output_dir=plan.results_dir, cache_dir=s.cache_dir,
                no_cache=s.no_cache, device=s.device, dtype=first.dtype,
                batch_size=s.batch_size, quiet=True, conventions=first.conventions))
            pin("models", model, pins.model_revisions(ctx.adapter.spec))  # type: ignore[union-attr]
        except Exception as e:  # noqa: BLE001 - any load failure fails this model's jobs only
            reason = one_line(e)
            log.error("%s: cannot load: %s", model, reason)
            for job in todo:
                record(state, job, "failed", time.perf_counter() - t0, error=reason)
                summary.outcomes.append(JobOutcome(job, "failed", 0.0, None, reason))
            save_state(plan.state_path, state, [j.name for j in todo])
            continue
        for job in todo:
            t1 = time.perf_counter()
            try:
                path = run_job(ctx, job, pin)
            except Exception as e:  # noqa: BLE001 - a failed job is reported, the others go on
                reason = one_line(e)
                log.error("%s failed: %s", job.name, reason)
                log.debug("%s traceback", job.name, exc_info=True)
                record(state, job, "failed", time.perf_counter() - t1, error=reason)
                summary.outcomes.append(JobOutcome(job, "failed", time.perf_counter() - t1,
                                                   None, reason))
            else:
                record(state, job, "ok", time.perf_counter() - t1, path)
                summary.outcomes.append(JobOutcome(job, "ran", time.perf_counter() - t1, path,
                                                   todo[job]))
            save_state(plan.state_path, state, [job.name])
        ctx = None  # the model dropped, and the GPU memory it held, before the next one
        gc.collect()
        if (torch := sys.modules.get("torch")) is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
    return summary


def format_summary(summary: Summary) -> str:
    """One line per job, then the counts."""
    lines = [f"{'job':<40}{'status':<12}{'seconds':>9}  detail"]
    for o in summary.outcomes:
        detail = o.detail if len(o.detail) <= 90 else o.detail[:89] + "…"
        lines.append(f"{o.job.name:<40}{o.status:<12}{o.seconds:>9.1f}  {detail}")
    lines.append(f"ran {summary.ran}, up to date {summary.up_to_date}, failed "
                 f"{len(summary.failed)}")
    return "\n".join(lines)
