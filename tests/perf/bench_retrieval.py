"""Benchmark: exact top-k retrieval (ours) vs faiss ``IndexFlatIP`` vs a plain numpy product.

    .venv/bin/python tests/perf/bench_retrieval.py [--repeats 3] [--threads N] [--with-1m] [--out FILE]

Not collected by pytest (no ``test_`` prefix). Shapes: 3,600 image vectors of dimension 768
against pools of 16,384, 65,536 and 261,375 (the full XM3600 task, RQ1) caption vectors
(``--pools``; ``--with-1m`` adds 1,048,576 rows: ~6 GB of memory per run and minutes on two
cores, hence optional), float32, random normal (seeded), top-99 by cosine. Each pool size is
one interleaved sweep and prints its own ratio line. Each measurement runs in a fresh subprocess so its peak resident
memory (``ru_maxrss``, which includes the 0.8 GB of input vectors) and CPU time are its own;
the modes alternate (ours, faiss, matmul, ours, ...) and the best of ``--repeats`` counts:

- ``ours``: :func:`benchmark.retrieval.exact_topk` on the raw vectors (it normalises), with
  ``--threads`` workers, on ``--backend`` (auto: faiss on the CPU); ``numpy``: the same on
  the numpy backend (the fallback where faiss does not import), search only; then :func:`benchmark.tasks.xm3600.score_topk` (accuracy, NDCG x2,
  LBKL, DLBKL at every k) on a synthetic caption table, timed apart.
- ``ours-unit``: the same search given unit rows (normalised outside the clock), as the
  embedding cache holds them for models whose vectors are unit: the pool is searched in place
  in one ``faiss.knn`` call after its norms are read (search only).
- ``faiss`` (when ``faiss`` imports; ``pip install -e '.[bench]'``): ``faiss.normalize_L2``
  in place, ``IndexFlatIP.add`` (a copy of the pool), ``search``; ``omp_set_num_threads`` =
  ``--threads``. ``search_s`` is the search alone; the ratio is against it (the stricter
  comparison), the end-to-end ratio counts normalisation and add too.
- ``matmul``: ``Q @ D[chunk].T`` over 16,384-row chunks with BLAS at ``--threads``, each
  result dropped: the arithmetic floor, with no selection.

The top-k lists of ours and faiss are compared: the share of queries with the same set of
k items, and for the others the largest score gap at the k-th place (float32 rounding of two
summation orders makes near-equal scores swap at the cut), and the largest score difference.
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


def run_ours(a: argparse.Namespace, q, d, out: dict) -> tuple:
    import numpy as np

    from benchmark import retrieval

    ks = [int(x) for x in a.k.split(",")]
    t0 = time.perf_counter()
    top = retrieval.exact_topk(q, d, max(ks), chunk_size=a.chunk_size, backend=a.backend,
                               device=a.device, progress=False, threads=a.threads)
    out["search_s"] = time.perf_counter() - t0
    out["peak_rss_search_gb"] = rss_gb()
    out["backend"] = retrieval.get_backend(a.backend, a.device).name
    if not getattr(a, "score", True):
        return top.scores, top.indices
    from benchmark.data.images import ImageStore
    from benchmark.data.xm3600 import XM3600
    from benchmark.tasks.xm3600 import score_topk
    from core import datatables  # the scoring's imports come after the search's peak

    rng = np.random.default_rng(a.seed + 1)
    codes = [x.code for x in datatables.languages()]
    ids = [f"img{i}" for i in range(a.n_queries)]
    ds = XM3600(ids, [codes[i % 36] for i in range(a.n_queries)],
                ImageStore(ids, dict.fromkeys(ids, ""), lambda k: b""), [""] * a.n_docs,
                rng.integers(0, a.n_queries, a.n_docs),
                [codes[i] for i in rng.integers(0, 36, a.n_docs)], "synthetic", "bench")
    t1 = time.perf_counter()
    for grouping in ("authors", "tier", "language"):
        score_topk(ds, np.arange(a.n_queries), top.indices, ks, grouping)
    out["scoring_3_groupings_s"] = time.perf_counter() - t1
    return top.scores, top.indices


def run_faiss(a: argparse.Namespace, q, d, out: dict) -> tuple:
    import faiss

    faiss.omp_set_num_threads(a.threads)
    k = max(int(x) for x in a.k.split(","))
    t0 = time.perf_counter()
    faiss.normalize_L2(q)
    faiss.normalize_L2(d)
    index = faiss.IndexFlatIP(a.dim)
    index.add(d)
    t1 = time.perf_counter()
    scores, idx = index.search(q, k)
    out["search_s"] = time.perf_counter() - t1
    out["prep_s"] = t1 - t0
    out["peak_rss_search_gb"] = rss_gb()
    out["faiss_version"] = faiss.__version__
    return scores, idx


def run_matmul(a: argparse.Namespace, q, d, out: dict) -> None:
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    with threadpool_limits(a.threads, user_api="blas"):
        for s in range(0, a.n_docs, 16384):
            _ = q @ d[s : s + 16384].T
    out["search_s"] = time.perf_counter() - t0
    out["peak_rss_search_gb"] = rss_gb()


def child(a: argparse.Namespace) -> dict:
    import numpy as np

    from benchmark import retrieval  # noqa: F401  (imported before the clock starts)

    if a.child in ("faiss", "ours", "ours-unit"):
        import faiss  # noqa: F401  (its import, ~0.2 s, outside the clock for both)
    if a.child == "numpy":
        a.backend, a.score = "numpy", False
    q, d = make_data(a)
    if a.child == "ours-unit":  # vectors as the cache holds them: unit rows (outside the clock)
        a.score = False
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        d /= np.linalg.norm(d, axis=1, keepdims=True)
    out: dict = {"mode": a.child, "threads": a.threads, "rss_after_data_gb": rss_gb()}
    t0, c0 = time.perf_counter(), cpu_s()
    run = {"ours": run_ours, "ours-unit": run_ours, "numpy": run_ours, "faiss": run_faiss,
           "matmul": run_matmul}[a.child]
    res = run(a, q, d, out)
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = cpu_s() - c0
    out["peak_rss_gb"] = rss_gb()
    if res is not None and a.save:
        np.savez(a.save, scores=np.asarray(res[0]), indices=np.asarray(res[1]))
    return out


def run_child(mode: str, a: argparse.Namespace, save: Path | None) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--n-queries", str(a.n_queries),
           "--n-docs", str(a.n_docs), "--dim", str(a.dim), "--k", a.k, "--chunk-size",
           str(a.chunk_size), "--backend", a.backend, "--device", a.device, "--seed",
           str(a.seed), "--threads", str(a.threads)] + (["--save", str(save)] if save else [])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode:
        sys.stderr.write(res.stderr)
        raise SystemExit(f"{mode} child failed (exit {res.returncode})")
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare(ours: Path, theirs: Path) -> dict:
    """How far two top-k results are apart (see the module docstring)."""
    import numpy as np

    a, b = np.load(ours), np.load(theirs)
    same = np.array([set(x) == set(y) for x, y in zip(a["indices"], b["indices"], strict=True)])
    diff = ~same
    return {
        "same_set_share": float(same.mean()),
        "queries_differing": int(diff.sum()),
        "max_kth_score_gap_where_differing": (
            float(np.abs(a["scores"][diff, -1] - b["scores"][diff, -1]).max()) if diff.any()
            else 0.0),
        "max_abs_score_diff": float(np.abs(a["scores"] - b["scores"]).max()),
    }


def summarize(runs: list[dict], a: argparse.Namespace) -> dict:
    modes = sorted({r["mode"] for r in runs})
    best = {m: min(r["search_s"] for r in runs if r["mode"] == m) for m in modes}
    peak = {m: max(r["peak_rss_search_gb"] for r in runs if r["mode"] == m) for m in modes}
    out = {"shape": [a.n_queries, a.n_docs, a.dim], "k": a.k, "threads": a.threads,
           "best_search_s": best, "peak_rss_search_gb": peak,
           "ratio_ours_to_matmul": best["ours"] / best["matmul"]}
    if "faiss" in best:
        e2e = min(r["search_s"] + r["prep_s"] for r in runs if r["mode"] == "faiss")
        out.update(ratio_ours_to_faiss_search=best["ours"] / best["faiss"],
                   ratio_ours_unit_to_faiss_search=best["ours-unit"] / best["faiss"],
                   ratio_ours_to_faiss_end_to_end=best["ours"] / e2e,
                   peak_ratio_ours_to_faiss=peak["ours"] / peak["faiss"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-queries", type=int, default=3600)
    p.add_argument("--n-docs", type=int, default=261375, help=argparse.SUPPRESS)
    p.add_argument("--pools", default="16384,65536,261375", help="pool sizes, comma-separated")
    p.add_argument("--with-1m", action="store_true", help="also a pool of 1,048,576 rows")
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--k", default="1,5,10,25,50,99")
    p.add_argument("--chunk-size", type=int, default=16384)
    p.add_argument("--backend", default="auto", choices=["auto", "torch", "faiss", "numpy"])
    p.add_argument("--device", default="cpu", help="retrieval device (cpu, cuda)")
    p.add_argument("--threads", type=int, default=None, help="default: the usable cores")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-faiss", action="store_true", help="leave faiss out")
    p.add_argument("--out", type=Path, help="also write the measurements as JSON")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.threads is None:
        from benchmark.topk import cpu_threads

        a.threads = cpu_threads()
    if a.child:
        print(json.dumps(child(a)))
        return 0
    pools = [int(x) for x in a.pools.split(",")] + ([1048576] if a.with_1m else [])
    summaries = []
    for n in pools:
        a.n_docs = n
        summaries.append(sweep(a))
    if a.out:
        a.out.write_text(json.dumps(summaries, indent=2))
    return 0


def sweep(a: argparse.Namespace) -> dict:
    """One pool size: the modes interleaved, ``--repeats`` times; prints the ratio line."""
    modes = ["ours", "ours-unit", "numpy", "matmul"]
    if not a.no_faiss:
        try:
            import faiss  # noqa: F401

            modes.insert(1, "faiss")
        except ImportError:
            print("faiss not installed (pip install -e '.[bench]'): ours vs matmul only")
    load0, runs = os.getloadavg(), []
    with tempfile.TemporaryDirectory() as tmp:
        saved = {m: Path(tmp) / f"{m}.npz" for m in ("ours", "ours-unit", "numpy", "faiss")}
        for _ in range(a.repeats):
            for mode in modes:
                r = run_child(mode, a, saved.get(mode))
                runs.append(r)
                print(json.dumps(r), flush=True)
        summary = summarize(runs, a)
        summary["agreement_numpy"] = compare(saved["ours"], saved["numpy"])
        if "faiss" in modes:
            summary["agreement"] = compare(saved["ours"], saved["faiss"])
            summary["agreement_unit"] = compare(saved["ours-unit"], saved["faiss"])
    summary.update(loadavg_before=load0, loadavg_after=os.getloadavg(), cpus=os.cpu_count(),
                   runs=runs)
    b, pk = summary["best_search_s"], summary["peak_rss_search_gb"]
    line = (f"pool {a.n_docs}: ours {b['ours']:.2f} s ({summary['runs'][0].get('backend')}, "
            f"peak {pk['ours']:.2f} GB), numpy path {b['numpy']:.2f} s, numpy matmul "
            f"{b['matmul']:.2f} s"
            f"; {a.threads} threads")
    if "faiss" in b:
        line += (f"; faiss IndexFlatIP search {b['faiss']:.2f} s (peak {pk['faiss']:.2f} GB): "
                 f"ratio ours/faiss {summary['ratio_ours_to_faiss_search']:.3f} (search), "
                 f"{summary['ratio_ours_to_faiss_end_to_end']:.3f} (end to end), memory "
                 f"{summary['peak_ratio_ours_to_faiss']:.2f}; same top-k sets "
                 f"{summary['agreement']['same_set_share']:.4f}; unit input: ours "
                 f"{b['ours-unit']:.2f} s, ratio "
                 f"{summary['ratio_ours_unit_to_faiss_search']:.3f}, same sets "
                 f"{summary['agreement_unit']['same_set_share']:.4f}")
    print(line + f"; load {load0[0]:.1f} -> {summary['loadavg_after'][0]:.1f}", flush=True)
    return summary


if __name__ == "__main__":
    sys.exit(main())
