"""``reproduce --devices``: the plan's models over several devices, one ``reproduce --models
MODEL --no-compare`` process per model, sharing the output dir, cache and (locked) state file;
the launcher writes the comparison once.
"""

from __future__ import annotations

import logging
from pathlib import Path

from benchmark import launch
from benchmark.reproduce.plan import Plan, ReproduceConfig, load_state, up_to_date
from benchmark.reproduce.run import JobOutcome, Summary
from benchmark.tasks.base import check_output_dir

log = logging.getLogger(__name__)


def child_args(cfg: ReproduceConfig, model: str) -> list[str]:
    """The ``reproduce`` flags of one model's process (the launcher adds ``--device``)."""
    args = ["--output-dir", str(cfg.output_dir), "--models", model, "--tasks", cfg.tasks,
            "--xcm-dataset", cfg.xcm_dataset, "--xm3600-dataset", cfg.xm3600_dataset,
            "--bootstrap", str(cfg.bootstrap), "--no-compare"]
    for flag, value in (("--xcm-revision", cfg.xcm_revision),
                        ("--xm3600-revision", cfg.xm3600_revision),
                        ("--cache-dir", cfg.cache_dir), ("--dtype", cfg.dtype),
                        ("--batch-size", cfg.batch_size)):
        if value is not None:
            args += [flag, str(value)]
    args += ["--allow-revision-change"] if cfg.allow_revision_change else []
    return args + (["--no-cache"] if cfg.no_cache else [])


def execute_on_devices(plan: Plan, cfg: ReproduceConfig, devices: list[str]) -> Summary:
    """Run the plan's models concurrently over ``devices``; every job's outcome, from the
    state file the processes wrote (a job whose record did not change is up to date)."""
    check_output_dir(plan.results_dir)  # claimed before the processes: none sees a half-written marker
    before = load_state(plan.state_path)
    jobs = [launch.Job(m, child_args(cfg, m), name=m, command="reproduce")
            for m in plan.models]
    outcomes = {o.job.model: o for o in launch.run_jobs(
        jobs, devices, log_dir=Path(plan.output_dir) / "logs")}
    after = load_state(plan.state_path)
    summary = Summary()
    for job in plan.jobs:
        entry, old = after.get(job.name), before.get(job.name)
        proc = outcomes[job.model]
        if entry and entry.get("fingerprint") == job.fingerprint() and entry != old:
            status = "ran" if entry.get("status") == "ok" else "failed"
            summary.outcomes.append(JobOutcome(
                job, status, float(entry.get("seconds") or 0.0),
                Path(entry["result"]) if entry.get("result") else None,
                entry.get("error") or f"on {proc.device}"))
        elif entry == old and up_to_date(plan, job, entry)[0]:  # the process skipped it
            summary.outcomes.append(JobOutcome(job, "up-to-date", 0.0,
                                               plan.result_path(job), "up to date"))
        else:
            why = proc.reason or "the model's process recorded no outcome"
            summary.outcomes.append(JobOutcome(job, "failed", proc.seconds, None,
                                               f"{why} (log: {proc.log})"))
    return summary
