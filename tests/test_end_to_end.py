"""End to end: ``python -m pipeline.demo`` builds, releases, loads and scores 3XCM offline."""

from __future__ import annotations

import json

import pytest

from pipeline import demo
from triplets import cli as triplets_cli


@pytest.mark.slow
def test_demo_builds_loads_and_scores_the_release(tmp_path, capsys):
    w = tmp_path / "demo"
    assert demo.main(["--workdir", str(w), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    # every stage ran through its own main(argv), then the training, scoring and report
    for stage in ("concepts", "concept_dedup", "queries", "crawl", "image_dedup", "tagging",
                  "triplets", "triplets export", "train", "evaluate", "report"):
        assert f"=== [{stage}]" in out
    assert "=== [review] python -m annotation sync: skipped in the demo" in out
    n_images = len(demo.DEMO_CONCEPTS) * 16 * demo.PER_CELL
    n_trip = n_images * demo.PER_IMAGE
    assert f"load_dataset: {n_trip} triplets, {n_images} images" in out
    # every country its own query text (the first demo concept is 'train')
    assert ("query texts of 'train': USA train (en-US), GBR train (en-GB), ESP tren (es-ES), "
            "ARG tren (es-AR), PRT comboio (pt-PT), BRA trem (pt-BR)") in out
    # the planted problems were handled by the stages and reported in the release
    build = json.loads((w / "release" / "build.json").read_text())
    n = build["numbers"]
    assert n["items_by_status"] == {"duplicate": 1, "failed": 1, "kept": n_images,
                                    "near_duplicate": 1}
    assert n["downloads_by_status"]["not_an_image"] == 1
    assert n["triplets"] == n_trip and n["countries"] == 16
    control = sorted(set(demo.control()))
    assert build["sampling"] == {"seed": 3, "per_image": demo.PER_IMAGE,
                                 "distinct_language": True, "candidate_countries": control}
    assert [r["stage"] for r in build["stage_runs"]] == [
        "concepts", "concept_dedup", "queries", "crawl", "image_dedup", "tagging", "triplets"]
    assert triplets_cli.main(["validate", "--release", str(w / "release")]) == 0
    _check_result_and_verdicts(w, n_trip)
    assert "found the association where it was planted and nowhere else" in out
    report = w / "report"
    assert (report / "report.html").is_file() and (report / "gallery" / "index.html").is_file()
    # a second run resumes: the stages find their work done, the release is the same, and the
    # model is not trained again
    first = {p.name: p.read_bytes() for p in (w / "release" / "triplets").glob("*.parquet")}
    trained = (w / "models" / "demo-clip" / "open_clip_model.safetensors").read_bytes()
    assert demo.main(["--workdir", str(w), "--seed", "3"]) == 0
    after = {p.name: p.read_bytes() for p in (w / "release" / "triplets").glob("*.parquet")}
    assert after == first
    assert (w / "models" / "demo-clip" / "open_clip_model.safetensors").read_bytes() == trained


def _check_result_and_verdicts(w, n_trip):
    """The result's scores are those of its per-triplet outcomes; the planted countries come out
    with SP above 1 and their exact family-wise interval above 1, the others' contain 1 (all 16
    verdicts hold together at 95%, on the demo's concepts); the result's own intervals are over
    concepts, as its settings say."""
    import numpy as np
    import pandas as pd

    from pipeline import demo_story
    from pipeline.demo_world import PLANTED

    [path] = (w / "results").glob("*/3xcm.json")
    result = json.loads(path.read_text())
    assert result["task"]["n"] == n_trip
    assert result["model"]["name"].startswith("open_clip:local-dir:")
    assert result["settings"]["ci"] == "cluster" and "concepts" in result["settings"]["ci_method"]
    out_file = result["outcomes"]
    outcomes = pd.read_parquet(path.parent / out_file["file"])
    assert len(outcomes) == n_trip == out_file["rows"]
    counts = outcomes["winner"].value_counts().reindex([0, 1, 2], fill_value=0).to_numpy()
    overall = result["scores"]["overall"]
    assert [overall[k] for k in ("M_sem", "M_cul", "M_non")] == pytest.approx(
        (counts / n_trip).tolist())
    # only a cultural image can carry a mark: semantic and non-relevant come from the others
    trip = pd.concat(pd.read_parquet(p) for p in (w / "release" / "triplets").glob("*.parquet"))
    assert not set(trip["semantic_country"]) & set(PLANTED)
    assert not set(trip["non_relevant_country"]) & set(PLANTED)
    story = json.loads((w / "demo.json").read_text())
    assert "demo's 6 concepts" in story["paragraph"]
    by = result["scores"]["by_country"]
    level = 1 - demo_story.FAMILY_ALPHA / 16
    for v in story["verdicts"]:
        s = by[v["country"]]
        assert v["sp"] == s["SP"] and v["ci95"] == s["SP_ci95"] and v["n"] == s["n"] == 72
        lo, hi = demo_story.exact_sp_interval(s["wins_sem"], s["wins_cul"], level)
        assert v["ci_family"] == [lo, hi]
        assert v["planted"] == (v["country"] in PLANTED)
        if v["planted"]:
            assert s["SP"] > 1 and lo > 1, v
        else:
            assert lo <= 1 <= (hi if hi is not None else np.inf), v
        assert v["as_planted"]
