"""Benchmark: exact xm3600-i2t retrieval + all metrics vs a plain numpy matrix product.

    .venv/bin/python tests/perf/bench_retrieval.py [--repeats 2] [--full-product] [--out FILE]

Not collected by pytest (no ``test_`` prefix). Shapes default to the full XM3600 task: 3,600
image vectors against 261,375 caption vectors of dimension 768, float32, random normal
(seeded). Each measurement runs in a fresh subprocess so its peak resident memory
(``ru_maxrss``, which includes the 0.8 GB of input vectors) and CPU time are its own (CPU
seconds are steadier than wall seconds when other jobs share the cores):

- ``ours``: :func:`benchmark.retrieval.exact_topk` (cosine, top-99, chunked) and
  :func:`benchmark.tasks.xm3600.score_topk` (accuracy, NDCG x2, LBKL, DLBKL at every k,
  per-locale means, per-rank language counts) on a synthetic caption table;
- ``matmul``: the plain numpy product of the same shapes, ``Q @ D[chunk].T`` over the same
  chunks (the full 3600 x 261375 float32 result is 3.76 GB: computed chunk by chunk, each
  result dropped, so it is the pure arithmetic cost with no selection);
- ``matmul-full`` (``--full-product``): the one-shot ``Q @ D.T`` (needs ~4.6 GB).

The runs alternate (ours, matmul, ours, matmul, ...) to spread the noise of a shared machine;
the load average is printed before and after.
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

ROOT = Path(__file__).resolve().parents[2]


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # Linux: KiB


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def make_data(a: argparse.Namespace):
    import numpy as np

    rng = np.random.default_rng(a.seed)
    q = rng.standard_normal((a.n_queries, a.dim), dtype=np.float32)
    d = rng.standard_normal((a.n_docs, a.dim), dtype=np.float32)
    return q, d


def child(a: argparse.Namespace) -> dict:
    import numpy as np

    from benchmark import retrieval, tables  # imported before the clock starts
    from benchmark.data.images import ImageStore
    from benchmark.data.xm3600 import XM3600
    from benchmark.tasks.xm3600 import score_topk

    q, d = make_data(a)
    base = rss_gb()
    out: dict = {"mode": a.child, "rss_after_data_gb": base}
    t0, c0 = time.perf_counter(), cpu_s()
    if a.child == "ours":
        ks = [int(x) for x in a.k.split(",")]
        top = retrieval.exact_topk(q, d, max(ks), chunk_size=a.chunk_size, backend=a.backend,
                                   device=a.device, progress=False)
        out["retrieval_s"] = time.perf_counter() - t0
        rng = np.random.default_rng(a.seed + 1)
        codes = [x.code for x in tables.languages()]
        ids = [f"img{i}" for i in range(a.n_queries)]
        ds = XM3600(ids, [codes[i % 36] for i in range(a.n_queries)],
                    ImageStore(ids, dict.fromkeys(ids, ""), lambda k: b""), [""] * a.n_docs,
                    rng.integers(0, a.n_queries, a.n_docs),
                    [codes[i] for i in rng.integers(0, 36, a.n_docs)], "synthetic", "bench")
        t1 = time.perf_counter()
        for grouping in ("authors", "tier", "language"):
            score_topk(ds, np.arange(a.n_queries), top.indices, ks, grouping)
        out["scoring_3_groupings_s"] = time.perf_counter() - t1
        out["backend"] = retrieval.get_backend(a.backend, a.device).name
    elif a.child == "matmul":
        for s in range(0, a.n_docs, a.chunk_size):
            _ = q @ d[s : s + a.chunk_size].T
    elif a.child == "matmul-full":
        _ = q @ d.T
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = cpu_s() - c0
    out["peak_rss_gb"] = rss_gb()
    return out


def run_child(mode: str, a: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--n-queries", str(a.n_queries),
           "--n-docs", str(a.n_docs), "--dim", str(a.dim), "--k", a.k, "--chunk-size",
           str(a.chunk_size), "--backend", a.backend, "--device", a.device, "--seed", str(a.seed)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-queries", type=int, default=3600)
    p.add_argument("--n-docs", type=int, default=261375)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--k", default="1,5,10,25,50,99")
    p.add_argument("--chunk-size", type=int, default=16384)
    p.add_argument("--backend", default="auto", choices=["auto", "torch", "numpy"])
    p.add_argument("--device", default="cpu", help="retrieval device (cpu, cuda)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--full-product", action="store_true")
    p.add_argument("--out", type=Path, help="also write the measurements as JSON")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a)))
        return 0
    load0 = os.getloadavg()
    runs = []
    for _ in range(a.repeats):
        for mode in ("ours", "matmul") + (("matmul-full",) if a.full_product else ()):
            r = run_child(mode, a)
            runs.append(r)
            print(json.dumps(r))
    load1 = os.getloadavg()
    modes = sorted({r["mode"] for r in runs})
    best = {m: min(r["wall_s"] for r in runs if r["mode"] == m) for m in modes}
    cpu = {m: min(r["cpu_s"] for r in runs if r["mode"] == m) for m in modes}
    peak = {m: max(r["peak_rss_gb"] for r in runs if r["mode"] == m) for m in modes}
    summary = {"shape": [a.n_queries, a.n_docs, a.dim], "chunk_size": a.chunk_size,
               "best_wall_s": best, "best_cpu_s": cpu, "peak_rss_gb": peak,
               "ratio_ours_to_matmul": best["ours"] / best["matmul"],
               "cpu_ratio_ours_to_matmul": cpu["ours"] / cpu["matmul"],
               "loadavg_before": load0, "loadavg_after": load1, "cpus": os.cpu_count(),
               "runs": runs}
    print(f"ours {best['ours']:.1f} s wall / {cpu['ours']:.1f} s CPU (peak {peak['ours']:.2f} GB), "
          f"numpy matmul {best['matmul']:.1f} s wall / {cpu['matmul']:.1f} s CPU (peak "
          f"{peak['matmul']:.2f} GB): ratio {summary['ratio_ours_to_matmul']:.2f} wall, "
          f"{summary['cpu_ratio_ours_to_matmul']:.2f} CPU; load {load0[0]:.1f} -> {load1[0]:.1f}")
    if a.out:
        a.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
