"""Generated miniatures of the authors' published datasets, in the layouts the hub holds.

- :func:`write_published_3xcm`: ``Chula-AI/association_bias_benchmark`` in miniature: config
  ``image_metadata`` (split ``train``: ``image``, ``image_id``, ``concept_id``, ``concept``,
  ``concept_in_native``, ``concept_country``, ``country``, ``title``) and, optionally, config
  ``benchmark`` (split ``train``: the columns of ``xcm-bench.csv``), as parquet shards and a
  ``README.md`` card whose YAML ``configs`` and ``dataset_info`` are what ``push_to_hub``
  writes. The triplets are rows of the authors' own file (``data/authors/xcm-bench.csv``),
  so the image ids, concepts and countries are theirs; ``concept_in_native`` is the
  ``native_term`` of ``data/queries.csv`` for the image's concept and country (so in the
  country's script: Thai, Arabic, Devanagari, ...).
- :func:`write_published_xm3600`: ``Tierone2025part2/crossmodal_3600`` in miniature: one split
  ``train``, rows ``image_key``, ``image``, ``captions`` = {language: [captions]} over the 36
  languages, with real XM3600 image keys (``data/authors/xm3600-image-locales.csv``).
- :func:`folder_layout`: the same 3XCM miniature as the authors' CSV + a folder of
  ``<image_id>.png`` + a query CSV of its ``concept_in_native`` terms; :func:`all_layouts`:
  one miniature in every layout (hub, plain parquet folder, folder).

Images are generated (concept as pattern, country as palette; not real data), small PNG /
JPEG bytes embedded in the parquet files. Everything is deterministic for a seed.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.synthetic import synth_image
from core import datatables

AUTHORS_CSV = "authors/xcm-bench.csv"
ROLE_PREFIXES = {  # authors' column prefix -> (concept column, country column) of that image
    "query": ("query_concept", "query_country"),
    "semantically_relevant_candidate": ("semantically_relevant_candidate_concept",
                                        "semantically_relevant_candidate_country"),
    "culturally_relevant_candidate": ("culturally_relevant_candidate_concept",
                                      "culturally_relevant_candidate_country"),
    "non_relevant_candidate": ("non_relevant_candidate_concept", "non_relevant_candidate_country"),
}


def _card(root: Path, configs: dict[str, tuple[object, str]]) -> str:
    """The card ``push_to_hub`` writes: per config its data files, features and split sizes
    (``configs``: name -> (features, folder of its ``train-*.parquet`` shards))."""
    import yaml

    def size(folder: str) -> int:
        return sum(p.stat().st_size for p in (root / folder).glob("train-*"))

    def rows(folder: str) -> int:
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(p).num_rows for p in (root / folder).glob("train-*"))

    meta = {
        "configs": [{"config_name": name, "data_files": [{"split": "train",
                                                          "path": f"{folder}/train-*"}]}
                    for name, (_, folder) in configs.items()],
        "dataset_info": [{"config_name": name, "features": feats._to_yaml_list(),
                          "splits": [{"name": "train", "num_bytes": size(folder),
                                      "num_examples": rows(folder)}],
                          "download_size": size(folder), "dataset_size": size(folder)}
                         for name, (feats, folder) in configs.items()],
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _native_terms() -> dict[tuple[str, str], str]:
    """(concept, ISO country) -> native_term of data/queries.csv (either of its formats)."""
    text = datatables.data_file("queries.csv").text
    out: dict[tuple[str, str], str] = {}
    for r in csv.DictReader(io.StringIO(text)):
        if (r.get("native_term") or "").strip():
            out.setdefault((r["concept"], r["country"]), r["native_term"])
    return out


def authors_rows(n_triplets: int, seed: int) -> pd.DataFrame:
    """``n_triplets`` rows of the authors' file (seeded choice, file order kept)."""
    raw = pd.read_csv(datatables.data_path(AUTHORS_CSV), dtype=str, keep_default_na=False)
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(raw), size=min(n_triplets, len(raw)), replace=False))
    return raw.iloc[pick].reset_index(drop=True)


def image_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per image the triplets name: the ``image_metadata`` columns."""
    terms = _native_terms()
    concepts = datatables.concepts()
    codes = [c.code for c in datatables.countries()]
    seen: dict[str, dict] = {}
    for rec in rows.to_dict("records"):
        for prefix, (ccol, kcol) in ROLE_PREFIXES.items():
            iid = rec[f"{prefix}_image_id"]
            if iid in seen:
                continue
            concept, name = rec[ccol], rec[kcol]
            code = datatables.country(name).code
            _, cidx, rank, lang = iid.rsplit("-", 3)
            variant = 2 * int(rank) + (lang == "nav")
            seen[iid] = {
                "image": {"bytes": synth_image(concepts.index(concept), codes.index(code),
                                               variant, size=32), "path": None},
                "image_id": iid, "concept_id": int(cidx), "concept": concept,
                "concept_in_native": terms.get((concept, code), concept),
                "concept_country": f"{concept} in {name}", "country": name,
                "title": f"{concept} | {name} | result {rank}",
            }
    return pd.DataFrame(list(seen.values()))


VARIANT = " (variant)"


def with_variant_terms(images: pd.DataFrame, rows: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first ``n`` triplets' query images get their own term (the pair's term +
    ``VARIANT``), and each of their pairs two more images (``extra-<id>-<j>``, no triplet
    names them) with the pair's term, so the majority term stays the pair's: as the authors'
    data, where images of one (concept, country) carry different ``concept_in_native``."""
    images = images.copy()
    extra = []
    for iid in rows["query_image_id"].head(n):
        at = images.index[images["image_id"] == iid][0]
        rec = images.loc[at].to_dict()
        for j in range(2):
            extra.append({**rec, "image_id": f"extra-{iid}-{j}"})
        images.loc[at, "concept_in_native"] = rec["concept_in_native"] + VARIANT
    return pd.concat([images, pd.DataFrame(extra)], ignore_index=True)


def write_published_3xcm(root: Path, n_triplets: int = 40, benchmark_config: bool = True,
                         seed: int = 0, own_terms: int = 0) -> Path:
    """A folder in the layout of ``Chula-AI/association_bias_benchmark`` (see the module
    docstring); ``benchmark_config=False`` leaves the ``benchmark`` config out;
    ``own_terms``: that many query images with a term of their own (:func:`with_variant_terms`)."""
    import datasets

    root = Path(root)
    rows = authors_rows(n_triplets, seed)
    images = image_table(rows)
    if own_terms:
        images = with_variant_terms(images, rows, own_terms)
    s = datasets.Value("string")
    img_features = datasets.Features({
        "image": datasets.Image(), "image_id": s, "concept_id": datasets.Value("int64"),
        "concept": s, "concept_in_native": s, "concept_country": s, "country": s, "title": s,
    })
    (root / "image_metadata").mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_pandas(images[list(img_features)], features=img_features,
                                 preserve_index=False).to_parquet(
        str(root / "image_metadata" / "train-00000-of-00001.parquet"))
    configs: dict[str, tuple[object, str]] = {"image_metadata": (img_features, "image_metadata")}
    if benchmark_config:
        bench = rows.copy()
        index_cols = [c for c in bench.columns if c.endswith("_index")]
        bench[index_cols] = bench[index_cols].astype("int64")
        bench_features = datasets.Features({
            c: datasets.Value("int64") if c in index_cols else s for c in bench.columns})
        (root / "benchmark").mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_pandas(bench, features=bench_features, preserve_index=False) \
            .to_parquet(str(root / "benchmark" / "train-00000-of-00001.parquet"))
        configs["benchmark"] = (bench_features, "benchmark")
    (root / "README.md").write_text(_card(root, configs), encoding="utf-8")
    return root


def folder_layout(published: Path, out: Path) -> tuple[Path, Path, Path]:
    """The miniature at ``published`` as the authors' CSV (its ``benchmark`` rows), a folder
    of ``<image_id>.png`` and a query CSV ``concept,country,text`` of its
    ``concept_in_native`` terms: (csv, image folder, queries csv)."""
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    meta = pq.read_table(next((published / "image_metadata").glob("*.parquet"))).to_pylist()
    (out / "images").mkdir(exist_ok=True)
    for r in meta:
        (out / "images" / f"{r['image_id']}.png").write_bytes(r["image"]["bytes"])
    bench = pq.read_table(next((published / "benchmark").glob("*.parquet"))).to_pandas()
    bench.to_csv(out / "xcm-bench.csv", index=False)
    q = pd.DataFrame([{"concept": r["concept"], "country": r["country"],
                       "text": r["concept_in_native"]} for r in meta]).drop_duplicates()
    q.to_csv(out / "queries.csv", index=False)
    return out / "xcm-bench.csv", out / "images", out / "queries.csv"


def all_layouts(root: Path, n_triplets: int, seed: int) -> tuple[Path, Path, Path, Path, Path]:
    """One miniature under ``root`` in each layout: the hub's (``root/hub``), a plain folder
    of its ``image_metadata`` parquet files without a card (``root/plain``: recognised by its
    columns) and :func:`folder_layout` (``root/folder``): (hub, plain, csv, image folder,
    queries csv)."""
    import shutil

    hub = write_published_3xcm(root / "hub", n_triplets=n_triplets, seed=seed)
    plain = root / "plain"
    plain.mkdir()
    for p in (hub / "image_metadata").glob("*.parquet"):
        shutil.copy(p, plain / p.name)
    csv_path, images, queries = folder_layout(hub, root / "folder")
    return hub, plain, csv_path, images, queries


def _jpeg(key: str) -> bytes:
    from PIL import Image

    rgb = tuple(int(key[i:i + 2], 16) for i in (0, 2, 4))
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), rgb).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def write_published_xm3600(root: Path, n_images: int = 24, seed: int = 0) -> Path:
    """A folder in the layout of ``Tierone2025part2/crossmodal_3600`` (module docstring):
    ``n_images`` real image keys, one or two captions per language per image."""
    import datasets

    root = Path(root)
    keys = list(csv.DictReader(io.StringIO(
        datatables.data_file("authors/xm3600-image-locales.csv").text)))
    rng = np.random.default_rng(seed)
    pick = sorted(rng.choice(len(keys), size=min(n_images, len(keys)), replace=False))
    codes = [lang.code for lang in datatables.languages()]
    rows = []
    for i in pick:
        key = keys[i]["key"]
        caps = {c: [f"{key} {c} caption {j}" for j in range(1 + int(rng.integers(2)))]
                for c in codes}
        rows.append({"image_key": key, "image": {"bytes": _jpeg(key), "path": None},
                     "captions": caps})
    s = datasets.Value("string")
    features = datasets.Features({"image_key": s, "image": datasets.Image(),
                                  "captions": {c: datasets.List(s) for c in codes}})
    (root / "data").mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows, features=features).to_parquet(
        str(root / "data" / "train-00000-of-00001.parquet"))
    (root / "README.md").write_text(_card(root, {"default": (features, "data")}),
                                    encoding="utf-8")
    return root
