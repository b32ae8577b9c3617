"""The whole ``reproduce`` command as a library call: plan, (dry-run | run), compare, report."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.report.collect import collect
from benchmark.reproduce import dryrun, render
from benchmark.reproduce.compare import Comparison, compare
from benchmark.reproduce.parallel import execute_on_devices
from benchmark.reproduce.plan import (
    Plan,
    PlanError,
    ReproduceConfig,
    build_plan,
    check_output_dir,
    load_state,
)
from benchmark.reproduce.run import ExecSettings, Summary, execute

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What one ``reproduce`` call did."""

    plan: Plan
    summary: Summary | None = None  # None: nothing ran (dry run, compare only)
    comparison: Comparison | None = None
    written: dict[str, Path] = field(default_factory=dict)
    dry_run: str = ""  # the dry-run listing

    @property
    def ok(self) -> bool:
        return self.summary is None or not self.summary.failed


def failures_of(plan: Plan) -> list[tuple[str, str]]:
    """(job, reason) of the plan's jobs whose last run, with this plan, failed (state file)."""
    state = load_state(plan.state_path)
    return [(j.name, str(e.get("error") or "failed")) for j in plan.jobs
            if (e := state.get(j.name) or {}).get("status") == "failed"
            and e.get("fingerprint") == j.fingerprint()]


def write_comparison(plan: Plan, authors_folder: Path | None = None) -> tuple[Comparison,
                                                                              dict[str, Path]]:
    """Compare every results file under the plan's results folder; write the three files."""
    plan.results_dir.mkdir(parents=True, exist_ok=True)
    col = collect([plan.results_dir])
    comp = compare(col, authors_folder)
    ctx = render.Context(str(plan.results_dir), len(col.paths), failures_of(plan))
    by_conv: dict[str, dict[str, None]] = {}
    for j in plan.jobs:
        by_conv.setdefault(j.conventions, {})[j.model] = None
    ctx.notes.append("Conventions of this plan: " + "; ".join(
        f"{c} ({', '.join(ms)})" for c, ms in by_conv.items()) + ". Datasets: "
        + ", ".join(sorted({j.dataset.spec for j in plan.jobs})) + ".")
    return comp, render.write(comp, plan.output_dir, ctx)


def reproduce(cfg: ReproduceConfig, endpoint: str | None = None) -> Outcome:
    """Run (or dry-run) the plan ``cfg`` describes and write the comparison."""
    plan = build_plan(cfg)
    if cfg.dry_run:
        items = [dryrun.repo_size(d, endpoint, cfg.hub_timeout) for d in dryrun.downloads(plan)]
        measured = dryrun.suite_rates(cfg.gpu_suite) if cfg.gpu_suite else None
        return Outcome(plan, dry_run=dryrun.format_dry_run(plan, items,
                                                           dryrun.estimate(plan, measured)))
    devices = [d.strip() for d in (cfg.devices or "").split(",") if d.strip()]
    if cfg.devices and not devices:
        raise PlanError("--devices: empty list")
    if devices and cfg.device:
        raise PlanError("--devices and --device: give one of them")
    check_output_dir(plan.output_dir)
    summary = None
    if devices and not cfg.compare_only:
        summary = execute_on_devices(plan, cfg, devices)
    elif not cfg.compare_only:
        settings = ExecSettings(cache_dir=cfg.cache_dir, no_cache=cfg.no_cache,
                                device=cfg.device, batch_size=cfg.batch_size,
                                allow_revision_change=cfg.allow_revision_change)
        summary = execute(plan, settings)
    if cfg.no_compare:
        return Outcome(plan, summary)
    comp, written = write_comparison(plan)
    return Outcome(plan, summary, comp, written)
