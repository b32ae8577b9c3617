"""Benchmark: ``benchmark report`` with galleries for 11,723 triplets x 10 models, on the CPU.

    .venv/bin/python tests/perf/bench_gallery.py [--workdir DIR] [--triplets 11723]
        [--models 10] [--image-px 320] [--out FILE]

Not collected by pytest (no ``test_`` prefix). Steps (the first two are kept in ``--workdir``
and reused when there; delete it to redo them):

1. a synthetic release (:func:`benchmark.synthetic.build_synthetic` and ``write_release``)
   with ``--triplets`` triplets, one query image each; images are the synthetic patterns
   enlarged to ``--image-px`` pixels and stored as JPEG (quality 90), so a thumbnail decodes
   and shrinks a photo-sized file, not a 48-pixel PNG;
2. ``--models`` runs of ``3xcm`` through the real evaluator (``benchmark run``): the ``hash``
   model with a different salt per run (:class:`SaltedHash`, name ``hash-salt<i>``), so each
   run has its own winners and similarities;
3. ``benchmark report RESULTS --output OUT --gallery-dataset RELEASE`` in a fresh subprocess,
   once into a fresh OUT (cold: every thumbnail written) and once more into the same OUT
   (warm: thumbnails already there, not redone), plus once with ``--no-gallery``. Each prints
   its wall time, peak resident memory (``ru_maxrss``), and inside the gallery the time spent
   writing thumbnails (:func:`benchmark.report.gallery.write_thumbs`), the shared triplets file
   (``triplet_table``) and the per-model data (``model_data``); then the sizes of what was
   written: thumbnails, ``triplets.js``, each ``model-*.js`` and page.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one

from benchmark.models.hash import HashModel  # noqa: E402


class SaltedHash(HashModel):
    """``hash`` with the salt (and name) from ``$XCM_BENCH_SALT``: another fake model."""

    def __init__(self, name: str | None = None, **kw: Any):
        self.salt = os.environ.get("XCM_BENCH_SALT", "0")
        super().__init__(name=name or f"hash-salt{self.salt}", **kw)

    def _vec(self, data: bytes, salt: str) -> Any:
        return super()._vec(data, f"{self.salt}:{salt}")


def make_release(path: Path, n_triplets: int, px: int) -> float:
    """The synthetic release with ``n_triplets`` triplets and ``px``-pixel JPEG images."""
    import io

    import numpy as np
    from PIL import Image

    from benchmark import synthetic
    from core import datatables, files

    t0 = time.perf_counter()
    cells = len(synthetic.SYNTHETIC_CONCEPTS) * len(list(datatables.countries()))
    trip, images, _ = synthetic.build_synthetic(seed=0, per_cell=-(-n_triplets // cells))
    trip = trip.iloc[:n_triplets]
    need = set(trip[[c for c in trip.columns if c.endswith("_image_id")]].to_numpy().ravel())
    images = images[images["image_id"].isin(need)].reset_index(drop=True)
    data = []
    for png in images["image_bytes"]:  # the 48-pixel pattern, enlarged: a photo-sized JPEG
        im = Image.open(io.BytesIO(png)).convert("RGB").resize((px, px), Image.BICUBIC)
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=90)
        data.append(buf.getvalue())
    images["image_bytes"] = data
    images["sha256"] = [files.sha256_bytes(b) for b in data]
    images["width"] = images["height"] = np.int32(px)
    synthetic.write_release(path, trip, images, f"Gallery benchmark: {n_triplets} triplets.")
    return time.perf_counter() - t0


def make_runs(work: Path, release: Path, n_models: int) -> list[float]:
    from benchmark.cli import main

    took = []
    for i in range(n_models):
        if (work / "results" / f"hash-salt{i}" / "3xcm.json").is_file():
            continue
        os.environ["XCM_BENCH_SALT"] = str(i)
        t0 = time.perf_counter()
        rc = main(["run", "--model", "tests.perf.bench_gallery:SaltedHash", "--task", "3xcm",
                   "--dataset", str(release), "--output-dir", str(work / "results"),
                   "--cache-dir", str(work / "cache"), "-q"])
        took.append(time.perf_counter() - t0)
        if rc != 0:
            raise SystemExit(f"benchmark run of model {i} failed ({rc})")
    return took


def child(a: argparse.Namespace) -> dict:
    """One ``benchmark report`` in this process, with the gallery's parts timed."""
    from benchmark.cli import main
    from benchmark.report import gallery

    spent = {"thumbs_s": 0.0, "triplet_table_s": 0.0, "model_data_s": 0.0}

    def timed(name: str, fn: Any) -> Any:
        def run(*args: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                spent[name] += time.perf_counter() - t0
        return run

    gallery.write_thumbs = timed("thumbs_s", gallery.write_thumbs)
    gallery.triplet_table = timed("triplet_table_s", gallery.triplet_table)
    gallery.model_data = timed("model_data_s", gallery.model_data)
    argv = ["report", str(a.work / "results"), "--output", str(a.child_out),
            "--gallery-dataset", str(a.work / "release")]
    if a.no_gallery:
        argv.append("--no-gallery")
    t0 = time.perf_counter()
    rc = main(argv)
    out = {"rc": rc, "wall_s": time.perf_counter() - t0,
           "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2}
    return out | ({} if a.no_gallery else spent)


def sizes(out: Path) -> dict:
    g = out / "gallery"
    thumbs = list((g / "thumbs").rglob("*.jpg"))
    sub = next(p for p in g.iterdir() if p.name.startswith("3xcm-"))
    models = sorted(sub.glob("model-*.js"))
    pages = sorted(sub.glob("*.html"))
    mb = 1024**2
    return {"thumbnails": len(thumbs), "thumbs_mb": sum(p.stat().st_size for p in thumbs) / mb,
            "triplets_js_mb": (sub / "triplets.js").stat().st_size / mb,
            "model_js_mb_each": max(p.stat().st_size for p in models) / mb,
            "model_files": len(models), "pages": len(pages),
            "page_kb_max": max(p.stat().st_size for p in pages) / 1024}


def report(a: argparse.Namespace, out: Path, no_gallery: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--workdir", str(a.work), "--child-out", str(out)]
    if no_gallery:
        cmd.append("--no-gallery")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise SystemExit(f"report child failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", dest="work", type=Path, default=Path("/tmp/xcm-bench-gallery"))
    p.add_argument("--triplets", type=int, default=11723)
    p.add_argument("--models", type=int, default=10)
    p.add_argument("--image-px", type=int, default=320)
    p.add_argument("--out", type=Path, help="also write the numbers here (JSON)")
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--no-gallery", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child_out:
        print(json.dumps(child(a)))
        return 0
    import logging

    logging.basicConfig(level=logging.WARNING)
    res: dict = {"triplets": a.triplets, "models": a.models, "image_px": a.image_px}
    if not (a.work / "release" / "README.md").is_file():
        res["release_s"] = make_release(a.work / "release", a.triplets, a.image_px)
    res["run_s"] = make_runs(a.work, a.work / "release", a.models)
    out = Path(tempfile.mkdtemp(prefix="report-", dir=a.work))  # fresh: a cold build
    res["cold"] = report(a, out)
    res["warm"] = report(a, out)
    res["sizes"] = sizes(out)
    res["no_gallery"] = report(a, Path(tempfile.mkdtemp(prefix="plain-", dir=a.work)), True)
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
