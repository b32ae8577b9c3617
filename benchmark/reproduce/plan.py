"""The reproduce plan: typed jobs (model x task x dataset x conventions) and their state.

A :class:`Job` holds everything that decides one results file (:meth:`Job.fingerprint`);
``DIR/reproduce-state.json`` records per job the fingerprint it last ran with, its status and
the sha256 of its results file, so a job reruns only when one of them changed.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark import registry
from benchmark.cache import dir_problem
from benchmark.models import conventions as model_conventions
from benchmark.reproduce.provenance import recorded_conventions
from benchmark.results import read_results, results_path
from core import files
from core.errors import DataError
from core.options import option

log = logging.getLogger(__name__)

XCM_DATASET = "Chula-AI/association_bias_benchmark"
XM3600_DATASET = "Tierone2025part2/crossmodal_3600"
PAPER_KS = (1, 5, 10, 15, 25, 50, 99)
CONVENTIONS = "authors"
RQ_TASKS: dict[str, tuple[str, ...]] = {"rq2": ("3xcm", "3xcm-i2i", "analysis"),
                                        "rq1": ("xm3600-i2t",)}
STATE_FILE = "reproduce-state.json"
STATE_VERSION = 1


class PlanError(DataError):
    """Bad ``reproduce`` input (unknown research question, empty model list): one line, exit 2."""


@dataclass
class ReproduceConfig:
    """``python -m benchmark reproduce``: what to run, on what data, where."""

    output_dir: Path = option("results go to OUTPUT_DIR/results, the comparison to "
                              "OUTPUT_DIR/paper-comparison.{md,html,csv}")
    models: str = option("paper (the paper's ten models; the default) or NAME,NAME,... "
                         "(`paper` may be one of them)", "paper")
    tasks: str = option("rq1 (xm3600-i2t), rq2 (3xcm, 3xcm-i2i, analysis) or both (default "
                        "rq1,rq2)", "rq1,rq2")
    dry_run: bool = option("list what would be downloaded and the estimated GPU hours; run "
                           "nothing", False)
    compare_only: bool = option("run nothing; write the comparison from the results in "
                                "OUTPUT_DIR/results", False)
    xcm_dataset: str = option(f"3XCM as published: hub id or local snapshot (default "
                              f"{XCM_DATASET})", XCM_DATASET)
    xcm_revision: str | None = option("hub revision of --xcm-dataset", None)
    xm3600_dataset: str = option(f"XM3600: hub id or local folder (default {XM3600_DATASET})",
                                 XM3600_DATASET)
    xm3600_revision: str | None = option("hub revision of --xm3600-dataset", None)
    cache_dir: Path | None = option("embedding cache (default $XCM_CACHE_DIR or ~/.cache/xcm3)",
                                    None)
    no_cache: bool = option("do not read or write the embedding cache", False)
    device: str | None = option("cpu / cuda / cuda:1 (default: cuda when present)", None)
    dtype: str | None = option("override the conventions' dtype (not for reproducing)", None,
                               choices=["float32", "float16", "bfloat16"])
    batch_size: int | None = option("batch size for texts and images", None, minimum=1)
    bootstrap: int = option("bootstrap resamples for SP intervals (default 1000)", 1000,
                            minimum=0)
    gpu_suite: Path | None = option(
        "--dry-run: GPU hours from the throughputs a `tests/perf/gpu_suite.py --out FILE` run "
        "measured (instead of the Table 6 size estimate)", None, metavar="FILE")
    hub_timeout: float = option("seconds per hub request of --dry-run (default 5)", 5.0)
    devices: str | None = option("D1,D2,...: one model per device, each in its own process "
                                 "(`reproduce` of that model), concurrently; a failed model "
                                 "does not stop the others (e.g. cuda:0,cuda:1)", None)
    allow_revision_change: bool = option(
        "accept an unpinned model or dataset that resolves to another revision than the one "
        "this output dir recorded at its first run (reproduce-pins.json); refused otherwise",
        False)
    no_compare: bool = option("run the jobs and write no comparison (what each --devices "
                              "process does; the launcher writes it once at the end)", False)


@dataclass(frozen=True)
class DatasetRef:
    """A dataset as the plan knows it: hub id (+ revision) or a local path (+ stamp)."""

    spec: str
    revision: str | None = None
    stamp: str | None = None  # local folders: fingerprint of file names, sizes, mtimes

    @property
    def local(self) -> bool:
        return self.stamp is not None


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def dataset_ref(spec: str, revision: str | None = None, flag: str = "--dataset") -> DatasetRef:
    """A local path (resolved, stamped) or a hub id ``ORG/NAME``; anything else is bad input."""
    p = Path(spec).expanduser()
    if p.exists():
        return DatasetRef(str(p.resolve()), revision, files.folder_stamp(p))
    if spec.startswith((".", "/", "~")) or not HUB_ID.fullmatch(spec):
        raise PlanError(f"{flag} {spec!r}: no such file or folder, and not a hub id ORG/NAME")
    return DatasetRef(spec, revision, None)


#: the kind in the marker of a reproduce folder (see core.files.claim)
REPRODUCE_KIND = "3xcm-reproduce"


def check_output_dir(path: Path) -> None:
    """``--output-dir`` must be new, empty or a reproduce run's (its marker); else refused."""
    problem = dir_problem(path)
    if problem:
        raise PlanError(f"--output-dir {path} {problem}")
    try:
        files.claim(path, REPRODUCE_KIND)
    except files.FolderNotOursError as e:
        raise PlanError(f"--output-dir {e}") from e


@dataclass(frozen=True)
class Job:
    """One results file to produce: ``results/<model-slug>/<task>.json``."""

    model: str
    task: str  # 3xcm | 3xcm-i2i | analysis | xm3600-i2t
    dataset: DatasetRef
    conventions: str = CONVENTIONS
    ks: tuple[int, ...] = ()
    bootstrap: int | None = None  # SP resamples of the RQ2 jobs (None: the task has none)
    seed: int = 0
    checkpoint: str | None = None  # the zoo's pin when the plan was made
    revision: str | None = None
    dtype: str | None = None  # --dtype over the conventions' (None: the profile's own)
    profile: str | None = None  # sha256 of the resolved conventions record (None: no profile)
    compare_engines: bool = False  # xm3600-i2t: also rank with the other engine (Tables 1, 5)

    @property
    def name(self) -> str:
        return f"{self.model}/{self.task}"

    @property
    def resamples(self) -> int:
        """The bootstrap resamples a task of this job uses (the tasks' default when unset)."""
        return 1000 if self.bootstrap is None else self.bootstrap

    def key(self) -> dict[str, Any]:
        """Every field, as JSON gives it back (tuples as lists), to compare with the state."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def fingerprint(self) -> str:
        return files.sha256_text(json.dumps(self.key(), sort_keys=True))

    def args(self, output_dir: Path, cache_dir: Path | None = None) -> list[str]:
        """The ``run`` / ``analyze`` arguments of this job (without ``--device``)."""
        common = ["--model", self.model, "--conventions", self.conventions, "--output-dir",
                  str(output_dir), "--seed", str(self.seed), "-q"]
        common += ["--cache-dir", str(cache_dir)] if cache_dir else []
        common += ["--dtype", self.dtype] if self.dtype else []
        rev = ["--revision", self.dataset.revision] if self.dataset.revision else []
        if self.task == "analysis":
            return [*common, "--dataset", self.dataset.spec, *rev, "--metric", "euclidean",
                    "--no-umap", "--bootstrap", str(self.resamples)]
        if self.task == "xm3600-i2t":
            return [*common, "--task", self.task, "--xm3600", self.dataset.spec, *rev,
                    "--k", ",".join(map(str, self.ks)), "--grouping", "authors",
                    *(["--compare-engines"] if self.compare_engines else [])]
        return [*common, "--task", self.task, "--dataset", self.dataset.spec, *rev,
                "--bootstrap", str(self.resamples)]

    def argv(self, output_dir: Path, cache_dir: Path | None = None) -> list[str]:
        """The whole ``python -m benchmark`` command line of this job."""
        return ["analyze" if self.task == "analysis" else "run", *self.args(output_dir, cache_dir)]


@dataclass(frozen=True)
class Plan:
    jobs: tuple[Job, ...]
    output_dir: Path

    @property
    def results_dir(self) -> Path:
        return self.output_dir / "results"

    @property
    def state_path(self) -> Path:
        return self.output_dir / STATE_FILE

    def result_path(self, job: Job) -> Path:
        return results_path(self.results_dir, job.model, job.task)

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(j.model for j in self.jobs))


def resolve_models(spec: str) -> list[str]:
    """``paper`` and/or registered names (``family:arg`` and ``module:Class`` pass through)."""
    entries = registry.models()
    out: list[str] = []
    for tok in filter(None, (t.strip() for t in spec.split(","))):
        if tok.lower() == "paper":
            out += [n for n, e in entries.items() if e.paper]
        elif tok in entries or ":" in tok:
            out.append(tok)
        else:
            raise registry.RegistryError(
                f"unknown model {tok!r}{registry.suggest(tok, sorted(entries))} (see `python -m "
                "benchmark ls`; `paper` names the paper's ten)")
    out = list(dict.fromkeys(out))
    if not out:
        raise PlanError(f"--models {spec!r} names no model")
    return out


def resolve_tasks(spec: str) -> list[str]:
    """The research questions named, in the plan's order (RQ2 first: it feeds Tables 7/8)."""
    asked = {t.strip().lower() for t in spec.split(",") if t.strip()}
    unknown = asked - set(RQ_TASKS)
    if unknown or not asked:
        raise PlanError(f"--tasks {spec!r}: expected rq1, rq2 or rq1,rq2")
    return [rq for rq in RQ_TASKS if rq in asked]


def profile_sha(model: str, profile: str) -> str | None:
    """sha256 of the conventions record of ``model`` (an edited record reruns its jobs)."""
    rec = model_conventions.resolve(model, profile)
    if rec is None:
        return None
    return files.sha256_text(json.dumps(rec.cache_key(), sort_keys=True))


def build_plan(cfg: ReproduceConfig) -> Plan:
    """Every job of ``cfg``, model by model (the paper's with the authors' conventions)."""
    models, rqs = resolve_models(cfg.models), resolve_tasks(cfg.tasks)
    entries = registry.models()
    flags = {"rq2": (cfg.xcm_dataset, cfg.xcm_revision, "--xcm-dataset"),
             "rq1": (cfg.xm3600_dataset, cfg.xm3600_revision, "--xm3600-dataset")}
    refs = {rq: dataset_ref(*flags[rq]) for rq in flags if rq in rqs}
    jobs: list[Job] = []
    for m in models:
        e = entries.get(m)
        pin = {"checkpoint": e.kwargs.get("checkpoint"), "revision": e.kwargs.get("revision")} \
            if e else {}
        # only the paper's models have an authors profile; any other model runs as it is
        pin["conventions"] = CONVENTIONS if e is not None and e.paper else "reference"
        pin["profile"] = profile_sha(m, pin["conventions"])
        for rq in rqs:
            for task in RQ_TASKS[rq]:
                ks = PAPER_KS if task == "xm3600-i2t" else ()
                boot = cfg.bootstrap if rq == "rq2" else None
                jobs.append(Job(m, task, refs[rq], ks=ks, bootstrap=boot, dtype=cfg.dtype,
                                compare_engines=task == "xm3600-i2t", **pin))
    return Plan(tuple(jobs), Path(cfg.output_dir))


def load_state(path: Path) -> dict[str, dict[str, Any]]:
    """Job name -> its last record; an unreadable state file is ignored (everything reruns)."""
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        jobs = raw["jobs"]
        if raw.get("schema_version") != STATE_VERSION or not isinstance(jobs, dict):
            raise ValueError("unknown schema")
        return jobs
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("%s unreadable (%s): every job runs again", path, e)
        return {}


def save_state(path: Path, state: dict[str, dict[str, Any]],
               names: Collection[str] | None = None) -> None:
    """Write the state; with ``names``, only those jobs' entries over what is on disk now (read
    under a lock), so ``--devices`` processes never undo each other's records."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = state if names is None else {
            **load_state(path), **{n: state[n] for n in names if n in state}}
        files.atomic_write_json(path, {"schema_version": STATE_VERSION, "jobs": merged})


def up_to_date(plan: Plan, job: Job, entry: dict[str, Any] | None) -> tuple[bool, str]:
    """(whether ``job`` need not run, why)."""
    if not entry:
        return False, "not run yet"
    if entry.get("status") != "ok":
        return False, f"last run {entry.get('status')}"
    if entry.get("fingerprint") != job.fingerprint():
        old, new = entry.get("key") or {}, job.key()
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return False, "the plan changed (" + ", ".join(keys or ["?"]) + ")"
    path = plan.result_path(job)
    if not path.is_file():
        return False, "results file missing"
    if files.sha256_file(path) != entry.get("result_sha256"):
        return False, "results file changed since it was written"
    try:
        res = read_results(path)
    except (OSError, ValueError) as e:
        return False, f"results file unreadable ({type(e).__name__})"
    if (res.model.name, res.task.name) != (job.model, job.task):
        return False, "results file of another model or task"
    conv = recorded_conventions(res.settings)
    if conv is not None and conv != job.conventions:
        return False, f"results record conventions {conv!r}"
    ks = (res.task.model_extra or {}).get("ks")
    if job.ks and ks is not None and [int(k) for k in ks] != list(job.ks):
        return False, "results of other cut-offs"
    return True, "up to date"


def record(state: dict[str, dict[str, Any]], job: Job, status: str, seconds: float,
           path: Path | None = None, error: str | None = None) -> None:
    """Note a job's outcome (the caller saves the state)."""
    state[job.name] = {
        "status": status, "fingerprint": job.fingerprint(), "key": job.key(),
        "result": str(path) if path else None,
        "result_sha256": files.sha256_file(path) if path and path.is_file() else None,
        "seconds": round(seconds, 3), "error": error,
    }
