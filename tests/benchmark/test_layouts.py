"""``open_xcm``: the one place that decides a source's layout; each layout is recognised by
its configs and columns, anything else is one DataError line."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmark.data.layouts import XCMSource, open_xcm
from core import datatables
from core.errors import DataError
from tests.benchmark.published import all_layouts

RELEASE = str(datatables.data_dir() / "synthetic-3xcm")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    hub, plain, csv, images, _ = all_layouts(tmp_path_factory.mktemp("layouts"), 12, seed=5)
    return hub, plain, csv, images


def test_each_layout_is_recognised(sources):
    hub, plain, csv, images = sources
    rel = open_xcm(XCMSource(dataset=RELEASE))
    assert (rel.source_format, len(rel.triplets)) == ("release", 192)
    pub = open_xcm(XCMSource(dataset=str(hub)))
    assert (pub.source_format, len(pub.triplets)) == ("published", 12)
    assert pub.notes["triplets_source"] == f"{hub} config benchmark"
    flat = open_xcm(XCMSource(dataset=str(plain), triplets_csv=csv))
    assert (flat.source_format, flat.notes["triplets_source"]) == ("published", str(csv))
    raw = open_xcm(XCMSource(triplets_csv=csv, images=images))
    assert (raw.source_format, len(raw.triplets)) == ("authors-csv", 12)
    # the same triplets and image bytes, whichever layout carried them
    ids = ["triplet_id", "query_image_id", "semantic_image_id", "cultural_image_id",
           "non_relevant_image_id"]
    assert pub.triplets[ids].equals(flat.triplets[ids]) and pub.triplets[ids].equals(
        raw.triplets[ids])
    assert {i: pub.images.sha256[i] for i in pub.images.ids} == {
        i: raw.images.sha256[i] for i in pub.images.ids}


@pytest.mark.parametrize("source, words", [
    (XCMSource(), "3xcm needs --dataset"),
    (XCMSource(triplets_csv="x.csv"), "--triplets-csv needs --images"),
    (XCMSource(dataset=RELEASE, triplets_csv="x.csv"), "is a release"),
    (XCMSource(dataset=RELEASE, triplets_csv="x.csv", images="d"), "not both"),
])
def test_bad_sources_are_one_line(source, words):
    with pytest.raises(DataError) as e:
        open_xcm(source)
    assert words in str(e.value) and len(str(e.value).splitlines()) == 1


def test_no_layout_names_what_it_found(tmp_path):
    d = tmp_path / "other"
    d.mkdir()
    pd.DataFrame({"a": [1], "b": ["x"]}).to_parquet(d / "train-00000.parquet")
    with pytest.raises(DataError, match="not a 3XCM layout .config 'default' with columns a, b"):
        open_xcm(XCMSource(dataset=str(d)))
