"""The demo's verdicts: the family-wise rule is calibrated (simulated null countries are all
judged clear at least ~95% of the time; per-country 95% intervals would not be), a planted
preference is found, and the paragraph states what the numbers say."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.metrics.association import summarize
from pipeline import demo_story
from pipeline.demo_train import TRAINING_FILE, TrainConfig, _reusable


def _scores(rng, planted: dict[str, tuple[float, float, float]], null: list[str], n: int = 72):
    by = {}
    for code in [*planted, *null]:
        p = planted.get(code, (1 / 3, 1 / 3, 1 / 3))
        winner = rng.choice(3, size=n, p=p)
        by[code] = summarize(winner, np.zeros(n, bool), np.zeros((n, 3)), 200, 0)
    return {"by_country": by}


def test_family_wise_verdicts_are_calibrated_and_find_a_planted_preference():
    rng = np.random.default_rng(0)
    null = [f"N{i:02d}" for i in range(12)]
    planted = {f"P{i}": (0.1, 0.7, 0.2) for i in range(4)}  # SP 7: the demo's kind of plant
    reps, all_clear, all_found, any_95_miss = 150, 0, 0, 0
    for r in range(reps):
        vs = demo_story.verdicts(_scores(rng, planted, null), set(planted), seed=r,
                                 resamples=4000)
        others = [v for v in vs if not v.planted]
        all_clear += all(v.clear for v in others)
        all_found += all(v.found for v in vs if v.planted)
        any_95_miss += any(not (v.ci95[0] <= 1 <= v.ci95[1]) for v in others)
    assert all_clear / reps >= 0.9  # nominal 95% family-wise (Bonferroni is conservative)
    assert all_found / reps >= 0.95
    assert any_95_miss / reps >= 0.2  # why per-country 95% intervals cannot be the verdict


def test_the_paragraph_says_what_the_verdicts_say():
    rng = np.random.default_rng(1)
    scores = _scores(rng, {"THA": (0.1, 0.8, 0.1)}, ["USA", "DEU"])
    vs = demo_story.verdicts(scores, {"THA"}, resamples=2000)
    assoc = {"THA": {"marked_images": 40, "images": 72}}
    text = demo_story.paragraph(vs, assoc, 216)
    tha = next(v for v in vs if v.country == "THA")
    assert f"THA {tha.sp:.2f}" in text and "THA 40 of 72" in text
    assert ("found the association where it was planted and nowhere else" in text) == all(
        v.as_planted for v in vs)
    # a planted country that shows nothing is reported as a mismatch, not glossed over
    flat = _scores(rng, {"THA": (1 / 3, 1 / 3, 1 / 3)}, ["USA", "DEU"])
    vs = demo_story.verdicts(flat, {"THA"}, resamples=2000)
    assert not next(v for v in vs if v.planted).found
    assert "does NOT match the plant" in demo_story.paragraph(vs, assoc, 216)


def test_training_reuses_its_own_folder_and_refuses_a_foreign_one(tmp_path):
    assert _reusable(tmp_path / "absent", TrainConfig(), "x") is None
    foreign = tmp_path / "theirs"
    foreign.mkdir()
    (foreign / "weights.bin").write_bytes(b"not ours")
    with pytest.raises(FileExistsError, match="not written by the demo"):
        _reusable(foreign, TrainConfig(), "x")
    ours = tmp_path / "ours"
    ours.mkdir()
    import json
    from dataclasses import asdict

    (ours / TRAINING_FILE).write_text(json.dumps({"config": asdict(TrainConfig()),
                                                  "corpus_sha256": "x"}))
    assert _reusable(ours, TrainConfig(), "x") is None  # no weights yet: train
    (ours / "open_clip_model.safetensors").write_bytes(b"w")
    assert _reusable(ours, TrainConfig(), "x")["corpus_sha256"] == "x"
    assert _reusable(ours, TrainConfig(steps=1), "x") is None  # other settings: train again
    assert _reusable(ours, TrainConfig(), "y") is None  # other corpus: train again


def test_the_demo_training_shows_its_steps(tmp_path, monkeypatch, capsys):
    """A progress bar with the step count and the loss (it was silent for minutes)."""
    pytest.importorskip("open_clip")
    import tqdm.auto

    from pipeline.demo_train import train_tiny_clip
    from pipeline.demo_world import training_pairs
    from pipeline.tiny_models import tiny_openclip_dir

    real = tqdm.auto.tqdm  # the tests' $TQDM_DISABLE=1 was read when tqdm was imported
    monkeypatch.setattr(tqdm.auto, "tqdm", lambda *a, **kw: real(*a, **{**kw, "disable": False}))
    base = tiny_openclip_dir(tmp_path / "base")
    pairs = training_pairs(["food"], {("food", "THA"): "อาหาร", ("food", "USA"): "food"},
                           per_cell=2, size=32)
    rec = train_tiny_clip(pairs, base, tmp_path / "out", TrainConfig(steps=3, batch_size=4))
    err = capsys.readouterr().err
    assert "demo training: 100%" in err and "3/3" in err and "loss=" in err
    assert rec["config"]["steps"] == 3
