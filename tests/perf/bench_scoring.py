"""Benchmark: scoring the authors' 11,723 triplets from cached embeddings.

    .venv/bin/python tests/perf/bench_scoring.py

Builds stand-in images for every image id of xcm-bench.csv, runs the 3xcm task once with the
hash model (fills the embedding cache), then times (a) the whole second run (cache hits only,
no forward pass), (b) the scoring step alone (winners, SP, bootstrap CIs, z-scores, all
groupings), and (c) a per-triplet Python loop in the style of the authors' evaluator for the
win counts alone. Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmark.cli import main  # noqa: E402
from benchmark.metrics.association import association_scores  # noqa: E402
from core import datatables  # noqa: E402

CSV = datatables.data_path("authors/xcm-bench.csv")  # shipped in data/ with its source


def authors_loop(tr: pd.DataFrame, text_emb: dict, img_emb: dict) -> list[int]:
    """Per-triplet loop as in the authors' evaluator: iterrows, cosine per candidate, argmax."""
    wins = [0, 0, 0]
    for _, r in tr.iterrows():
        q = text_emb[r["query_text"]]
        s = []
        for col in ("semantic_image_id", "cultural_image_id", "non_relevant_image_id"):
            d = img_emb[r[col]]
            s.append(float(np.dot(q, d) / (np.linalg.norm(q) * np.linalg.norm(d))))
        wins[int(np.argmax(s))] += 1
    return wins


def run() -> None:
    from PIL import Image

    tmp = Path(tempfile.mkdtemp(prefix="bench-scoring-"))
    raw = pd.read_csv(CSV, dtype=str)
    ids = set()
    for p in ("query", "semantically_relevant_candidate", "culturally_relevant_candidate",
              "non_relevant_candidate"):
        ids |= set(raw[f"{p}_image_id"])
    (tmp / "img").mkdir()
    for i, iid in enumerate(sorted(ids)):
        Image.new("RGB", (4, 4), (i % 256, (i // 256) % 256, 3)).save(tmp / "img" / f"{iid}.png")
    q = tmp / "q.csv"
    pd.DataFrame([{"concept": c, "country": k.code, "text": f"{c}/{k.language}"}
                  for c in sorted(set(raw.query_concept)) for k in datatables.countries()]
                 ).to_csv(q, index=False)
    args = ["run", "--model", "hash", "--task", "3xcm", "--triplets-csv", str(CSV), "--images",
            str(tmp / "img"), "--query-source", str(q), "--output-dir", str(tmp / "r"),
            "--cache-dir", str(tmp / "c"), "-q"]
    t0 = time.perf_counter()
    main(args)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    main(args)
    second = time.perf_counter() - t0
    import json

    res = json.loads((tmp / "r" / "hash" / "3xcm.json").read_text())
    rng = np.random.default_rng(0)
    n = 11723
    sims = rng.standard_normal((n, 3))
    groups = {k: rng.integers(0, g, n).astype(str) for k, g in
              (("country", 16), ("language", 12), ("concept", 137))}
    t0 = time.perf_counter()
    association_scores(sims, groups, n_resamples=1000, seed=0)
    scoring = time.perf_counter() - t0
    from benchmark.data.xcm import load_authors_csv

    ds = load_authors_csv(CSV, tmp / "img", q)
    tr = ds.triplets
    text_emb = {t: rng.standard_normal(768) for t in set(tr.query_text)}
    img_emb = {i: rng.standard_normal(768) for i in ds.images.ids}
    loop = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        authors_loop(tr, text_emb, img_emb)
        loop = min(loop, time.perf_counter() - t0)
    from benchmark.embeddings import cosine_similarity  # noqa: F401

    texts = sorted(text_emb)
    ids = sorted(img_emb)
    T = np.stack([text_emb[t] for t in texts]).astype(np.float32)
    D = np.stack([img_emb[i] for i in ids]).astype(np.float32)
    tpos, ipos = {t: i for i, t in enumerate(texts)}, {x: i for i, x in enumerate(ids)}
    from benchmark.models.hash import HashModel

    hm = HashModel()
    qi = tr.query_text.map(tpos).to_numpy()
    di = [tr[c].map(ipos).to_numpy() for c in
          ("semantic_image_id", "cultural_image_id", "non_relevant_image_id")]
    from benchmark.metrics.association import winners

    ours_wins = ours768 = float("inf")
    for _ in range(3):  # best of 3: the first pass pays page faults for the new arrays
        t0 = time.perf_counter()
        s3 = hm.indexed_pair_similarity(T, qi, D, di)
        np.bincount(winners(s3)[0], minlength=3)
        ours_wins = min(ours_wins, time.perf_counter() - t0)
        association_scores(s3, {"country": tr.query_country.to_numpy(),
                                "language": tr.query_language.to_numpy(),
                                "concept": tr.query_concept.to_numpy()}, 1000, 0)
        ours768 = min(ours768, time.perf_counter() - t0)
    print(f"first run (embeds 11,746 images + texts): {first:.2f} s")
    print(f"second run from cache (load data + cache reads + scoring): {second:.2f} s")
    print(f"  task timings of the cached run: { {k: round(v, 3) for k, v in res['timings'].items() if k.endswith('_s')} }")
    print(f"scoring alone (11,723 triplets, overall + 16 countries + 12 languages + "
          f"137 concepts, 1000 bootstrap resamples each): {scoring * 1000:.1f} ms")
    print(f"ours at d=768 from in-memory embeddings (similarities + all scores): "
          f"{ours768 * 1000:.1f} ms")
    print(f"ours at d=768, similarities + win counts only: {ours_wins * 1000:.1f} ms")
    print(f"authors-style per-triplet loop at d=768 (iterrows + cosine + argmax, win counts "
          f"only): {loop * 1000:.1f} ms  -> speed-up {loop / ours_wins:.0f}x on the same work")
    print("for reference, the authors' notebook (rq2_eval/2_self_preference_evaluation.ipynb) logs "
          "11,724 CLIP-L/14 text-to-image triplets from cached embeddings in ~5 s (2,225 it/s) "
          "on their machine; ColQwen2.5-3B: 2:59 text-to-image, 10:44 image-to-image")


if __name__ == "__main__":
    run()
