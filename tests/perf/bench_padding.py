"""Benchmark: does a padded batch change an embedding beyond float rounding? Per family.

    .venv/bin/python tests/perf/bench_padding.py [--device cpu|cuda] [--dtypes float32,bfloat16,float16]
        [--families openclip,hf_clip,chinese_clip,mclip,gme,colqwen,jina] [--out FILE]

Not collected by pytest (no ``test_`` prefix). On each family's tiny random-init checkpoint
(the tests' own), texts of five lengths and images of four sizes are embedded one per call and
in one padded batch; ``batch`` is the largest difference between the two, ``rounding`` the
largest difference between this dtype's one-item embeddings and float32's. A row says
CHANGES when batch > max(rounding, 1e-5) (``tests/benchmark/models/padding.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

FAMILIES = "openclip,hf_clip,chinese_clip,mclip,gme,colqwen,jina"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtypes", default="float32,bfloat16,float16")
    p.add_argument("--families", default=FAMILIES)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--out", default=None, help="write the rows as JSON")
    a = p.parse_args(argv)

    import torch

    torch.set_num_threads(a.threads)
    from tests.benchmark.models.padding import builders, study

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        make = builders(Path(tmp), a.device)
        for fam in a.families.split(","):
            if fam not in make:
                print(f"unknown family {fam!r}; one of {FAMILIES}", file=sys.stderr)
                return 2
            rows += study(fam, make[fam], tuple(a.dtypes.split(",")))
    print(f"device {a.device}" + (f" ({torch.cuda.get_device_name()})" if a.device.startswith(
        "cuda") else ""))
    print(f"{'family':<13}{'dtype':<9}{'modality':<9}{'batch':>10}{'rounding':>10}  verdict")
    for r in rows:
        print(f"{r.family:<13}{r.dtype:<9}{r.modality:<9}{r.batch_diff:>10.2e}{r.rounding:>10.2e}"
              f"  {'CHANGES' if r.changes else 'rounding'}")
    if a.out:
        Path(a.out).write_text(json.dumps([{**vars(r), "changes": r.changes} for r in rows],
                                          indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
