"""Run many ``python -m benchmark run`` jobs over many devices, one process per job.

Each device slot (``cpu,cpu`` is two) runs one :class:`Job` at a time with ``--device``
appended; jobs share the output dir and the embedding cache but nothing else, so one that
fails does not stop the others. Each logs to its own file; its :class:`JobOutcome` carries
the exit code, the time and a one-line reason.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]  # the checkout this package runs from


@dataclass(frozen=True)
class Job:
    """One model's ``python -m benchmark <command>`` arguments (``--device`` is added)."""

    model: str
    argv: tuple[str, ...] | list[str]
    name: str = ""  # label for logs and outcomes (default: the model)
    command: str = "run"

    @property
    def label(self) -> str:
        return self.name or self.model


@dataclass
class JobOutcome:
    """How one job ended: exit code (negative: killed by that signal), seconds, its log."""

    job: Job
    device: str
    returncode: int
    seconds: float
    log: Path
    reason: str | None = None  # one line, for a failure
    results: list[str] = field(default_factory=list)  # the job's "results: PATH" files

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        head = f"{self.job.label} on {self.device} ({self.seconds:.1f} s)"
        return f"ok      {head}" if self.ok else f"FAILED  {head}: {self.reason}"


@dataclass
class _Pool:
    jobs: queue.SimpleQueue[tuple[int, Job]]
    log_dir: Path
    env: dict[str, str]
    outcomes: dict[int, JobOutcome] = field(default_factory=dict)
    running: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    repeated: set[str] = field(default_factory=set)  # labels of several jobs: logs get an index


def run_jobs(jobs: Sequence[Job], devices: Sequence[str], *, log_dir: Path,
             env: dict[str, str] | None = None) -> list[JobOutcome]:
    """Run ``jobs`` over the device slots, concurrently; outcomes in job order (Ctrl-C
    terminates the jobs still running)."""
    if not devices:
        raise ValueError("run_jobs needs at least one device")
    log_dir.mkdir(parents=True, exist_ok=True)
    q: queue.SimpleQueue[tuple[int, Job]] = queue.SimpleQueue()
    for i, job in enumerate(jobs):
        q.put((i, job))
    pool = _Pool(q, log_dir, child_env(env))
    labels = [j.label for j in jobs]
    pool.repeated = {x for x in labels if labels.count(x) > 1}
    threads = [threading.Thread(target=_slot, args=(pool, dev), daemon=True,
                                name=f"slot-{n}-{dev}")
               for n, dev in enumerate(devices[: max(1, len(jobs))])]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:
        pool.stop.set()
        with pool.lock:
            procs = list(pool.running.values())
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        raise
    return [pool.outcomes[i] for i in range(len(jobs))]


def argv_of(parser: argparse.ArgumentParser, args: argparse.Namespace,
            skip: Collection[str] = ()) -> list[str]:
    """The flags that reproduce the parsed ``args`` of ``parser`` (those not at their
    default, dests in ``skip`` left out): how a launcher hands its own flags to a job."""
    out: list[str] = []
    for a in parser._actions:  # argparse has no public list of a parser's arguments
        if not a.option_strings or a.dest in skip or a.dest == "help":
            continue
        value = getattr(args, a.dest, a.default)
        if value == a.default or value is None:
            continue
        flag = max(a.option_strings, key=len)
        if a.nargs == 0:  # store_true / store_const
            out.append(flag)
        elif isinstance(value, list):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    return out


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a job: this one, this checkout first on PYTHONPATH (a job runs the
    same code as its launcher), progress bars off (the logs are files)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TQDM_DISABLE", "1")
    env.update(extra or {})
    return env


def _slot(pool: _Pool, device: str) -> None:
    """One device slot: take jobs until none is left."""
    while not pool.stop.is_set():
        try:
            i, job = pool.jobs.get_nowait()
        except queue.Empty:
            return
        pool.outcomes[i] = _run_one(pool, i, job, device)


def _run_one(pool: _Pool, i: int, job: Job, device: str) -> JobOutcome:
    cmd = [sys.executable, "-m", "benchmark", job.command, *job.argv, "--device", device]
    name = f"{job.label}.{i}" if job.label in pool.repeated else job.label
    path = pool.log_dir / f"{_safe(name)}.{_safe(device)}.log"
    log.info("start %s on %s (log: %s)", job.label, device, path)
    t0 = time.perf_counter()
    try:
        out = open(path, "wb")  # closed by the with below
    except OSError as e:  # the job's outcome, not a dead slot thread
        return JobOutcome(job, device, 127, 0.0, path, f"could not open its log: {e}")
    with out:
        out.write((" ".join(cmd) + "\n").encode())
        out.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=pool.env,
                                    stdin=subprocess.DEVNULL)
        except OSError as e:
            return JobOutcome(job, device, 127, 0.0, path, f"could not start: {e}")
        with pool.lock:
            pool.running[i] = proc
        rc = proc.wait()
        with pool.lock:
            pool.running.pop(i, None)
    res = JobOutcome(job, device, rc, time.perf_counter() - t0, path,
                     results=_results_lines(path))
    if rc:
        res.reason = failure_reason(path, rc)
    log.info("%s", res.describe())
    return res


def _results_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [m.group(1) for m in re.finditer(r"^results: (.+)$", text, re.M)]


def failure_reason(path: Path, returncode: int) -> str:
    """One line: the last ``error:`` line of the log, else its last line, else the code."""
    if returncode < 0:
        return f"killed by signal {-returncode}"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            lines = [x.strip() for x in f.read().decode("utf-8", "replace").splitlines()]
    except OSError:
        lines = []
    lines = [x for x in lines if x]
    errors = [x for x in lines if x.startswith("error:")]
    line = errors[-1] if errors else (lines[-1] if lines else "")
    return (line[:300] + (" ..." if len(line) > 300 else "")) or f"exit code {returncode}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "job"
