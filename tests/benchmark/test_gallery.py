"""Galleries of ``benchmark report`` (benchmark.report.gallery) from real runs: what the data
files hold is what the outcomes files say, thumbnails are content-addressed and written once,
and what cannot be shown is a note, never a failure."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from benchmark.report.build import build_report
from benchmark.report.collect import collect
from benchmark.report.gallery import build_galleries
from benchmark.results import read_results
from tests.benchmark.fake_results import write_outcome_run
from tests.benchmark.gallery_runs import make_runs, outcomes, read_js


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gallery")
    return root, make_runs(root)


def gallery_dir(out, task):
    [sub] = [p for p in (out / "gallery").iterdir() if p.name.startswith(task + "-")
             and p.name[len(task) + 1:].isalnum()]
    return sub


def test_outcomes_carry_triplet_and_similarities(runs):
    _, res = runs
    df = outcomes(res, "planted-b", "3xcm")
    sims = df[["sim_semantic", "sim_cultural", "sim_non_relevant"]].to_numpy()
    assert (np.argmax(sims, axis=1) == df["winner"]).all()
    r = read_results(res / "planted-b" / "3xcm.json")
    o = r.scores["overall"]
    assert np.bincount(df["winner"], minlength=3).tolist() == [o["wins_sem"], o["wins_cul"],
                                                               o["wins_non"]]
    xm = outcomes(res, "planted-2.0", "xm3600-i2t")
    first = np.array([rel[0] for rel in xm["top_relevant"]], float)
    any10 = np.array([any(rel[:10]) for rel in xm["top_relevant"]], float)
    assert first.tolist() == xm["accuracy@1"].tolist()
    assert any10.tolist() == xm["accuracy@10"].tolist()
    assert all(len(c) == 10 for c in xm["top_caption"])


def test_gallery_data_is_the_outcomes(runs, tmp_path):
    _, res = runs
    out = tmp_path / "report"
    written = build_report([res], out, compare_authors=False)
    assert written["gallery"] == out / "gallery" / "index.html"
    sub = gallery_dir(out, "3xcm")
    trip = read_js(sub / "triplets.js")
    for model in ("planted-a", "planted-b"):
        df = outcomes(res, model, "3xcm").set_index("triplet_id").loc[trip["ids"]]
        m = read_js(sub / f"model-{model}.js")
        assert m["winner"] == df["winner"].tolist()
        np.testing.assert_allclose(m["sims"], df[["sim_semantic", "sim_cultural",
                                                  "sim_non_relevant"]].to_numpy(), atol=1e-6)
        assert (sub / f"{model}.html").is_file()
    df = outcomes(res, "planted-b", "3xcm").set_index("triplet_id").loc[trip["ids"]]
    assert [trip["texts"][i] for i in trip["text"]] == df["query_text"].tolist()
    assert [trip["countries"][i] for i in trip["country"]] == df["query_country"].tolist()
    # grouped by country (countries.csv order), then concept
    from core import datatables

    order = [c.code for c in datatables.countries()]
    keys = [(order.index(trip["countries"][c]), trip["concepts"][k])
            for c, k in zip(trip["country"], trip["concept"], strict=True)]
    assert keys == sorted(keys)
    assert (sub / "compare.html").is_file()
    html = (out / "report.html").read_text()
    assert "gallery/" + sub.name + "/planted-b.html" in html
    xsub = gallery_dir(out, "xm3600-i2t")
    x = read_js(xsub / "model-planted-2.0.js")
    xo = outcomes(res, "planted-2.0", "xm3600-i2t")
    assert x["captions"] == [list(c) for c in xo["top_caption"]]
    assert x["relevant"] == [list(map(bool, c)) for c in xo["top_relevant"]]
    j = x["metrics"].index("dlbkl@10")
    np.testing.assert_allclose([v[j] for v in x["values"]], xo["dlbkl@10"], atol=1e-6)


def test_thumbnails_content_addressed_and_written_once(runs, tmp_path):
    root, res = runs
    col = collect([res])
    first = build_galleries(col, tmp_path)
    from benchmark.data.layouts import XCMSource, open_xcm

    ds = open_xcm(XCMSource(dataset=str(root / "data")))
    tr = ds.triplets
    cand = set(tr[["semantic_image_id", "cultural_image_id", "non_relevant_image_id"]]
               .to_numpy().ravel()) | set(tr["query_image_id"])  # (3xcm-i2i shows queries)
    shas = {ds.images.sha256[i] for i in cand}
    thumbs = sorted((tmp_path / "gallery" / "thumbs").rglob("*.jpg"))
    assert {p.stem for p in thumbs} == shas
    assert all(p.parent.name == p.stem[:2] for p in thumbs)
    assert first.thumbs_written == len(shas)  # once, for 2 models x 2 tasks
    with Image.open(thumbs[0]) as im:
        assert im.format == "JPEG" and max(im.size) <= 160
    again = build_galleries(col, tmp_path)
    assert again.thumbs_written == 0 and again.pages == first.pages


def test_missing_images_and_old_outcomes_are_notes(runs, tmp_path):
    root, res = runs
    moved = tmp_path / "res"
    shutil.copytree(res, moved)
    for m in ("planted-a", "planted-b"):  # the recorded dataset path no longer exists
        for t in ("3xcm", "3xcm-i2i"):
            p = moved / m / f"{t}.json"
            p.write_text(p.read_text().replace(str(root / "data"), str(tmp_path / "gone")))
    write_outcome_run(tmp_path / "old", "old-model", (0.5, 0.3, 0.2), 1)  # no similarities
    out = build_galleries(collect([moved, tmp_path / "old"]), tmp_path / "g")
    assert any("no images for thumbnails" in n and "--gallery-dataset" in n for n in out.notes)
    assert any("old-model" in n and "run the task again" in n for n in out.notes)
    trip = read_js(gallery_dir(tmp_path / "g", "3xcm") / "triplets.js")
    assert set(trip["thumbs"]) == {None}
    assert not (tmp_path / "g" / "gallery" / "thumbs").exists()
    back = build_galleries(collect([moved]), tmp_path / "g2", [root / "data"])
    assert back.thumbs_written > 0 and not any("thumbnails" in n for n in back.notes)


def test_page_size_must_be_positive(runs, tmp_path):
    from benchmark.cli import main

    _, res = runs
    assert main(["report", str(res), "--output", str(tmp_path / "o"),
                 "--gallery-page-size", "0"]) == 2
