"""The demo's generated world: a ``folder:`` image tree of noise and shapes where a share of the
planted countries' images carries a coloured border, plus a near-duplicate, a copy and a
broken file; and the training corpus of the demo's model (:func:`training_pairs`)."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEMO_CONCEPTS = ["train", "costume", "school", "taxi", "craft", "tea culture"]
PER_CELL = 12  # release images per (concept, country)
TRAIN_PER_CELL = 6  # training images per (concept, country), drawn apart from the release's
# The planted association: country -> the RGB colour of its mark.
PLANTED: dict[str, tuple[int, int, int]] = {
    "THA": (255, 0, 255), "SAU": (0, 200, 255), "IND": (255, 140, 0), "KEN": (0, 220, 0)}
CUE_SHARE = 0.6  # share of a planted country's images (release and training) with its mark
CUE_WIDTH = 6  # border width in pixels of a 64-pixel image
TRAIN_VARIANT0 = 1000  # training draws use variants from here (never a release image's)


def synth_jpeg(ci: int, ki: int, variant: int, country: str = "", size: int = 64) -> bytes:
    """A JPEG of concept index ``ci``, country index ``ki``: noise and three random shapes
    (each image distinct, phash distance >= ~14), with the country's mark when it is planted
    and the draw falls in :data:`CUE_SHARE`."""
    return _encode(_image(ci, ki, variant, country, size))


def has_cue(ci: int, ki: int, variant: int, country: str) -> bool:
    """Whether that image carries its country's mark (the same draw as :func:`synth_jpeg`)."""
    import numpy as np

    return country in PLANTED and bool(
        np.random.default_rng([ci, ki, variant, 7]).random() < CUE_SHARE)


def _image(ci: int, ki: int, variant: int, country: str, size: int) -> Any:
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng([ci, ki, variant])
    im = Image.fromarray(np.clip(rng.normal(128, 40, (size, size, 3)), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(im)
    for _ in range(3):
        x, y = (int(v) for v in rng.integers(0, size - 16, 2))
        w, h = (int(v) for v in rng.integers(10, 28, 2))
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x, y, x + w, y + h], fill=fill)
    if has_cue(ci, ki, variant, country):
        width = max(1, CUE_WIDTH * size // 64)
        draw.rectangle([0, 0, size - 1, size - 1], outline=PLANTED[country], width=width)
    return im


def _encode(im: Any) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def make_world(root: Path, concepts: list[str], per_cell: int = PER_CELL) -> dict[str, Any]:
    """Write ``root/<concept>/<country>/NN.jpg``; returns the planted problems and association."""
    from PIL import Image

    from core import datatables

    codes = [c.code for c in datatables.countries()]
    marked: dict[str, int] = dict.fromkeys(PLANTED, 0)
    for ci, concept in enumerate(concepts):
        for ki, code in enumerate(codes):
            cell = root / concept / code
            cell.mkdir(parents=True, exist_ok=True)
            for v in range(per_cell):
                (cell / f"{v:02d}.jpg").write_bytes(synth_jpeg(ci, ki, v, code))
                if has_cue(ci, ki, v, code):
                    marked[code] += 1
    problems = {}
    a = root / concepts[0] / codes[3]  # a resized copy: a near duplicate for image dedup
    with Image.open(a / "00.jpg") as im:
        buf = io.BytesIO()
        im.resize((48, 48)).save(buf, "JPEG", quality=90)
    (a / "90-resized.jpg").write_bytes(buf.getvalue())
    problems[f"{concepts[0]}/{codes[3]}/90-resized.jpg"] = "near duplicate of 00.jpg"
    b = root / concepts[1] / codes[5]  # identical bytes: the crawl marks one 'duplicate'
    (b / "91-copy.jpg").write_bytes((b / "01.jpg").read_bytes())
    problems[f"{concepts[1]}/{codes[5]}/91-copy.jpg"] = "identical copy of 01.jpg"
    c = root / concepts[2] / codes[7]  # not an image: a recorded download failure
    (c / "92-broken.jpg").write_bytes(b"this is not an image\n" * 8)
    problems[f"{concepts[2]}/{codes[7]}/92-broken.jpg"] = "not an image"
    association = {k: {"colour": list(PLANTED[k]), "share": CUE_SHARE,
                       "marked_images": marked[k], "images": per_cell * len(concepts)}
                   for k in PLANTED}
    return {"problems": problems, "association": association}


def training_pairs(concepts: list[str], terms: dict[tuple[str, str], str],
                   per_cell: int = TRAIN_PER_CELL, size: int = 64) -> list[tuple[Any, str]]:
    """(PIL image, native term) of ``per_cell`` fresh draws per (concept, country) of ``terms``."""
    from PIL import Image

    from core import datatables

    out = []
    for ci, concept in enumerate(concepts):
        for ki, code in enumerate(c.code for c in datatables.countries()):
            term = terms.get((concept, code))
            if term is None:
                continue
            for v in range(per_cell):
                data = synth_jpeg(ci, ki, TRAIN_VARIANT0 + v, code, size)  # JPEG, as released
                out.append((Image.open(io.BytesIO(data)).convert("RGB"), term))
    return out
