"""The one release format module: what it writes, ``datasets`` and its own reader read alike;
a format-version-1 release (``images.query_text``) is still read, with today's names."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark import synthetic
from core import datatables, release

NON_IMAGE = [c for c in release.IMAGE_COLUMNS if c != "image"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("fmt") / "rel"
    tr, im, stats = synthetic.build_synthetic(seed=3, per_cell=1, concepts=["food", "boat"])
    synthetic.write_release(out, tr, im, "round trip", build={"sampling": {"seed": 3}})
    return out, tr, im


def _by_id(frame: pd.DataFrame, key: str, cols: list[str]) -> list[dict]:
    rows = frame[cols].sort_values(key).to_dict("records")
    return [{k: list(v) if k == "tags" else v for k, v in r.items()} for r in rows]


def test_load_dataset_and_our_reader_read_the_written_rows(written, tmp_path):
    import datasets

    out, tr, im = written
    cols = release.RELEASE_TRIPLET_COLUMNS
    ours_t = release.read_config_table(out, "triplets")
    hf_t = datasets.load_dataset(str(out), "triplets", split="test",
                                 cache_dir=str(tmp_path / "c")).to_pandas()
    assert list(ours_t.columns) == list(hf_t.columns) == cols
    assert _by_id(ours_t, "triplet_id", cols) == _by_id(hf_t, "triplet_id", cols) \
        == _by_id(tr, "triplet_id", cols)
    ours_i = release.read_config_table(out, "images", NON_IMAGE)
    hf_i = datasets.load_dataset(str(out), "images", split="train",
                                 cache_dir=str(tmp_path / "c")).remove_columns("image").to_pandas()
    assert _by_id(ours_i, "image_id", NON_IMAGE) == _by_id(hf_i, "image_id", NON_IMAGE) \
        == _by_id(im, "image_id", NON_IMAGE)
    # the parquet carries the one Features (List, not Sequence; int32 counts)
    meta = json.loads(pq.read_schema(release.shard_path(out, "images")).metadata[b"huggingface"])
    assert meta["info"]["features"]["tags"] == {"feature": {"dtype": "string", "_type": "Value"},
                                                "_type": "List"}
    assert meta["info"]["features"]["search_rank"] == {"dtype": "int32", "_type": "Value"}


def test_metadata_files_and_locale(written):
    out, tr, _ = written
    build = json.loads((out / "build.json").read_text())
    assert (build["format"], build["format_version"]) == ("3xcm-release", 2)
    assert build["sampling"] == {"seed": 3}
    assert (out / release.LICENSE_FILE).read_text().startswith("# Licence")
    assert release.card_configs(out) == {"triplets": {"test": ["triplets/test-*.parquet"]},
                                         "images": {"train": ["images/train-*.parquet"]}}
    locale = {c.code: c.locale for c in datatables.countries()}
    got = release.read_config_table(out, "triplets")
    assert got["query_locale"].tolist() == got["query_country"].map(locale).tolist()
