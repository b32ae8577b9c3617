"""A small synthetic 3XCM release: the evaluator's bundled default and the tests' fixture.

``python -m benchmark.synthetic --out data/synthetic-3xcm`` writes a release folder in the format of
docs/release.md (``images`` and ``triplets`` configs as parquet with embedded PNG bytes, a dataset
card with YAML ``configs``) from generated images: each concept is a shape/texture, each
country a colour palette, so that image models see both a concept and a culture signal. It is
NOT real data; it exists so that a fresh checkout can run the evaluator offline end to end.
Query texts are the ``native_term`` of the query country's row of ``data/queries.csv`` (the
concept itself where the table has no term, counted in the card). :func:`write_release`
writes any release folder (the tests' planted ones too), each file atomically.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark import files, query_table, tables
from benchmark.logs import configure_logging

log = logging.getLogger(__name__)

SYNTHETIC_CONCEPTS = ["food", "house", "festival", "dance", "market", "boat"]

CARD_TEMPLATE = """---
configs:
- config_name: triplets
  data_files:
  - split: test
    path: triplets/*.parquet
- config_name: images
  data_files:
  - split: train
    path: images/*.parquet
---
# {title}

{body}
"""


def synth_image(concept_idx: int, country_idx: int, variant: int, size: int = 48) -> bytes:
    """A PNG whose pattern encodes the concept and whose palette encodes the country."""
    from PIL import Image

    rng = np.random.default_rng(1000 * concept_idx + 31 * country_idx + variant)
    hue = (country_idx * 47) % 256
    base = np.array([hue, (hue * 3 + 80) % 256, (255 - hue)], np.float32)
    yy, xx = np.mgrid[0:size, 0:size] / size
    freq = 2 + concept_idx
    pattern = 0.5 + 0.5 * np.sin(2 * np.pi * freq * (xx if concept_idx % 2 else yy))
    img = base[None, None, :] * pattern[..., None] + rng.normal(0, 12, (size, size, 3))
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def write_release(out: Path, triplets: pd.DataFrame, images: pd.DataFrame, card: str,
                  title: str = "3XCM release") -> Path:
    """Write a release folder: ``triplets/test-*.parquet``, ``images/train-*.parquet``, card.

    ``images`` needs ``image_id``, ``image_bytes`` and the other image columns of docs/release.md;
    the image column is written in the ``datasets`` Image feature layout (bytes + path).
    """
    import datasets

    with files.atomic_path(out / "triplets" / "test-00000-of-00001.parquet",
                           suffix=".parquet") as tmp:
        datasets.Dataset.from_pandas(triplets.reset_index(drop=True), preserve_index=False) \
            .to_parquet(str(tmp))
    img = images.copy()
    img["image"] = [{"bytes": b, "path": f"{i}.png"} for i, b in
                    zip(img["image_id"], img.pop("image_bytes"), strict=True)]
    features = datasets.Features({
        "image_id": datasets.Value("string"), "image": datasets.Image(),
        "concept": datasets.Value("string"), "country": datasets.Value("string"),
        "query_language": datasets.Value("string"), "query_text": datasets.Value("string"),
        "search_rank": datasets.Value("int32"), "source_url": datasets.Value("string"),
        "page_url": datasets.Value("string"), "title": datasets.Value("string"),
        "tags": datasets.Sequence(datasets.Value("string")), "sha256": datasets.Value("string"),
        "width": datasets.Value("int32"), "height": datasets.Value("int32"),
    })
    cols = list(features)
    with files.atomic_path(out / "images" / "train-00000-of-00001.parquet",
                           suffix=".parquet") as tmp:
        datasets.Dataset.from_pandas(img[cols], features=features, preserve_index=False) \
            .to_parquet(str(tmp))
    files.atomic_write_text(out / "README.md", CARD_TEMPLATE.format(title=title, body=card))
    return out


def build_synthetic(seed: int = 0, per_cell: int = 2,
                    concepts: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(triplets, images, stats) of the synthetic release; deterministic for a seed."""
    concepts = concepts or SYNTHETIC_CONCEPTS
    countries = list(tables.countries())
    try:
        terms = {k: t.native_term for k, t in query_table.query_terms().items()}
    except tables.TableError:
        terms = {}
    rows: list[dict[str, Any]] = []
    for ci, concept in enumerate(concepts):
        for ki, c in enumerate(countries):
            for v in range(per_cell):
                data = synth_image(ci, ki, v)
                iid = f"{c.code.lower()}-{ci}-{v}"
                rows.append({
                    "image_id": iid, "image_bytes": data, "concept": concept, "country": c.code,
                    "query_language": c.language, "query_text": f"{concept} {c.name}",
                    "search_rank": v + 1, "source_url": f"synthetic://{iid}", "page_url": "",
                    "title": f"synthetic {concept} / {c.name}", "tags": [concept],
                    "sha256": files.sha256_bytes(data), "width": 48, "height": 48,
                })
    images = pd.DataFrame(rows)
    lang = {c.code: c.language for c in countries}
    rng = np.random.default_rng(seed)
    trip, missing_terms = [], 0
    by_cc = images.groupby(["concept", "country"])["image_id"].apply(list).to_dict()
    for r in images.itertuples(index=False):
        sem_c = [k for k in lang if k != r.country and lang[k] != lang[r.country]]
        cul_k = [c for c in concepts if c != r.concept]
        sk = str(rng.choice(sem_c))
        cc = str(rng.choice(cul_k))
        nk = str(rng.choice([k for k in lang if k != r.country]))
        nc = str(rng.choice(cul_k))
        term = terms.get((r.concept, r.country))
        if term is None:
            missing_terms += 1
            term = r.concept
        trip.append({
            "triplet_id": f"t{len(trip):05d}", "query_image_id": r.image_id,
            "query_concept": r.concept, "query_country": r.country,
            "query_language": lang[r.country], "query_text": term,
            "semantic_image_id": str(rng.choice(by_cc[(r.concept, sk)])), "semantic_country": sk,
            "cultural_image_id": str(rng.choice(by_cc[(cc, r.country)])), "cultural_concept": cc,
            "non_relevant_image_id": str(rng.choice(by_cc[(nc, nk)])),
            "non_relevant_concept": nc, "non_relevant_country": nk,
        })
    stats = {"images": len(images), "triplets": len(trip), "concepts": concepts,
             "countries": len(countries), "seed": seed, "query_text_fallbacks": missing_terms}
    return pd.DataFrame(trip), images, stats


#: what :func:`write_release` writes, relative to its folder
RELEASE_FILES = ("triplets/test-00000-of-00001.parquet", "images/train-00000-of-00001.parquet",
                 "README.md")
#: the kind in the marker of a folder ``--out`` wrote (see benchmark.files.claim_folder)
SYNTHETIC_KIND = "3xcm-synthetic"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.synthetic", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="release folder to write")
    p.add_argument("--seed", type=int, default=0, help="triplet sampling seed (default 0)")
    args = p.parse_args(argv)
    configure_logging()
    try:  # a folder a user names: new, empty, or one this command wrote (its marker)
        files.claim_folder(args.out, SYNTHETIC_KIND)
    except files.FolderNotOursError as e:
        log.error("--out %s", e)
        return 2
    tr, im, stats = build_synthetic(args.seed)
    body = ("Synthetic 3XCM-format sample (generated images, not real data) bundled with the "
            "toolkit so the evaluator runs offline.\n\n```json\n"
            + json.dumps(stats, indent=2, ensure_ascii=False) + "\n```\n")
    write_release(args.out, tr, im, body, title="3XCM synthetic sample")
    files.mark_folder(args.out, SYNTHETIC_KIND, [args.out / f for f in RELEASE_FILES])
    log.info("wrote %s: %d triplets, %d images", args.out, stats["triplets"], stats["images"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
