"""Benchmark: exact top-k retrieval (ours) against faiss ``IndexFlatIP``, fresh process each.

    .venv/bin/python tests/perf/bench_retrieval.py [--repeats 3] [--pools 16384,65536,261375]

Not collected by pytest (no ``test_`` prefix). Shapes: 3,600 image vectors of dimension 768
against pools of 16,384, 65,536 and 261,375 (the full XM3600 task, RQ1) caption vectors,
float32, random normal (seeded), top-99 by cosine. Every measurement is a fresh subprocess; the
clock starts after the data exist and before the first import of the code measured, so each
time (wall clock, and CPU time of all its threads: steadier on a shared machine) includes that
code's imports (first call), and its peak resident memory is its own:

- ``ours``: ``from benchmark import retrieval``, then :func:`benchmark.retrieval.exact_topk` on
  the raw vectors (it normalises), ``--backend`` (auto: faiss on the CPU);
- ``ours-unit``: the same given unit rows (normalised outside the clock), as the embedding
  cache holds them;
- ``faiss``: ``import faiss``, ``normalize_L2`` in place, ``IndexFlatIP.add`` (a copy of the
  pool), ``search``; ``search_s`` is the search alone;
- ``matmul``: ``Q @ D[chunk].T`` over 16,384-row chunks, each result dropped: the arithmetic
  floor, with no selection.

The modes alternate (ours, ours-unit, faiss, matmul, ours, ...) and the best of ``--repeats``
counts. Each pool prints one line: the ratio of ours to faiss (fresh-process time) and how far
the top-k lists are apart (share of queries with the same k items; float32 rounding of two
summation orders may swap near-equal scores at the cut).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one
MODES = ("ours", "ours-unit", "faiss", "matmul")


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # Linux: KiB


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return r.ru_utime + r.ru_stime


def child(a: argparse.Namespace) -> dict:
    import numpy as np

    rng = np.random.default_rng(a.seed)
    q = rng.standard_normal((a.n_queries, a.dim), dtype=np.float32)
    d = rng.standard_normal((a.n_docs, a.dim), dtype=np.float32)
    if a.child == "ours-unit":
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        d /= np.linalg.norm(d, axis=1, keepdims=True)
    out: dict = {"mode": a.child, "rss_after_data_gb": rss_gb()}
    res = None
    t0, c0 = time.perf_counter(), cpu_s()
    if a.child in ("ours", "ours-unit"):
        from benchmark import retrieval

        top = retrieval.exact_topk(q, d, a.k, backend=a.backend, device=a.device,
                                   progress=False, threads=a.threads)
        res = top.scores, top.indices
        out["torch_imported"] = "torch" in sys.modules
    elif a.child == "faiss":
        import faiss

        faiss.omp_set_num_threads(a.threads)
        faiss.normalize_L2(q)
        faiss.normalize_L2(d)
        index = faiss.IndexFlatIP(a.dim)
        index.add(d)
        t1 = time.perf_counter()
        res = index.search(q, a.k)
        out["search_s"] = time.perf_counter() - t1
    else:
        for s in range(0, a.n_docs, 16384):
            _ = q @ d[s : s + 16384].T
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = cpu_s() - c0
    out["peak_rss_gb"] = rss_gb()
    if res is not None and a.save:
        np.savez(a.save, scores=np.asarray(res[0]), indices=np.asarray(res[1]))
    return out


def run_child(mode: str, a: argparse.Namespace, save: Path | None) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--n-queries", str(a.n_queries),
           "--n-docs", str(a.n_docs), "--dim", str(a.dim), "--k", str(a.k), "--backend",
           a.backend, "--device", a.device, "--seed", str(a.seed), "--threads", str(a.threads)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(a.threads))
    res = subprocess.run(cmd + (["--save", str(save)] if save else []), capture_output=True,
                         text=True, env=env)
    if res.returncode:
        sys.stderr.write(res.stderr)
        raise SystemExit(f"{mode} child failed (exit {res.returncode})")
    return json.loads(res.stdout.strip().splitlines()[-1])


def same_sets(ours: Path, theirs: Path) -> float:
    import numpy as np

    a, b = np.load(ours), np.load(theirs)
    return float(np.mean([set(x) == set(y) for x, y in zip(a["indices"], b["indices"],
                                                             strict=True)]))


def sweep(a: argparse.Namespace) -> dict:
    """One pool size: the modes interleaved, ``--repeats`` times; prints the ratio line."""
    load0, runs = os.getloadavg(), []
    with tempfile.TemporaryDirectory() as tmp:
        saved = {m: Path(tmp) / f"{m}.npz" for m in MODES if m != "matmul"}
        for _ in range(a.repeats):
            for mode in MODES:
                runs.append(run_child(mode, a, saved.get(mode)))
                print(json.dumps(runs[-1]), flush=True)
        agree = {m: same_sets(saved[m], saved["faiss"]) for m in ("ours", "ours-unit")}
    best = {m: min(r["wall_s"] for r in runs if r["mode"] == m) for m in MODES}
    cpu = {m: min(r["cpu_s"] for r in runs if r["mode"] == m) for m in MODES}
    peak = {m: max(r["peak_rss_gb"] for r in runs if r["mode"] == m) for m in MODES}
    search = min(r["search_s"] for r in runs if r["mode"] == "faiss")
    s = {"shape": [a.n_queries, a.n_docs, a.dim], "k": a.k, "threads": a.threads,
         "best_wall_s": best, "faiss_search_s": search, "peak_rss_gb": peak,
         "ratio_ours_to_faiss": best["ours"] / best["faiss"],
         "ratio_ours_unit_to_faiss": best["ours-unit"] / best["faiss"], "best_cpu_s": cpu,
         "cpu_ratio_ours_to_faiss": cpu["ours"] / cpu["faiss"],
         "cpu_ratio_ours_unit_to_faiss": cpu["ours-unit"] / cpu["faiss"],
         "same_sets_as_faiss": agree, "cpus": os.cpu_count(), "loadavg_before": load0,
         "loadavg_after": os.getloadavg(), "runs": runs}
    print(f"pool {a.n_docs}: ours {best['ours']:.2f} s (peak {peak['ours']:.2f} GB), unit input "
          f"{best['ours-unit']:.2f} s; faiss IndexFlatIP {best['faiss']:.2f} s (search "
          f"{search:.2f} s, peak {peak['faiss']:.2f} GB); ratio ours/faiss "
          f"{s['ratio_ours_to_faiss']:.3f}, unit {s['ratio_ours_unit_to_faiss']:.3f} (CPU time "
          f"{s['cpu_ratio_ours_to_faiss']:.3f}, unit {s['cpu_ratio_ours_unit_to_faiss']:.3f}); same "
          f"top-k sets {agree['ours']:.4f} / {agree['ours-unit']:.4f}; matmul floor "
          f"{best['matmul']:.2f} s; {a.threads} threads; load {load0[0]:.1f} -> "
          f"{s['loadavg_after'][0]:.1f}", flush=True)
    return s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-queries", type=int, default=3600)
    p.add_argument("--n-docs", type=int, default=261375, help=argparse.SUPPRESS)
    p.add_argument("--pools", default="16384,65536,261375", help="pool sizes, comma-separated")
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--k", type=int, default=99)
    p.add_argument("--backend", default="auto", choices=["auto", "torch", "faiss", "numpy"])
    p.add_argument("--device", default="cpu", help="retrieval device (cpu, cuda)")
    p.add_argument("--threads", type=int, default=None, help="default: the usable cores")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, help="also write the measurements as JSON")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.threads is None:
        a.threads = len(os.sched_getaffinity(0))
    if a.child:
        print(json.dumps(child(a)))
        return 0
    summaries = []
    for n in (int(x) for x in a.pools.split(",")):
        a.n_docs = n
        summaries.append(sweep(a))
    if a.out:
        a.out.write_text(json.dumps(summaries, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
