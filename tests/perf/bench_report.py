"""Benchmark: ``benchmark report`` over 100, 300 and 1,000 models of one dataset, on the CPU.

    .venv/bin/python tests/perf/bench_report.py [--models 100,300,1000] [--workdir DIR]
        [--out FILE]

Not collected by pytest (no ``test_`` prefix). Steps (the results are kept in ``--workdir``
and reused when there; delete it to redo them):

1. one real run of the ``hash`` model on ``data/synthetic-3xcm`` (``3xcm`` and ``3xcm-i2i``)
   through ``benchmark run``;
2. the largest ``--models`` count of models: that run under the names ``hash-<i>``, its
   similarities moved by seeded noise, winners and scores recomputed with the evaluator's own
   functions (``outcome_frame``, ``association_scores``), results and outcomes files written as
   the tasks write them: every model has its leaderboard row, neighbour test and gallery page;
3. per count N, ``benchmark report`` over the first N models into a fresh folder, in a fresh
   subprocess: its wall time and peak resident memory (``ru_maxrss`` of that child), and both
   per model. Linear growth means the per-model numbers do not grow with N.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one

TASKS = ("3xcm", "3xcm-i2i")


def base_run(work: Path) -> Path:
    from benchmark.cli import main

    base = work / "base"
    if not (base / "hash" / "3xcm-i2i.json").is_file():
        rc = main(["run", "--model", "hash", "--task", "3xcm", "--task", "3xcm-i2i", "--dataset",
                   str(ROOT / "data" / "synthetic-3xcm"), "--output-dir", str(base),
                   "--no-cache", "-q"])
        if rc != 0:
            raise SystemExit(f"the base run failed ({rc})")
    return base / "hash"


def make_models(work: Path, n: int) -> None:
    """``work/models/<slug>/``: model i's results of both tasks (see the module docstring)."""
    import numpy as np
    import pandas as pd

    from benchmark.metrics.association import association_scores
    from benchmark.results import ResultFile, results_path, write_results
    from benchmark.tasks.xcm import GROUPINGS, SIM_COLUMNS
    from core import datatables, files

    base = base_run(work)
    lang = {c.code: c.language for c in datatables.countries()}
    for task in TASKS:
        raw = json.loads((base / f"{task}.json").read_text())
        df = pd.read_parquet(base / raw["outcomes"]["file"])
        sims = df[list(SIM_COLUMNS)].to_numpy(np.float64)
        groups = {"country": df["query_country"].to_numpy(), "concept":
                  df["query_concept"].to_numpy(),
                  "language": df["query_country"].map(lang).to_numpy()}
        assert set(groups) == set(GROUPINGS)
        for i in range(n):
            name = f"hash-{i}"
            if results_path(work / "models", name, task).is_file():
                continue
            s = sims + np.random.default_rng(i).normal(0, 0.05, sims.shape)
            scores = association_scores(s, groups, n_resamples=200, seed=0)
            out = df.assign(**{c: s[:, j] for j, c in enumerate(SIM_COLUMNS)},
                            winner=np.argmax(s, axis=1).astype(np.int8))
            side = results_path(work / "models", name, task).with_name(raw["outcomes"]["file"])
            side.parent.mkdir(parents=True, exist_ok=True)
            out.to_parquet(side, index=False)
            r = dict(raw, scores=scores, model={**raw["model"], "name": name},
                     outcomes={**raw["outcomes"], "sha256": files.sha256_file(side)})
            write_results(work / "models", ResultFile.model_validate(r))


def report(work: Path, n: int) -> dict:
    """``benchmark report`` over the first ``n`` models, in a child process."""
    from benchmark.results import model_slug

    out = Path(tempfile.mkdtemp(prefix=f"out{n}-", dir=work))
    shutil.rmtree(out)
    cmd = [sys.executable, "-m", "benchmark", "report",
           *[str(work / "models" / model_slug(f"hash-{i}")) for i in range(n)],
           "--output", str(out), "--no-authors"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"report of {n} models failed:\n{proc.stderr.read().decode()[-3000:]}")
    rss_mb = usage.ru_maxrss / 1024
    pages = len(list((out / "gallery").rglob("*.html")))
    return {"models": n, "wall_s": round(wall, 1), "peak_rss_mb": round(rss_mb),
            "s_per_model": round(wall / n, 3), "mb_per_model": round(rss_mb / n, 2),
            "gallery_pages": pages, "figures": len(list((out / "figures").glob("*.png"))),
            "report_html_mb": round((out / "report.html").stat().st_size / 1024**2, 2)}


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x {os.cpu_count()}"
    except OSError:
        pass
    return f"{platform.processor()} x {os.cpu_count()}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", dest="work", type=Path, default=Path("/tmp/xcm-bench-report"))
    p.add_argument("--models", default="100,300,1000", help="model counts, comma-separated")
    p.add_argument("--out", type=Path, help="also write the numbers here (JSON)")
    a = p.parse_args()
    counts = sorted(int(x) for x in a.models.split(","))
    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    make_models(a.work, counts[-1])
    res: dict = {"cpu": cpu(), "tasks": list(TASKS), "setup_s": round(time.perf_counter() - t0),
                 "runs": []}
    for n in counts:
        res["runs"].append(report(a.work, n))
        print(json.dumps(res["runs"][-1]), flush=True)
    first = res["runs"][0]
    res["growth_vs_smallest"] = [
        {"models": r["models"], "time": round(r["s_per_model"] / first["s_per_model"], 2),
         "memory": round(r["peak_rss_mb"] / first["peak_rss_mb"], 2),
         "models_ratio": round(r["models"] / first["models"], 2)} for r in res["runs"]]
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
