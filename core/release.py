"""The 3XCM release format (docs/release.md): its columns, ``datasets.Features``, writer and
readers, shared by ``triplets``, ``benchmark.synthetic`` and the evaluator.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from core import files
from core.build_record import check_written
from core.errors import DataError

FORMAT = "3xcm-release"
FORMAT_VERSION = 2
SPLITS = {"triplets": "test", "images": "train"}
LICENSE_FILE = "LICENSE.md"

TRIPLET_COLUMNS = [
    "triplet_id", "query_image_id", "query_concept", "query_country", "query_language",
    "query_text", "semantic_image_id", "semantic_country", "cultural_image_id",
    "cultural_concept", "non_relevant_image_id", "non_relevant_concept", "non_relevant_country",
]
# a release's provenance of each triplet's query text (triplets/sample_run.py writes them)
PROVENANCE_COLUMNS = ["query_term_source", "query_term_reviewers"]
RELEASE_TRIPLET_COLUMNS = [*TRIPLET_COLUMNS, "query_locale", *PROVENANCE_COLUMNS]
IMAGE_COLUMNS = [
    "image_id", "image", "concept", "country", "query_language", "search_query", "search_rank",
    "source_url", "page_url", "title", "tags", "sha256", "width", "height",
]
_INT_COLUMNS = {"query_term_reviewers", "search_rank", "width", "height"}


def features() -> dict[str, Any]:
    """The ``datasets.Features`` of both configs, columns exactly as docs/release.md lists them."""
    import datasets

    def one(c: str) -> Any:
        if c == "image":
            return datasets.Image()
        if c == "tags":
            return datasets.List(datasets.Value("string"))
        return datasets.Value("int32" if c in _INT_COLUMNS else "string")

    return {"triplets": datasets.Features({c: one(c) for c in RELEASE_TRIPLET_COLUMNS}),
            "images": datasets.Features({c: one(c) for c in IMAGE_COLUMNS})}


def yaml_features() -> dict[str, list[dict]]:
    """:func:`features` as the card's ``dataset_info`` lists them."""
    return {k: v._to_yaml_list() for k, v in features().items()}


def configs_yaml() -> list[dict[str, Any]]:
    """The card's ``configs``: one per config, its split and its data files."""
    return [{"config_name": name,
             "data_files": [{"split": SPLITS[name], "path": f"{name}/{SPLITS[name]}-*.parquet"}]}
            for name in ("triplets", "images")]


def card_with_configs(text: str, meta: dict[str, Any] | None = None) -> str:
    """A dataset card: YAML front matter (``meta``, else just :func:`configs_yaml`) and ``text``."""
    import yaml

    meta = meta if meta is not None else {"configs": configs_yaml()}
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    return f"---\n{front}---\n{text}"


# -- writer ---------------------------------------------------------------------------------------
def shard_path(folder: Path, config: str, i: int = 0, n: int = 1) -> Path:
    return Path(folder) / config / f"{SPLITS[config]}-{i:05d}-of-{n:05d}.parquet"


def write_shard(rows: list[dict] | pd.DataFrame, config: str, path: Path) -> dict[str, int]:
    """One parquet shard of ``config``: the format's columns in its order and with its Features,
    then any column the format does not have (as tests plant) with its inferred type; returns
    the split info (num_bytes, num_examples)."""
    import datasets

    known = features()[config]
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    order = [c for c in known if c in frame] + [c for c in frame if c not in known]
    frame = frame[order].reset_index(drop=True)
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # one bar per shard is the caller's; theirs would be noise
    try:
        ds = datasets.Dataset.from_pandas(frame, preserve_index=False)
        ds = ds.cast(datasets.Features({c: known.get(c, ds.features[c]) for c in ds.column_names}))
        with files.atomic_path(path, suffix=".parquet") as tmp:
            ds.to_parquet(str(tmp))
    finally:
        if was_enabled:
            datasets.enable_progress_bars()
    return {"num_bytes": int(ds.data.nbytes), "num_examples": len(ds)}


def write_tables(folder: Path, triplets: list[dict] | pd.DataFrame,
                 image_shards: Iterable[list[dict]], n_image_shards: int = 1) -> dict[str, dict]:
    """The parquet files of both configs; ``image_shards`` yields the rows of each ``images``
    shard (``image`` as ``{"bytes", "path"}``). Returns the split info per config."""
    info = {"triplets": write_shard(triplets, "triplets", shard_path(folder, "triplets"))}
    total = {"num_bytes": 0, "num_examples": 0}
    for i, rows in enumerate(image_shards):
        one = write_shard(rows, "images", shard_path(folder, "images", i, n_image_shards))
        total = {k: total[k] + one[k] for k in total}
    info["images"] = total
    return info


def write_metadata(folder: Path, card: str, build: dict[str, Any], licence: str) -> list[Path]:
    """The card, ``build.json`` (``format`` and ``format_version`` set here) and the licence."""
    folder = Path(folder)
    build = {**build, "format": FORMAT, "format_version": FORMAT_VERSION}
    check_written(build)
    files.atomic_write_text(folder / "README.md", card)
    files.atomic_write_text(folder / LICENSE_FILE, licence)
    files.atomic_write_text(folder / "build.json", json.dumps(
        build, indent=1, ensure_ascii=False, sort_keys=True, allow_nan=False) + "\n")
    return [folder / "README.md", folder / LICENSE_FILE, folder / "build.json"]


def release_files(folder: Path) -> list[Path]:
    """Every file a release writer wrote in ``folder`` (for the folder's marker)."""
    folder = Path(folder)
    out = sorted(p for c in SPLITS for p in (folder / c).glob("*.parquet"))
    return out + [p for p in (folder / n for n in ("README.md", LICENSE_FILE, "build.json"))
                  if p.is_file()]


# -- readers --------------------------------------------------------------------------------------
def card_configs(release: Path) -> dict[str, dict[str, list[str]]]:
    """config name -> split -> data file globs, from the card's YAML front matter."""
    import yaml

    card = Path(release) / "README.md"
    if not card.is_file():
        raise DataError(f"{release}: no README.md dataset card")
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---"):
        raise DataError(f"{card}: no YAML front matter")
    try:
        meta = yaml.safe_load(text.split("---", 2)[1]) or {}
    except yaml.YAMLError as e:
        raise DataError(f"{card}: bad YAML: {e}") from e
    out: dict[str, dict[str, list[str]]] = {}
    try:
        for cfg in meta.get("configs") or []:
            globs: dict[str, list[str]] = {}
            for df in cfg.get("data_files") or []:
                globs[df["split"]] = df["path"] if isinstance(df["path"], list) else [df["path"]]
            out[cfg["config_name"]] = globs
    except (AttributeError, KeyError, TypeError) as e:
        raise DataError(f"{card}: malformed configs ({type(e).__name__}: {e})") from e
    return out


def config_paths(release: Path, config: str) -> list[Path]:
    """The data files of ``config`` (all splits), sorted; none or no such config: DataError."""
    configs = card_configs(release)
    if config not in configs:
        raise DataError(f"{release}: the card has no config {config!r} (has {sorted(configs)})")
    paths = sorted(p for globs in configs[config].values() for g in globs
                   for p in Path(release).glob(g))
    if not paths:
        raise DataError(f"{release}: config {config!r} has no data files")
    return paths


def read_config_table(release: Path, config: str, columns: list[str] | None = None) -> pd.DataFrame:
    """All splits of one config as one frame, undecoded; of ``columns``, those the files have."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = []
    for p in config_paths(release, config):
        have = pq.read_schema(p).names
        parts.append(pq.read_table(p, columns=None if columns is None else
                                   [c for c in columns if c in have]))
    return pa.concat_tables(parts, promote_options="default").to_pandas()


def load_configs(path_or_id: str, revision: str | None = None) -> tuple[pd.DataFrame, Any]:
    """(``triplets`` as a frame, ``images`` as a ``datasets.Dataset``) of a folder or hub id."""
    from core import hub as hf

    try:
        tr = hf.load_split(path_or_id, "triplets", "test", revision).to_pandas()
    except hf.EmptySplit:  # a header and no rows: datasets will not load it
        tr = pd.DataFrame(columns=TRIPLET_COLUMNS)
    return tr, hf.load_split(path_or_id, "images", None, revision)
