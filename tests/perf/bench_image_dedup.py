"""Benchmark: image_dedup of 44,000 images from cached 768-d embeddings.

``python tests/perf/bench_image_dedup.py [--n 44000] [--concepts 139] [--dim 768]``

Builds a work dir with ``n`` downloaded items spread over ``concepts`` concepts x 16 countries
(phashes already in ``images.phash``, 768-d embeddings already in the embedding cache, with
planted near-exact copies, embedding near-duplicates and review-band pairs), then runs the
real stage in a fresh child process whose adapter refuses to encode (so every vector must come
from the cache) and reports wall seconds, CPU seconds and the child's peak RSS.
Target (issue 7): under 60 s on the 2-core development machine.
``--concepts 1`` puts every image in one concept (the blocked pairwise worst case).
Not collected by pytest (file name does not match ``test_*.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmark.models.base import Adapter, ModelSpec  # noqa: E402


class CachedOnly(Adapter):
    """A 768-d 'model' whose vectors must all come from the cache."""

    def __init__(self, dim: int = 768):
        super().__init__(ModelSpec(name=f"bench-{dim}", family="bench", checkpoint="bench",
                                   revision="1"), device="cpu", dtype="float32")

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        raise AssertionError("the benchmark expects every embedding in the cache")


def build(root: Path, n: int, n_concepts: int, dim: int, seed: int = 0) -> None:
    """Catalog rows, empty image files, phashes and cached embeddings for ``n`` items."""
    from benchmark.cache import EmbeddingCache, namespace
    from core import datatables
    from tests.worlds import open_world

    rng = np.random.default_rng(seed)
    codes = [c.code for c in datatables.countries()]
    concept = np.arange(n) % n_concepts
    shas = [hashlib.sha256(f"img{i}".encode()).hexdigest() for i in range(n)]
    hashes = rng.integers(0, 2**63, n, dtype=np.uint64)
    emb = rng.standard_normal((n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    # plant: 3% phash copies (1-3 flipped bits), 3% cosine ~0.97 copies, 2% review band ~0.92
    by_concept = [np.flatnonzero(concept == c) for c in range(n_concepts)]
    for frac, kind in ((0.03, "phash"), (0.03, "auto"), (0.02, "band")):
        for i in rng.choice(n, int(frac * n), replace=False):
            peers = by_concept[concept[i]]
            j = int(rng.choice(peers))
            if j == i:
                continue
            if kind == "phash":
                hashes[i] = hashes[j] ^ np.uint64(int(rng.integers(1, 8)))
            else:
                target = 0.97 if kind == "auto" else 0.92
                noise = rng.standard_normal(dim).astype(np.float32)
                noise -= (noise @ emb[j]) * emb[j]
                noise /= np.linalg.norm(noise)
                emb[i] = target * emb[j] + np.sqrt(1 - target**2) * noise
    with open_world(root / "w") as w:
        sid: dict[tuple[int, str], int] = {}
        for i in range(n):
            key = (int(concept[i]), codes[(i // n_concepts) % len(codes)])
            name = f"concept{key[0]}"
            if key not in sid:
                sid[key] = w.search(name, key[1], "en", name, kind="english", backend="bench")
            width = int(rng.integers(200, 1600))
            w.image(b"", width, width * 3 // 4, ext="jpg", fmt="JPEG", nbytes=100_000,
                    store=False, sha256=shas[i], phash=f"{int(hashes[i]):016x}",
                    first_seen="2026-01-01")
            w.item(sid[key], i, f"https://img/{i}.jpg", shas[i])
            path = w.wd.image_path(shas[i], "jpg")  # the stage checks that each file exists
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    cache = EmbeddingCache(root / "cache")
    ns = namespace(CachedOnly(dim), "image", "document")
    for s in range(0, n, 5000):
        cache.put_many(ns, dict(zip(shas[s:s + 5000], emb[s:s + 5000], strict=True)))
    cache.close()


def peak_rss_mb() -> int:
    """This process's peak RSS (VmHWM; ``ru_maxrss`` would carry the parent's over exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def run(root: Path, dim: int) -> dict[str, Any]:
    """The timed part (in the child process)."""
    os.environ["TQDM_DISABLE"] = "1"
    from builder.catalog import Catalog
    from builder.image_dedup import DedupConfig, image_dedup

    with Catalog.open(root / "w") as cat:
        cpu0, t0 = time.process_time(), time.perf_counter()
        out = image_dedup(cat, DedupConfig(cache_dir=str(root / "cache")), adapter=CachedOnly(dim))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": peak_rss_mb(),
            "items": out["items"], "groups": out["groups"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=44_000)
    p.add_argument("--concepts", type=int, default=139)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(run(Path(a.child), a.dim)))
        return 0
    with tempfile.TemporaryDirectory(prefix="xcm-bench-dedup-") as tmp:
        t0 = time.perf_counter()
        build(Path(tmp), a.n, a.concepts, a.dim)
        print(f"built {a.n} items / {a.concepts} concepts / {a.dim}-d cached embeddings "
              f"in {time.perf_counter() - t0:.1f} s")
        proc = subprocess.run([sys.executable, __file__, "--dim", str(a.dim), "--child", tmp],
                              capture_output=True, text=True, check=False)
        if proc.returncode:
            print(proc.stderr[-3000:])
            return 1
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"image_dedup: {res['wall_s']} s wall, {res['cpu_s']} s CPU, "
          f"peak RSS {res['peak_rss_mb']} MB (the whole child process)")
    print(f"items: {res['items']}; groups: {res['groups']}")
    return 0 if res["wall_s"] < 60 else 1


if __name__ == "__main__":
    sys.exit(main())
