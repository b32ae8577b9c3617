"""Benchmark: the adapters' shared batching loop vs calling the model one item at a time.

    .venv/bin/python tests/perf/bench_batching.py [--images 256] [--texts 512] [--repeats 3] [--out FILE]

Not collected by pytest (no ``test_`` prefix). Tiny random-init models built on the fly (the
ones the tests use), on the CPU with ``torch`` limited to the threads given by ``--threads``:

- ``open_clip`` tiny (embed 32, ViT 2 layers / 64 wide / patch 8 on 32 px, text 2 layers);
- ``gme`` tiny Qwen2-VL (2 layers, hidden 32) -- a decoder with a chat template and images
  of 56 px (4 image tokens).

For each: ``batched`` = ``adapter.encode_images(items)`` / ``encode_texts(items)`` with the
adapter's default batch size (the shared loop: batching, inference mode, float32 conversion);
``one-by-one`` = the same adapter called with one item per call. Reported: items/s (best of
``--repeats``), the speed-up, and the largest difference between the two outputs (the loop
must not change the vectors). The load average is printed before and after: the machine is
shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")


def best_rate(fn, n: int, repeats: int) -> tuple[float, object]:
    best, out = 0.0, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = max(best, n / dt)
    return best, out


def measure(name: str, adapter, texts: list[str], images: list, repeats: int) -> list[dict]:
    import numpy as np

    rows = []
    for modality, items, enc in (("text", texts, adapter.encode_texts), ("image", images, adapter.encode_images)):
        enc(items[:4], progress=False)  # warm-up
        rb, a = best_rate(lambda items=items, enc=enc: enc(items, progress=False), len(items), repeats)
        r1, b = best_rate(
            lambda items=items, enc=enc: np.concatenate([enc([x], batch_size=1, progress=False) for x in items]),
            len(items), repeats,
        )
        rows.append({
            "model": name, "modality": modality, "items": len(items),
            "batch_size": adapter.text_batch_size if modality == "text" else adapter.image_batch_size,
            "batched_per_s": round(rb, 1), "one_by_one_per_s": round(r1, 1),
            "speedup": round(rb / r1, 2), "max_abs_diff": float(np.abs(np.asarray(a) - np.asarray(b)).max()),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--texts", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: a shared machine)")
    p.add_argument("--models", default="open_clip,gme")
    p.add_argument("--out", default=None, help="write the rows as JSON")
    a = p.parse_args(argv)

    import torch

    torch.set_num_threads(a.threads)
    from tests.benchmark.models.tiny import TEXTS, images, tiny_openclip_dir, tiny_qwen_dir

    texts = [f"{TEXTS[i % 3]} {i}" for i in range(a.texts)]
    imgs = [images(1, size=40, seed=i)[0] for i in range(a.images)]
    print(f"load average before: {os.getloadavg()[0]:.2f}  (threads={a.threads})")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in a.models.split(","):
            if name == "open_clip":
                from benchmark.registry import load_model

                adapter = load_model(f"open_clip:local-dir:{tiny_openclip_dir(tmp / 'clip')}", device="cpu")
            elif name == "gme":
                from benchmark.models.gme import GMEModel

                adapter = GMEModel(name="gme-tiny", checkpoint=str(tiny_qwen_dir(tmp / "qwen2", version="2")),
                                   device="cpu", min_image_tokens=4, max_image_tokens=4)
            else:
                print(f"unknown model {name!r}", file=sys.stderr)
                return 2
            rows += measure(name, adapter, texts, imgs, a.repeats)
    print(f"load average after:  {os.getloadavg()[0]:.2f}")
    hdr = f"{'model':<10} {'modality':<8} {'items':>6} {'batch':>6} {'batched/s':>10} {'1-by-1/s':>10} {'speed-up':>9} {'max|diff|':>10}"
    print(hdr)
    for r in rows:
        print(f"{r['model']:<10} {r['modality']:<8} {r['items']:>6} {r['batch_size']:>6} {r['batched_per_s']:>10.1f} "
              f"{r['one_by_one_per_s']:>10.1f} {r['speedup']:>9.2f} {r['max_abs_diff']:>10.2e}")
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
