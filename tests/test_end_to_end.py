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
    # every stage ran through its own main(argv)
    for stage in ("concepts", "concept_dedup", "queries", "crawl", "image_dedup", "tagging",
                  "triplets", "triplets export", "evaluate"):
        assert f"=== [{stage}]" in out
    n_images = len(demo.DEMO_CONCEPTS) * 16 * demo.PER_CELL
    assert f"load_dataset: {n_images} triplets, {n_images} images" in out
    # every country its own query text (the first demo concept is 'train')
    assert ("query texts of 'train': USA train (en-US), GBR train (en-GB), ESP tren (es-ES), "
            "ARG tren (es-AR), PRT comboio (pt-PT), BRA trem (pt-BR)") in out
    assert "overall" in out and "M_sem" in out and "SP" in out
    # the planted problems were handled by the stages and reported in the release
    build = json.loads((w / "release" / "build.json").read_text())
    n = build["numbers"]
    assert n["items_by_status"] == {"duplicate": 1, "failed": 1, "kept": n_images,
                                    "near_duplicate": 1}
    assert n["downloads_by_status"]["not_an_image"] == 1
    assert n["triplets"] == n_images and n["countries"] == 16
    assert build["sampling"] == {"seed": 3, "per_image": 1, "distinct_language": True}
    assert [r["stage"] for r in build["stage_runs"]] == [
        "concepts", "concept_dedup", "queries", "crawl", "image_dedup", "tagging", "triplets"]
    result = json.loads((w / "results" / "hash" / "3xcm.json").read_text())
    assert result["task"]["n"] == n_images
    # the overall scores are those of the per-triplet outcomes written beside the result
    import pandas as pd

    out_file = result["outcomes"]
    outcomes = pd.read_parquet(w / "results" / "hash" / out_file["file"])
    assert len(outcomes) == n_images == out_file["rows"]
    counts = outcomes["winner"].value_counts().reindex([0, 1, 2], fill_value=0).to_numpy()
    overall = result["scores"]["overall"]
    assert [overall[k] for k in ("M_sem", "M_cul", "M_non")] == pytest.approx(
        (counts / n_images).tolist())
    assert overall["SP"] == pytest.approx(counts[1] / counts[0])
    assert triplets_cli.main(["validate", "--release", str(w / "release")]) == 0
    # a second run resumes: the stages find their work done and the release is the same
    before = (w / "release" / "triplets").glob("*.parquet")
    first = {p.name: p.read_bytes() for p in before}
    assert demo.main(["--workdir", str(w), "--seed", "3"]) == 0
    after = {p.name: p.read_bytes() for p in (w / "release" / "triplets").glob("*.parquet")}
    assert after == first


def test_real_mode_needs_a_key_and_plans_the_real_services(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    assert demo.main(["--workdir", str(tmp_path), "--real"]) == 2
    assert "GEMINI_API_KEY" in capsys.readouterr().err
    steps = {s.name: s.argv for s in demo.plan(tmp_path, real=True, seed=1)}
    assert steps["concepts"][steps["concepts"].index("--llm") + 1].startswith("gemini:")
    assert steps["tagging"][steps["tagging"].index("--llm") + 1].startswith("gemini:")
    crawl = steps["crawl"]
    assert crawl[crawl.index("--search") + 1] == "ddgs"
    assert crawl[crawl.index("--concepts") + 1] == ",".join(demo.REAL_CONCEPTS)
    offline = {s.name: s.argv for s in demo.plan(tmp_path, real=False, seed=1)}
    assert offline["crawl"][offline["crawl"].index("--search") + 1].startswith("folder:")
    assert offline["tagging"][offline["tagging"].index("--llm") + 1] == "offline"
