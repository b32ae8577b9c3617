"""The release's croissant.json: read by the real ``mlcroissant`` (offline) into the rows
``datasets.load_dataset`` gives; RAI fields from build.json and DATASHEET.md; ``validate
--release`` reports its problems; the card links it."""

from __future__ import annotations

import json
import shutil

import pytest

from annotation.reviews import ReviewRow, add_reviews
from builder.catalog import Catalog
from tests.worlds import build_world
from triplets import cli
from triplets.croissant import (
    CROISSANT_FILE,
    RAI_KEYS,
    croissant_problems,
    datasheet_items,
    rai_fields,
)
from triplets.export import export_release
from triplets.sample_run import run_sample
from triplets.sampling import SampleConfig

CONCEPTS = ["train", "taxi", "craft", "food"]
DUP_REPORT = {"kind": "duplicates", "min_annotators": 3, "images_with_votes": 12,
              "decisions": {"keep": 9, "remove": 3},
              "agreement": {"n_units": 10, "n_raters": 3, "krippendorff_alpha": 0.8125,
                            "fleiss_kappa": 0.75},
              "annotators": {"ann1": {"annotations": 12}, "ann2": {"annotations": 12},
                             "ann3": {"annotations": 10}}}


def _tags(c, k, i):
    return [c, "food"] if (c != "food" and i == 1) else [c]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A release of 128 triplets over three image shards, with a recorded review pull."""
    root = tmp_path_factory.mktemp("croissant")
    wd = build_world(root / "w", CONCEPTS, per_cell=2, tag_fn=_tags)
    with Catalog.open(wd) as cat:
        items = [int(r[0]) for r in cat.query("SELECT item_id FROM items ORDER BY item_id")]
        with cat.tx() as con:
            add_reviews(con, "duplicates", None, [
                ReviewRow(1, n, ann, item, None, "keep", None, f"r{n}")
                for n, (ann, item) in enumerate([("ann1", items[0]), ("ann2", items[0]),
                                                 ("ann3", items[1])])])
        run = cat.start_run("review", {"action": "pull", "kind": "duplicates",
                                       "min_annotators": 3})
        cat.finish_run(run, "done", DUP_REPORT, "pulled")
    run_sample(wd, SampleConfig(seed=17))
    total = sum(p.stat().st_size for p in wd.images_dir.rglob("*.png"))
    return export_release(wd, root / "rel", shard_bytes=total // 3 + 1)


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


def test_mlcroissant_reads_the_rows_load_dataset_gives(release, tmp_path):
    import datasets
    import mlcroissant as mlc
    import numpy as np

    assert release.shards >= 3
    ds = mlc.Dataset(jsonld=str(release.out / CROISSANT_FILE))  # validates; raises on errors
    assert ds.metadata.ctx.issues.warnings == set()
    for config, split in (("triplets", "test"), ("images", "train")):
        want = datasets.load_dataset(str(release.out), config, split=split,
                                     cache_dir=str(tmp_path / "c"))
        got = list(ds.records(config))
        assert len(got) == len(want) == 128
        for rec, row in zip(got, want, strict=True):
            assert list(rec) == [f"{config}/{c}" for c in want.column_names]
            for col, value in row.items():
                mine = rec[f"{config}/{col}"]
                if col == "image":
                    assert (mine.size, mine.format, mine.tobytes()) == (
                        value.size, value.format, value.tobytes())
                elif col == "tags":
                    assert [_text(t) for t in mine] == value
                elif isinstance(value, int):  # cr:Int32
                    assert isinstance(mine, np.int32) and int(mine) == value, col
                else:
                    assert isinstance(mine, bytes) and mine.decode("utf-8") == value, col


def test_each_triplet_links_its_four_images(release):
    meta = json.loads((release.out / CROISSANT_FILE).read_text())
    assert meta["conformsTo"] == ["http://mlcommons.org/croissant/1.1",
                                  "http://mlcommons.org/croissant/RAI/1.0"]
    sets = {rs["@id"]: rs for rs in meta["recordSet"]}
    refs = {f["name"]: f["references"]["field"]["@id"] for f in sets["triplets"]["field"]
            if "references" in f}
    assert refs == {c: "images/image_id" for c in ("query_image_id", "semantic_image_id",
                                                    "cultural_image_id", "non_relevant_image_id")}
    assert sets["images"]["key"] == {"@id": "images/image_id"}
    image = next(f for f in sets["images"]["field"] if f["name"] == "image")
    assert image["dataType"] == "sc:ImageObject"
    assert image["source"] == {"fileSet": {"@id": "images-parquet"},
                               "extract": {"column": "image"}, "transform": {"jsonPath": "bytes"}}
    tags = next(f for f in sets["images"]["field"] if f["name"] == "tags")
    assert (tags["dataType"], tags["isArray"], tags["arrayShape"]) == ("sc:Text", True, "-1")
    assert [d["includes"] for d in meta["distribution"] if d["@type"] == "cr:FileSet"] == [
        "triplets/test-*.parquet", "images/train-*.parquet"]
    assert meta["license"][0]["url"] == "LICENSE.md"
    assert "Evaluating Perspectival Biases in Cross-Modal Retrieval" in meta["citeAs"]


def test_rai_fields_from_the_build_record_and_the_datasheet(release):
    meta = json.loads((release.out / CROISSANT_FILE).read_text())
    assert all(meta[k] for k in RAI_KEYS)
    build = json.loads((release.out / "build.json").read_text())
    assert meta["rai:dataAnnotationAnalysis"][0] == (
        "duplicates: Krippendorff's alpha 0.812, Fleiss' kappa 0.750 over 10 units rated by "
        'exactly 3 annotators; decisions {"keep": 9, "remove": 3}')
    assert meta["rai:annotatorDemographics"][0] == (
        "duplicates: 3 current annotations by 3 annotator(s) (Label Studio accounts)")
    assert meta["rai:annotationsPerItem"].startswith("duplicates: at least 3 annotator(s) per item")
    assert meta["rai:dataCollectionType"] == ["Web Scraping", "Web API", "Manual Human Curation"]
    assert meta["rai:machineAnnotationTools"] == [
        f"tagging model test-model (prompt sha256 {'0' * 64})"]
    run = next(r for r in build["stage_runs"] if r["stage"] == "triplets")
    assert (f"stage triplets (run {run['run_id']}, ended {run['ended_at']}): parameters "
            + json.dumps(run["params"], sort_keys=True, separators=(", ", ": "))
            in meta["rai:dataCollection"])
    assert "Crawl (`builder.crawl.stage`): DuckDuckGo image search" in meta["rai:dataCollection"]
    assert meta["rai:dataPreprocessingProtocol"][-1] == (
        'sampling: {"distinct_language": true, "per_image": 1, "seed": 17}')
    assert any(x.startswith("Errors and noise: Search results can be off-topic")
               for x in meta["rai:dataLimitations"])
    assert any(x.startswith("Confidential or offensive data: Images are public web search")
               for x in meta["rai:personalSensitiveInformation"])
    times = [t for r in build["stage_runs"] for t in (r["started_at"], r["ended_at"])]
    assert meta["rai:dataCollectionTimeFrame"] == [min(times), max(times)]


def test_without_review_the_analysis_says_so():
    build = {"numbers": {"reviews": {}, "tags": {"models": []}}, "stage_runs": []}
    rai = rai_fields(build, "")
    assert rai["rai:dataAnnotationAnalysis"][0].startswith("No human review in this build")
    assert rai["rai:dataCollectionType"] == ["Web Scraping", "Web API"]
    assert rai["rai:machineAnnotationTools"][0].startswith("tagging: offline stand-in")
    assert rai["rai:dataCollection"] == " build.json records no finished stage run."


def test_datasheet_items_parse_labels_and_continuations():
    text = ("# T\n\n## Uses\n\n- **Intended.** one\n  two\n- **Not intended.** three\n\n"
            "## Collection process\n\nIntro.\n\n1. **Crawl** (`builder.crawl.stage`): four\n"
            "   five\n2. **Time frame.** six\n")
    assert datasheet_items(text) == {
        "Uses": {"Intended": "one two", "Not intended": "three"},
        "Collection process": {"Crawl": "(`builder.crawl.stage`): four five", "Time frame": "six"}}


def test_the_card_links_croissant(release):
    text = (release.out / "README.md").read_text(encoding="utf-8")
    assert "[`croissant.json`](croissant.json)" in text


def test_validate_release_checks_croissant(release, tmp_path, capsys, monkeypatch):
    assert cli.main(["validate", "--release", str(release.out)]) == 0
    out = capsys.readouterr().out
    assert "croissant.json: valid (checked: mlcroissant " in out
    copy = tmp_path / "rel"
    shutil.copytree(release.out, copy)
    meta = json.loads((copy / CROISSANT_FILE).read_text())
    del meta["rai:dataBiases"]
    field = next(f for f in meta["recordSet"][1]["field"] if f["name"] == "title")
    field["source"]["extract"]["column"] = "headline"
    (copy / CROISSANT_FILE).write_text(json.dumps(meta))
    (copy / "build.json").write_text((copy / "build.json").read_text() + " ")  # sha256 changes
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)  # no mlcroissant
    problems, how = croissant_problems(copy)
    assert how == "structural"
    assert problems == [
        "rai:dataBiases missing or empty",
        "FileObject build.json: sha256 does not match the file",
        "field images/title: column 'headline' is not in images-parquet",
    ]
    monkeypatch.undo()
    assert cli.main(["validate", "--release", str(copy)]) == 1
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("croissant.json")]
    assert lines[:3] == [f"croissant.json\t{p}" for p in problems]
    assert any("mlcroissant" in ln for ln in lines[3:-1])  # its own finding of the bad column
    assert lines[-1].startswith(f"croissant.json: {len(lines) - 1} problem(s) (checked: mlcroissant")
    (copy / CROISSANT_FILE).unlink()
    # absent (an older release, or one another tool wrote): said, not a failure of the rows
    assert cli.main(["validate", "--release", str(copy)]) == 0
    assert "croissant.json: absent, not checked" in capsys.readouterr().out
