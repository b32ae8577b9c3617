"""XM3600 in the authors' layout (their datasets copy and the published miniature): read as
the official files are, and scored alike."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.data.xm3600 import load_xm3600
from core import datatables
from core.errors import DataError
from tests.benchmark.test_xm3600_task import TASK, jpeg, make_official


@pytest.fixture(scope="module")
def xm(tmp_path_factory) -> Path:
    return make_official(tmp_path_factory.mktemp("xm3600"))


def make_authors_copy(root: Path, official: Path) -> Path:
    """The official fixture in the authors' layout (one split; ``captions`` a struct of the
    36 languages), with an ``image_locale`` column since its keys are not XM3600's."""
    import datasets

    rows = [json.loads(x) for x in (official / "captions.jsonl").read_text().splitlines()]
    codes = [x.code for x in datatables.languages()]
    s = datasets.Value("string")
    features = datasets.Features({"image_key": s, "image": datasets.Image(),
                                  "captions": {c: datasets.List(s) for c in codes},
                                  "image_locale": s})
    root.mkdir(parents=True)
    datasets.Dataset.from_list([
        {"image_key": r["image/key"], "image_locale": r["image/locale"],
         "image": {"bytes": (official / "images" / f"{r['image/key']}.jpg").read_bytes(),
                   "path": None},
         "captions": {c: r[c]["caption"] for c in codes}} for r in rows
    ], features=features).to_parquet(str(root / "train-00000-of-00001.parquet"))
    return root


def official_from_authors_copy(copy: Path, out: Path) -> Path:
    """The authors' copy written in the official layout, locales from the authors' table."""
    import pyarrow.parquet as pq

    locale = {r["key"]: r["native"] for r in pd.read_csv(
        datatables.data_path("authors/xm3600-image-locales.csv"), dtype=str).to_dict("records")}
    (out / "images").mkdir(parents=True)
    lines = []
    for r in pq.read_table(next(copy.rglob("*.parquet"))).to_pylist():
        (out / "images" / f"{r['image_key']}.jpg").write_bytes(r["image"]["bytes"])
        obj = {"image/key": r["image_key"], "image/locale": locale[r["image_key"]]}
        obj.update({c: {"caption": caps} for c, caps in r["captions"].items()})
        lines.append(json.dumps(obj, ensure_ascii=False))
    (out / "captions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def test_authors_copy_layout_matches_official(xm, tmp_path):
    copy = make_authors_copy(tmp_path / "copy", xm)
    a, b = load_xm3600(xm), load_xm3600(str(copy))
    assert b.source_format == "authors" and b.notes["locale_source"] == "image_locale column"
    assert (a.image_ids, a.locales, a.captions, a.caption_language) == \
        (b.image_ids, b.locales, b.captions, b.caption_language)
    assert a.fingerprint == b.fingerprint and b.notes["dropped_captions"] == 1
    assert b.images.read("img003") == jpeg(3)


def test_published_xm3600_miniature_scores_like_official(tmp_path):
    from tests.benchmark.published import write_published_xm3600

    copy = write_published_xm3600(tmp_path / "copy", n_images=12, seed=2)
    official = official_from_authors_copy(copy, tmp_path / "official")
    a, b = load_xm3600(str(copy)), load_xm3600(official)
    assert a.source_format == "authors" and len(a.image_ids) == 12
    assert a.notes["locale_source"] == "data/authors/xm3600-image-locales.csv"
    assert a.notes["images_without_locale"] == 0 and all(a.locales)
    assert (a.captions, a.caption_language, a.locales) == (b.captions, b.caption_language,
                                                           b.locales)
    assert a.fingerprint == b.fingerprint
    scores = []
    for name, spec in (("copy", str(copy)), ("official", str(official))):
        assert main(["run", "--model", "hash", "--task", TASK, "--xm3600", spec, "--k", "1,5",
                     "--output-dir", str(tmp_path / f"results-{name}"), "--cache-dir",
                     str(tmp_path / "c"), "-q"]) == 0
        res = json.loads((tmp_path / f"results-{name}" / "hash" / f"{TASK}.json").read_text())
        scores.append((res["scores"], res["task"]["data_fingerprint"], res["task"]["n"]))
    assert scores[0] == scores[1] and scores[0][2] == 12


def test_authors_copy_errors(tmp_path):
    import datasets

    d = tmp_path / "str"
    d.mkdir()
    datasets.Dataset.from_list([{"image_key": "k", "image": {"bytes": jpeg(1), "path": None},
                                 "captions": "en: a caption"}],
                               features=datasets.Features({
                                   "image_key": datasets.Value("string"),
                                   "image": datasets.Image(),
                                   "captions": datasets.Value("string")}),
                               ).to_parquet(str(d / "train-00000-of-00001.parquet"))
    with pytest.raises(DataError, match=r"captions must be a \{language: \[captions\]\} mapping"):
        load_xm3600(str(d))
