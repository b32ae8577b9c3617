"""Benchmark: crawl download throughput against the local image server.

``python tests/perf/bench_download.py [--n 1000] [--concurrency 32]``

Serves ``n`` distinct JPEGs of 50-200 KB from the test image server, running in a separate
process (so this process's CPU time is the crawler's alone), and runs the real crawl stage
(``--search urls:FILE``) on them: fetch, Pillow validation, content-addressed store, one
catalog transaction per URL. Prints images/s validated and stored, and CPU ms per image.
Target (issue 7): at least 100 images/s on the 2-core development machine.
Not collected by pytest (file name does not match ``test_*.py``).
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def make_jpegs(n: int, seed: int = 0) -> list[bytes]:
    """``n`` distinct noisy JPEGs between 50 and 200 KB."""
    import numpy as np

    from tests.fakes.image_server import image_bytes

    rng = np.random.default_rng(seed)
    out: list[bytes] = []
    while len(out) < n:
        w = int(rng.integers(200, 420))
        data = image_bytes("JPEG", (w, int(w * 0.75)), seed=int(rng.integers(2**31)),
                           quality=85, noise=True)
        if 50_000 <= len(data) <= 200_000:
            out.append(data)
    return out


def serve(n: int, q: mp.Queue, stop: mp.Event) -> None:
    from tests.fakes.image_server import ImageServer

    srv = ImageServer()
    for i, data in enumerate(make_jpegs(n)):
        srv.add(f"/bench/{i}.jpg", data)
    total = sum(len(srv.routes[f"/bench/{i}.jpg"].body) for i in range(n))
    srv.start()
    q.put((srv.port, total))
    stop.wait()
    srv.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--per-host", type=int, default=32)
    p.add_argument("--profile", default=None, help="write a cProfile of the crawl here")
    a = p.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    from builder.catalog import Catalog
    from builder.crawl import CrawlConfig, crawl
    from builder.download import FetchConfig

    ctx = mp.get_context("spawn")
    q, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=serve, args=(a.n, q, stop), daemon=True)
    proc.start()
    port, total_bytes = q.get(timeout=300)
    try:
        with tempfile.TemporaryDirectory(prefix="xcm-bench-dl-") as tmp:
            urls = Path(tmp) / "urls.csv"
            with urls.open("w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["concept", "country", "language", "rank", "image_url", "page_url",
                            "title"])
                for i in range(a.n):
                    w.writerow([f"c{i % 139}", "THA", "th", i // 139 + 1,
                                f"http://127.0.0.1:{port}/bench/{i}.jpg", "", ""])
            fetch = FetchConfig(concurrency=a.concurrency, per_host=a.per_host,
                                allow_hosts=frozenset({"127.0.0.1"}))
            with Catalog.open(Path(tmp) / "w") as cat:
                cpu0, t0 = time.process_time(), time.perf_counter()
                if a.profile:
                    import cProfile

                    prof = cProfile.Profile()
                    res = prof.runcall(crawl, cat, CrawlConfig(search=f"urls:{urls}", fetch=fetch))
                    prof.dump_stats(a.profile)
                else:
                    res = crawl(cat, CrawlConfig(search=f"urls:{urls}", fetch=fetch))
                wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            ok = res.counts["urls"].get("ok", 0)
    finally:
        stop.set()
        proc.join(10)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"downloaded {a.n} JPEGs ({total_bytes / a.n / 1024:.0f} KB mean, "
          f"{total_bytes / 2**20:.0f} MB) with concurrency {a.concurrency}")
    print(f"ok: {ok} / {a.n}; statuses: {res.counts['urls']}")
    print(f"wall: {wall:.2f} s -> {ok / wall:.0f} images/s validated and stored "
          f"({total_bytes / wall / 2**20:.1f} MB/s)")
    print(f"crawler CPU: {cpu:.2f} s -> {1000 * cpu / max(ok, 1):.2f} ms per image; "
          f"peak RSS {peak:.0f} MB")
    return 0 if ok == a.n else 1


if __name__ == "__main__":
    sys.exit(main())
