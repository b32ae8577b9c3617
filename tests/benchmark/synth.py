"""Synthetic 3XCM data for tests: planted concept/culture vectors and tiny coded images.

Each image is an 8x8 PNG whose first pixel encodes (concept index, country index, variant),
so a planted adapter can recover what the image shows from its pixels alone (as a real model
would from content) and return a vector built from a concept part and a culture part.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image

from benchmark.models.base import Adapter, ModelSpec
from benchmark.synthetic import write_release
from core import datatables
from core.files import sha256_bytes
from core.vectors import l2_normalize


def coded_png(ci: int, ki: int, v: int) -> bytes:
    arr = np.full((8, 8, 3), 128, np.uint8)
    arr[0, 0] = (ci, ki, v)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def decode_code(img: Any) -> tuple[int, int, int]:
    r, g, b = np.asarray(img.convert("RGB"))[0, 0]
    return int(r), int(g), int(b)


def planted_world(n_concepts: int = 5, per_cell: int = 2, seed: int = 0):
    """(triplets, images) over all 16 countries; query_text = 'c<i>|<CODE>'."""
    countries = [c.code for c in datatables.countries()]
    lang = {c.code: c.language for c in datatables.countries()}
    concepts = [f"concept{i}" for i in range(n_concepts)]
    rows = []
    for ci, concept in enumerate(concepts):
        for ki, k in enumerate(countries):
            for v in range(per_cell):
                data = coded_png(ci, ki, v)
                rows.append({"image_id": f"{k}-{ci}-{v}", "image_bytes": data, "concept": concept,
                             "country": k, "query_language": lang[k], "search_query": "",
                             "search_rank": v + 1, "source_url": "", "page_url": "", "title": "",
                             "tags": [concept], "sha256": sha256_bytes(data), "width": 8,
                             "height": 8})
    images = pd.DataFrame(rows)
    rng = np.random.default_rng(seed)
    trip = []
    for r in images.itertuples(index=False):
        others_k = [k for k in countries if k != r.country]
        others_c = [c for c in concepts if c != r.concept]
        sk, nk = rng.choice(others_k), rng.choice(others_k)
        cc, nc = rng.choice(others_c), rng.choice(others_c)
        trip.append({
            "triplet_id": f"t{len(trip)}", "query_image_id": r.image_id,
            "query_concept": r.concept, "query_country": r.country,
            "query_language": lang[r.country], "query_text": f"{r.concept}|{r.country}",
            "semantic_image_id": f"{sk}-{concepts.index(r.concept)}-{rng.integers(per_cell)}",
            "semantic_country": str(sk),
            "cultural_image_id": f"{r.country}-{concepts.index(cc)}-{rng.integers(per_cell)}",
            "cultural_concept": str(cc),
            "non_relevant_image_id": f"{nk}-{concepts.index(nc)}-{rng.integers(per_cell)}",
            "non_relevant_concept": str(nc), "non_relevant_country": str(nk),
        })
    return pd.DataFrame(trip), images


def write_planted_release(path, **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    tr, im = planted_world(**kw)
    write_release(path, tr, im, "planted test release")
    return tr, im


class PlantedVectors:
    """Concept and culture directions; text = concept + w * culture, image = concept + culture."""

    def __init__(self, n_concepts: int = 5, dim: int = 64, seed: int = 7):
        rng = np.random.default_rng(seed)
        self.concept = rng.standard_normal((n_concepts, dim)).astype(np.float32)
        self.culture = rng.standard_normal((16, dim)).astype(np.float32)
        more = np.random.default_rng(seed + 1).standard_normal((40, dim)).astype(np.float32)
        self.concept = np.concatenate([self.concept, more])  # worlds of up to 45 concepts
        self.noise_rng_seed = seed

    def text(self, concept_idx: int, country_idx: int, w: float) -> np.ndarray:
        return self.concept[concept_idx] + w * self.culture[country_idx]

    def image(self, ci: int, ki: int, v: int) -> np.ndarray:
        noise = np.random.default_rng(1000 * ci + 10 * ki + v).standard_normal(
            self.concept.shape[1]).astype(np.float32)
        return self.concept[ci] + self.culture[ki] + 0.3 * noise


class PlantedModel(Adapter):
    """Adapter over :class:`PlantedVectors`; the culture weight comes from ``XCM_TEST_W``."""

    calls = 0

    def __init__(self, name: str = "planted", **kw: Any):
        self.w = float(os.environ.get("XCM_TEST_W", "0"))
        super().__init__(ModelSpec(name=name, family="test", checkpoint=f"planted-w{self.w}",
                                   revision="1"), device="cpu", dtype="float32")
        self.vectors = PlantedVectors()
        self.codes = [c.code for c in datatables.countries()]

    def _encode_text_batch(self, texts: list[str], role: str) -> np.ndarray:
        type(self).calls += 1
        out = []
        for t in texts:
            concept, country = t.split("|")
            out.append(self.vectors.text(int(concept.removeprefix("concept")),
                                         self.codes.index(country), self.w))
        return l2_normalize(np.stack(out))

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        type(self).calls += 1
        return l2_normalize(np.stack([self.vectors.image(*decode_code(im)) for im in images]))
