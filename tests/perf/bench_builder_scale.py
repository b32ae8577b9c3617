"""Benchmark: how every builder stage grows with the pool.

``python tests/perf/bench_builder_scale.py [--sizes 1536,6144,24576] [--per-cell 10]
[--root DIR] [--stages all|LIST] [--json OUT] [--fresh]``

For each size ``n`` a generated offline world (``builder_scale_world.py``: tiny PNGs made on
the fly in a ``folder:`` tree, countries 16 -> 40 and concepts scaled with ``n``) is built by
the real stages, each run in a fresh child process: ``queries`` (``--llm offline``), ``crawl``
(``--search folder:``: search, local fetch, validation, storage, byte dedup), ``image_dedup``
(phash and the embedding pass with a tiny random-init open_clip), ``tagging`` (``--llm
offline``: request building and recording), ``tag_batch_prep`` (the Batch API's inlined
requests for every group, built by the real Gemini client types; nothing sent),
``review_push`` (duplicate and tag task payloads, the task records), ``review_pull`` (a
generated export of three annotators per task: parse, store, decide, apply), ``triplets``
(``triplets sample``), ``validate`` (``triplets validate --workdir``), ``export``
(``triplets export``), ``eval_cached`` (``benchmark run --model hash --task 3xcm`` on the
release, second run: scoring from the embedding cache).

Per stage and size: wall and CPU seconds of the stage itself (``time.process_time`` of the
child, which imports its heavy libraries first; the CPU time is the one to read on a shared
machine), peak RSS of the child and its RSS before the stage, SQL statements per image (every
catalog connection traced), items/s; then growth exponents of CPU time: ``b`` of time ∝ n^b
between consecutive sizes and fitted over all sizes, and the marginal-cost exponent ``b marg``
of time = a + c·n^b over three consecutive sizes (a fixed cost, such as imports, cancels out:
the exponent of what each further image costs). The small default sizes (x4 steps) show the
marginal exponent; ``--sizes 10000,30000,100000`` the large scale.

A second run with the same ``--root`` and ``--json`` reuses the worlds (``world.json``) and
replaces the numbers of the stages it runs again; the stages then resume from the catalog the
first run left (a finished stage has little left to do): ``--fresh`` starts every size from an
empty work dir, release and caches instead. ``--table F.json`` prints a saved table. Not
collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import builder_scale_world as world  # noqa: E402

STAGES = ["queries", "crawl", "image_dedup", "tagging", "tag_batch_prep", "review_push",
          "review_pull", "triplets", "validate", "export", "eval_cached"]
HEAVY = {"image_dedup": ["torch", "open_clip", "imagehash"],
         "tag_batch_prep": ["google.genai"],
         "export": ["pyarrow.parquet", "datasets"],
         "eval_cached": ["pyarrow.parquet", "datasets", "torch"]}


# -- the stages (run in the child) -----------------------------------------------------------
def _paths(root: Path) -> dict[str, str]:
    return {k: str(root / k) for k in ("work", "world", "clip", "emb", "release", "results")}


def _eval_argv(p: dict[str, str]) -> list[str]:
    return ["run", "--model", "hash", "--task", "3xcm", "--dataset", p["release"],
            "--output-dir", p["results"], "--cache-dir", p["emb"]]


def stage_call(stage: str, p: dict[str, str]) -> int:
    """Run ``stage`` of the world at ``p`` through its own entry point."""
    w, off = ["--workdir", p["work"]], ["--llm", "offline", "--llm-rpm", "0"]
    if stage == "queries":
        from builder.queries import main
        return main([*w, "--countries", "all", *off])
    if stage == "crawl":
        from builder.crawl.stage import main
        return main([*w, "--countries", "all", "--search", f"folder:{p['world']}"])
    if stage == "image_dedup":
        from builder.image_dedup import main
        return main([*w, "--model", f"open_clip:local-dir:{p['clip']}", "--phash-distance", "4",
                     "--cosine", "0.9999", "--review-cosine", "0.9995", "--cache-dir", p["emb"]])
    if stage == "tagging":
        from builder.tagging.stage import main
        return main([*w, "--images-per-request", "8", *off])
    if stage == "tag_batch_prep":
        return world.batch_prep(p["work"])
    if stage == "review_push":
        return world.review_push(p["work"])
    if stage == "review_pull":
        return world.review_pull(p["work"])
    from triplets.cli import main as tmain
    if stage == "triplets":
        return tmain(["sample", *w, "--seed", "0"])
    if stage == "validate":
        return tmain(["validate", *w])
    if stage == "export":
        return tmain(["export", *w, "--out", p["release"]])
    if stage == "eval_cached":
        from benchmark.cli import main as bmain
        return bmain(_eval_argv(p))
    raise SystemExit(f"unknown stage {stage}")


def _vm(field: str) -> float:
    """``VmHWM`` (peak) or ``VmRSS`` (now) of this process in MB, from /proc (a fresh value
    after exec, unlike ``ru_maxrss``, which keeps the forking parent's peak on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Counter:
    """SQL statements over every catalog connection (``set_trace_callback``)."""

    n = 0

    @classmethod
    def install(cls) -> None:
        import builder.catalog as bc

        orig = bc.connect

        def traced(path: Path) -> Any:
            con = orig(path)
            con.set_trace_callback(lambda _s: setattr(cls, "n", cls.n + 1))
            return con

        bc.connect = traced


def child(stage: str, root: Path) -> None:
    """The child: import, then time the stage; the last stdout line is its JSON record."""
    import importlib
    import logging

    for mod in ["numpy", "PIL.Image", "tqdm", "builder.catalog", *HEAVY.get(stage, [])]:
        importlib.import_module(mod)
    logging.disable(logging.WARNING)
    Counter.install()
    p = _paths(root)
    if stage == "eval_cached":  # the first evaluator run embeds: not part of the timing
        from benchmark.cli import main as bmain
        bmain(_eval_argv(p))
    base = _vm("VmRSS")
    Counter.n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    rc = stage_call(stage, p)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _vm("VmHWM")
    sys.stdout.write("\n" + json.dumps({"stage": stage, "rc": rc,
                                         "wall": wall, "cpu": cpu, "rss_base_mb": base,
                                         "rss_peak_mb": peak, "sql": Counter.n}) + "\n")


# -- the parent ------------------------------------------------------------------------------
def prepare(root: Path, n: int, per_cell: int) -> dict[str, Any]:
    n_countries, n_concepts = world.shape(n, per_cell)
    concepts = [f"concept {i:04d}" for i in range(n_concepts)]
    if (root / "world.json").is_file():  # built by an earlier run: measure its stages again
        return {**json.loads((root / "world.json").read_text()), "reused": True}
    data = world.data_dir(root / "data", n_countries, concepts)
    t0 = time.perf_counter()
    import csv

    with (data / "countries.csv").open(encoding="utf-8") as f:
        codes = [r["code"] for r in csv.DictReader(f)]
    planted = world.make_world(root / "world", concepts, codes, n, per_cell)
    world.tiny_clip(root / "clip")
    info = {"countries": n_countries, "concepts": n_concepts, "planted": planted,
            "world_s": time.perf_counter() - t0}
    (root / "world.json").write_text(json.dumps(info))
    return info


def run_stage(stage: str, root: Path) -> dict[str, Any]:
    env = {**os.environ, "XCM_DATA_DIR": str(root / "data"), "PYTHONPATH": str(HERE.parents[1]),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TQDM_DISABLE": "1",
           "OMP_NUM_THREADS": "1", "XCM_CACHE_DIR": str(root / "emb")}
    proc = subprocess.run([sys.executable, __file__, "--child", stage, "--root", str(root)],
                          env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{\"stage\"")]
    if proc.returncode or not lines:
        raise SystemExit(f"stage {stage} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def marginal_exponent(sizes: list[int], times: list[float]) -> list[float]:
    """``b`` of t = a + c·n^b through each three consecutive points (NaN where the time does
    not grow): (n3^b - n2^b) / (n2^b - n1^b) = (t3 - t2) / (t2 - t1), solved by bisection."""
    out = []
    for i in range(len(sizes) - 2):
        (n1, n2, n3), (t1, t2, t3) = sizes[i:i + 3], times[i:i + 3]
        if not (t3 > t2 > t1):
            out.append(float("nan"))
            continue
        want, lo, hi = (t3 - t2) / (t2 - t1), 0.01, 4.0
        for _ in range(60):
            b = (lo + hi) / 2
            lo, hi = (b, hi) if (n3**b - n2**b) / (n2**b - n1**b) < want else (lo, b)
        out.append((lo + hi) / 2)
    return out


def exponents(sizes: list[int], times: list[float]) -> tuple[list[float], float]:
    """b between consecutive sizes and the least-squares fit over all of them."""
    x, y = np.log(sizes), np.log(np.maximum(times, 1e-6))
    steps = [float((y[i + 1] - y[i]) / (x[i + 1] - x[i])) for i in range(len(sizes) - 1)]
    fit = float(np.polyfit(x, y, 1)[0]) if len(sizes) > 1 else float("nan")
    return steps, fit


def table(results: dict[int, dict[str, Any]], stages: list[str]) -> str:
    """Seconds (wall and CPU), peak MB, SQL per image and the exponents, one row per stage.

    ``b cpu`` (CPU seconds of the child) is the one to read on a shared machine: the wall
    time there also holds the waits for the other users of the cores.
    """
    sizes = sorted(results)
    head = (["stage"] + [f"wall s@{n}" for n in sizes] + [f"cpu s@{n}" for n in sizes]
            + [f"peak MB@{n}" for n in sizes]
            + [f"sql/img@{sizes[-1]}", f"img/s@{sizes[-1]}", "b wall", "b cpu (steps)", "b cpu",
               "b marg cpu"])
    out = [" | ".join(head), " | ".join("---" for _ in head)]
    for s in stages:
        have = [n for n in sizes if s in results[n]["stages"]]  # a run stopped part-way
        rows = [results[n]["stages"][s] for n in have]
        wall, cpu = [r["wall"] for r in rows], [r["cpu"] for r in rows]
        _, fit_w = exponents(have, wall)
        steps, fit_c = exponents(have, cpu)

        def col(key: str, fmt: str, s: str = s, have: list[int] = have) -> list[str]:
            got = {n: results[n]["stages"][s][key] for n in have}
            return [format(got[n], fmt) if n in got else "-" for n in sizes]

        out.append(" | ".join([
            s, *col("wall", ".2f"), *col("cpu", ".2f"), *col("rss_peak_mb", ".0f"),
            f"{rows[-1]['sql'] / have[-1]:.2f}", f"{have[-1] / max(wall[-1], 1e-6):.0f}",
            f"{fit_w:.2f}", "/".join(f"{b:.2f}" for b in steps), f"{fit_c:.2f}",
            "/".join(f"{b:.2f}" for b in marginal_exponent(have, cpu)) or "-"]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1536,6144,24576")
    ap.add_argument("--per-cell", type=int, default=10)
    ap.add_argument("--root", default=None, help="folder of the worlds (default: a temp dir)")
    ap.add_argument("--stages", default="all")
    ap.add_argument("--json", default=None, help="write the measurements here")
    ap.add_argument("--table", default=None, help="print the table of an earlier --json file")
    ap.add_argument("--fresh", action="store_true",
                    help="start each size from an empty work dir, release and caches")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, Path(a.root))
        return 0
    if a.table:
        saved = {int(k): v for k, v in json.loads(Path(a.table).read_text()).items()}
        print(table(saved, [s for s in STAGES if s in saved[min(saved)]["stages"]]))
        return 0
    import tempfile

    stages = STAGES if a.stages == "all" else a.stages.split(",")
    base = Path(a.root or tempfile.mkdtemp(prefix="xcm-scale-"))
    results: dict[int, dict[str, Any]] = {}
    if a.json and Path(a.json).is_file():  # stages measured again replace their old numbers
        results = {int(k): v for k, v in json.loads(Path(a.json).read_text()).items()}
    for n in (int(s) for s in a.sizes.split(",")):
        root = base / f"n{n}"
        if a.fresh:
            import shutil

            for k in ("work", "emb", "release", "results"):
                shutil.rmtree(root / k, ignore_errors=True)
        info = prepare(root, n, a.per_cell)
        print(f"n={n}: {info['countries']} countries x {info['concepts']} concepts, world "
              f"{info['world_s']:.0f} s, planted {info['planted']}", flush=True)
        info["stages"] = results.get(n, {}).get("stages", {})
        for s in stages:
            info["stages"][s] = r = run_stage(s, root)
            if r["rc"]:  # a stage that did not do its work measures nothing
                raise SystemExit(f"stage {s} exited with code {r['rc']} at n={n}")
            results[n] = info
            if a.json:  # after every stage: a run stopped part-way keeps what it measured
                Path(a.json).write_text(json.dumps({str(k): v for k, v in results.items()},
                                                   indent=1))
            print(f"  {s:15s} {r['wall']:8.2f} s  cpu {r['cpu']:8.2f} s  rss {r['rss_base_mb']:6.0f}"
                  f" -> {r['rss_peak_mb']:6.0f} MB  sql {r['sql']}", flush=True)
    print(table(results, [s for s in STAGES if any(s in r["stages"] for r in results.values())]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
