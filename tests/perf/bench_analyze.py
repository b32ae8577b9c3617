"""Benchmark of ``analyze`` at the paper's scale (a plain script, not collected by pytest).

    .venv/bin/python tests/perf/bench_analyze.py [--no-umap] [--metric euclidean|cosine|both]

Synthetic vectors of dimension 768: 11,723 images over the 16 countries and 1,600 texts over
the countries' 12 languages, each group around its own centre (so silhouettes are not
trivial). Times each part of the analysis as ``analyze`` runs it: reading the vectors back
from the embedding cache, SP per country, the silhouettes, the correlations, and the two
UMAP projections with their PNG and parquet files. Prints one line per part and the total.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmark.analysis.core import analyze_arrays, correlation_figures, projections  # noqa: E402
from benchmark.analysis.silhouette import silhouette_by_label  # noqa: E402
from benchmark.cache import EmbeddingCache  # noqa: E402
from benchmark.metrics.association import association_scores  # noqa: E402
from core import datatables  # noqa: E402

N_IMAGES, N_TEXTS, DIM = 11_723, 1_600, 768


def synthetic(seed: int = 0) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    codes = [c.code for c in datatables.countries()]
    langs = list(dict.fromkeys(c.language for c in datatables.countries()))
    img_lab = [codes[i % len(codes)] for i in range(N_IMAGES)]
    txt_lab = [langs[i % len(langs)] for i in range(N_TEXTS)]
    centre_i = {c: rng.standard_normal(DIM) * 0.15 for c in codes}
    centre_t = {lg: rng.standard_normal(DIM) * 0.3 for lg in langs}
    img = np.stack([centre_i[c] for c in img_lab]) + rng.standard_normal((N_IMAGES, DIM))
    txt = np.stack([centre_t[lg] for lg in txt_lab]) + rng.standard_normal((N_TEXTS, DIM))
    return txt.astype(np.float32), txt_lab, img.astype(np.float32), img_lab


class Timer:
    """Wall and process-CPU seconds per named step (CPU time is robust to a busy machine)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float]] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        w, c = time.perf_counter(), time.process_time()
        yield
        self.rows.append((name, time.perf_counter() - w, time.process_time() - c))

    def print(self) -> None:
        width = max(len(r[0]) for r in self.rows)
        print(f"  {'part':<{width}}  {'wall s':>8}  {'cpu s':>8}")
        for name, w, c in self.rows:
            print(f"  {name:<{width}}  {w:8.2f}  {c:8.2f}")
        print(f"  {'total':<{width}}  {sum(r[1] for r in self.rows):8.2f}  "
              f"{sum(r[2] for r in self.rows):8.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--no-umap", action="store_true", help="skip the UMAP part")
    p.add_argument("--metric", choices=["euclidean", "cosine", "both"], default="euclidean")
    args = p.parse_args()
    metrics = ["euclidean", "cosine"] if args.metric == "both" else [args.metric]
    t = Timer()
    txt, txt_lab, img, img_lab = synthetic()
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(Path(tmp) / "cache")
        keys = [hashlib.sha256(f"i{i}".encode()).hexdigest() for i in range(N_IMAGES)]
        tkeys = [hashlib.sha256(f"t{i}".encode()).hexdigest() for i in range(N_TEXTS)]
        cache.put_many("img", dict(zip(keys, img, strict=True)))
        cache.put_many("txt", dict(zip(tkeys, txt, strict=True)))
        with t.step("read 13,323 cached vectors"):
            got_i, got_t = cache.get_many("img", keys), cache.get_many("txt", tkeys)
            img = np.stack([got_i[k] for k in keys])
            txt = np.stack([got_t[k] for k in tkeys])
        cache.close()
        with t.step("SP per country (bootstrap 1000)"):
            rng = np.random.default_rng(1)
            country = np.array([img_lab[i] for i in rng.integers(0, N_IMAGES, N_IMAGES)])
            lang = np.array([datatables.country(c).language for c in country])
            sims = rng.standard_normal((N_IMAGES, 3)) + [0.5, 0.2, 0.0]
            scores = association_scores(sims, {"country": country, "language": lang})
        for metric in metrics:  # the silhouettes alone, then the whole analyze_arrays below
            with t.step(f"silhouette texts ({metric})"):
                silhouette_by_label(txt, txt_lab, metric)
            with t.step(f"silhouette images ({metric})"):
                silhouette_by_label(img, img_lab, metric)
        result, parts = analyze_arrays(txt, txt_lab, img, img_lab, scores, metrics)
        with t.step("SP vs silhouette figure"):
            correlation_figures(Path(tmp) / "out", "synthetic", result, metrics)
        if not args.no_umap:
            texts = pd.DataFrame({"query_language": txt_lab,
                                  "query_text": [f"text {i}" for i in range(N_TEXTS)],
                                  "query_concept": [f"c{i % 100}" for i in range(N_TEXTS)]})
            imgs = pd.DataFrame({"image_id": [f"i{i}" for i in range(N_IMAGES)],
                                 "country": img_lab})
            with t.step("UMAP (texts + images) with plots and parquet"):
                info = projections(Path(tmp) / "out", txt, texts, img, imgs, "synthetic", 1)
    print(f"analyze benchmark: {N_IMAGES} images + {N_TEXTS} texts, dim {DIM}, "
          f"metric {args.metric}, umap {'off' if args.no_umap else 'on'}")
    t.print()
    if not args.no_umap:
        print(f"  of which UMAP fit: texts {info['text']['seconds']:.2f} s (includes numba "
              f"compilation), images {info['image']['seconds']:.2f} s (wall)")
    sil = result["silhouette"][metrics[0]]
    print(f"  (image silhouette {sil['image_by_country']['overall']:.3f}, text "
          f"{sil['text_by_language']['overall']:.3f}, r(SP, image) "
          f"{result['correlations'][metrics[0]]['image']['r']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
