"""The demo's generated world: a ``folder:`` image tree ``<concept>/<country>/*.jpg``.

Each concept is a stripe pattern, each country a palette, each image its own shapes; with
planted problems the stages must handle (a resized near-duplicate, an identical copy, a file
that is not an image).
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

log = logging.getLogger(__name__)

DEMO_CONCEPTS = ["train", "costume", "school", "taxi", "craft", "tea culture"]
PER_CELL = 3


def synth_jpeg(ci: int, ki: int, variant: int, size: int = 64,
               n_concepts: int = len(DEMO_CONCEPTS)) -> bytes:
    """A JPEG: stripes (angle, frequency) encode the concept, the palette the country, and
    three random shapes make each image of a cell distinct (phash distance >= ~14)."""
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng([ci, ki, variant])
    hue = (ki * 47) % 256
    base = np.array([hue, (hue * 3 + 80) % 256, 255 - hue], np.float32)
    yy, xx = np.mgrid[0:size, 0:size] / size
    ang = np.pi * ci / n_concepts
    wave = np.sin(2 * np.pi * (2 + ci) * (xx * np.cos(ang) + yy * np.sin(ang)) + rng.uniform(0, 6.3))
    img = base * (0.35 + 0.65 * (0.5 + 0.5 * wave))[..., None] + rng.normal(0, 10, (size, size, 3))
    im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(im)
    for _ in range(3):
        x, y = (int(v) for v in rng.integers(0, size - 16, 2))
        w, h = (int(v) for v in rng.integers(10, 28, 2))
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x, y, x + w, y + h], fill=fill)
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def make_world(root: Path, concepts: list[str], per_cell: int = PER_CELL) -> dict[str, str]:
    """Write ``root/<concept>/<country>/NN.jpg``; returns the planted problems (path -> what)."""
    from PIL import Image

    from benchmark import tables

    codes = [c.code for c in tables.countries()]
    for ci, concept in enumerate(concepts):
        for ki, code in enumerate(codes):
            cell = root / concept / code
            cell.mkdir(parents=True, exist_ok=True)
            for v in range(per_cell):
                (cell / f"{v:02d}.jpg").write_bytes(synth_jpeg(ci, ki, v))
    planted = {}
    a = root / concepts[0] / codes[3]  # a resized copy: a near duplicate for image dedup
    with Image.open(a / "00.jpg") as im:
        buf = io.BytesIO()
        im.resize((48, 48)).save(buf, "JPEG", quality=90)
    (a / "90-resized.jpg").write_bytes(buf.getvalue())
    planted[f"{concepts[0]}/{codes[3]}/90-resized.jpg"] = "near duplicate of 00.jpg"
    b = root / concepts[1] / codes[5]  # identical bytes: the crawl marks one 'duplicate'
    (b / "91-copy.jpg").write_bytes((b / "01.jpg").read_bytes())
    planted[f"{concepts[1]}/{codes[5]}/91-copy.jpg"] = "identical copy of 01.jpg"
    c = root / concepts[2] / codes[7]  # not an image: a recorded download failure
    (c / "92-broken.jpg").write_bytes(b"this is not an image\n" * 8)
    planted[f"{concepts[2]}/{codes[7]}/92-broken.jpg"] = "not an image"
    return planted
