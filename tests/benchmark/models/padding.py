"""Does a padded batch change an embedding beyond float rounding? Per family, on tiny models.

For each family's tiny checkpoint and dtype, texts of different lengths (and, for the Qwen-VL
families, images of different sizes, hence different numbers of image tokens) are embedded
twice: one item per call, and all in one padded batch. ``batch_diff`` is the largest absolute
difference between the two (per token for multi-vector models). What float rounding alone
gives is measured too: ``rounding`` is the largest difference between the one-item embeddings
in this dtype and in float32 (0 for float32 itself). The batch *changes* an embedding when
``batch_diff`` exceeds ``max(rounding, FP32_TOL)``: padding then reaches the vector
(positions, attention or pooling), not just the arithmetic's order.

Used by ``tests/perf/bench_padding.py`` (the table for every family and dtype) and by
``tests/benchmark/models/test_padding.py`` (the families in float32, and the authors
profile's one-item batches).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmark.models.tiny import (
    images,
    tiny_chinese_clip_dir,
    tiny_colqwen_dir,
    tiny_hf_clip_dir,
    tiny_jina_v4_dir,
    tiny_mclip_dir,
    tiny_openclip_dir,
    tiny_qwen_dir,
)

FP32_TOL = 1e-5  # float32 rounding of a unit vector after a reordered reduction
TEXTS = ["a", "a red bicycle leaning on a wall", "ein sehr langer Satz über ein Fahrrad, "
         "das an einer roten Wand in der Sonne steht", "自転車", "bici"]


@dataclass(frozen=True)
class Row:
    family: str
    dtype: str
    modality: str
    batch_diff: float
    rounding: float

    @property
    def changes(self) -> bool:
        return self.batch_diff > max(self.rounding, FP32_TOL)


def _items(emb: Any) -> list[np.ndarray]:
    if isinstance(emb, list):
        return [np.asarray(x, np.float64) for x in emb]
    if hasattr(emb, "to_list"):
        return [np.asarray(x, np.float64) for x in emb.to_list()]
    return [np.asarray(x, np.float64) for x in np.asarray(emb)]


def _diff(a: Any, b: Any) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(_items(a), _items(b), strict=True))


def one_by_one(enc: Callable, items: list) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for x in items:
        out += _items(enc([x], batch_size=1, progress=False))
    return out


def builders(root: Path, device: str = "cpu") -> dict[str, Callable[[str], Any]]:
    """family -> (dtype -> adapter on that family's tiny checkpoint, on ``device``)."""
    from benchmark.models.colqwen import ColQwenModel
    from benchmark.models.gme import GMEModel
    from benchmark.models.jina import JinaV4Model
    from benchmark.models.mclip import MCLIPModel
    from benchmark.registry import load_model

    dirs: dict[str, Any] = {}

    def once(key: str, make: Callable[[], Any]) -> Any:
        if key not in dirs:
            dirs[key] = make()
        return dirs[key]

    clip = lambda: once("clip", lambda: tiny_openclip_dir(root / "clip"))  # noqa: E731
    return {
        "openclip": lambda dt: load_model(f"open_clip:local-dir:{clip()}", device=device,
                                          dtype=dt),
        "hf_clip": lambda dt: load_model(
            f"hf_clip:{once('hf', lambda: tiny_hf_clip_dir(root / 'hf'))}", device=device,
            dtype=dt),
        "chinese_clip": lambda dt: load_model(
            f"hf_clip:{once('cn', lambda: tiny_chinese_clip_dir(root / 'cn'))}", device=device,
            dtype=dt),
        "mclip": lambda dt: MCLIPModel(
            name="mclip-tiny", checkpoint=str(once("mclip", lambda: tiny_mclip_dir(
                root / "mclip"))[0]), image_model=f"local-dir:{clip()}", device=device, dtype=dt),
        "gme": lambda dt: GMEModel(
            name="gme-tiny", checkpoint=str(once("gme", lambda: tiny_qwen_dir(
                root / "gme", version="2"))), device=device, dtype=dt, min_image_tokens=4,
            max_image_tokens=16),
        "colqwen": lambda dt: ColQwenModel(
            name="colqwen-tiny", checkpoint=str(once("colqwen", lambda: tiny_colqwen_dir(
                root / "colqwen"))), device=device, dtype=dt),
        "jina": lambda dt: JinaV4Model(
            name="jina-tiny", checkpoint=str(once("jina", lambda: tiny_jina_v4_dir(
                root / "jina"))), device=device, dtype=dt),
    }


def study(family: str, make: Callable[[str], Any], dtypes: tuple[str, ...]) -> list[Row]:
    """One :class:`Row` per dtype and modality of ``family``."""
    imgs = [images(1, size=s, seed=i)[0] for i, s in enumerate((28, 40, 64, 90))]
    ref: dict[str, list[np.ndarray]] = {}
    rows = []
    for dt in ("float32", *[d for d in dtypes if d != "float32"]):
        m = make(dt)
        for modality, items, enc in (("text", TEXTS, m.encode_texts),
                                     ("image", imgs, m.encode_images)):
            single = one_by_one(enc, items)
            batched = _items(enc(items, batch_size=len(items), progress=False))
            if dt == "float32":
                ref[modality] = single
            rounding = _diff(single, ref[modality]) if dt != "float32" else 0.0
            if dt in dtypes:
                rows.append(Row(family, dt, modality, _diff(batched, single), rounding))
    return rows
