"""Test data for ``reproduce``: hand-made results files and a small XM3600 (official layout)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from PIL import Image

from benchmark import registry
from benchmark.models.base import ModelSpec
from benchmark.results import ResultFile, TaskInfo, write_results
from core import datatables
from core.provenance import utcnow


def spec(model: str, real: bool = True, **kw: Any) -> ModelSpec:
    """The spec a results file of ``model`` records: its zoo checkpoint at the pinned revision
    (``real``), or the same weights from a local folder (a ``sha256:`` fingerprint)."""
    e = registry.models()[model]
    rev = e.kwargs.get("revision") or "0123456789abcdef0123456789abcdef01234567"
    return ModelSpec(name=model, family=kw.pop("family", e.extra or "x"),
                     checkpoint=kw.pop("checkpoint", e.kwargs["checkpoint"]),
                     revision=rev if real else "sha256:00000000deadbeef", **kw)


def group(n: int, sem: int, cul: int, z: tuple[float, float, float] = (0.5, -0.1, -0.4)
          ) -> dict[str, Any]:
    """One 3xcm group summary with these win counts (the rest non-relevant)."""
    non = n - sem - cul
    return {"n": n, "wins_sem": sem, "wins_cul": cul, "wins_non": non, "ties": 0,
            "M_sem": sem / n, "M_cul": cul / n, "M_non": non / n,
            "SP": cul / sem if sem else None, "SP_ci95": [None, None],
            "z_sem": z[0], "z_cul": z[1], "z_non": z[2]}


def write_result(out: Path, model_spec: ModelSpec, task: str, scores: dict[str, Any],
                 settings: dict[str, Any] | None = None, **task_extra: Any) -> Path:
    n = int((scores.get("overall") or {}).get("n") or 1)
    res = ResultFile(date=utcnow(), model=model_spec,
                     task=TaskInfo(name=task, dataset="hand-made", data_fingerprint="0" * 64,
                                   n=n, **task_extra),
                     settings=settings or {}, scores=scores)
    return write_results(out, res)


def jpeg(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (8 * i + 4, 128, 64)).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def write_official_xm3600(root: Path, n_images: int = 24) -> Path:
    """XM3600 in the official layout (captions.jsonl + images/<key>.jpg): one caption per
    language per image, so the pool holds 36 x ``n_images`` captions (>= 99 for the paper's k)."""
    codes = [x.code for x in datatables.languages()]
    (root / "images").mkdir(parents=True)
    lines = []
    for i in range(n_images):
        key = f"img{i:03d}"
        (root / "images" / f"{key}.jpg").write_bytes(jpeg(i))
        obj: dict[str, Any] = {"image/key": key, "image/locale": codes[i % len(codes)]}
        for code in codes:
            obj[code] = {"caption": [f"{key} {code}"], "caption/tokenized": []}
        lines.append(json.dumps(obj, ensure_ascii=False))
    (root / "captions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
