"""The demo's verdicts: the family-wise rule is calibrated (with concept effects planted, all
16 exact family-wise intervals cover the countries' true SP on the demo's concepts at least
95% of the time; the earlier bootstrap percentile intervals at the same level did not), a
planted preference is found, and the paragraph states what the numbers say and what they do
not (nothing about other concepts)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.metrics.association import association_scores, bootstrap_intervals
from pipeline import demo_story
from pipeline.demo_train import TRAINING_FILE, TrainConfig, _reusable
from tests.benchmark import coverage_sim as cs
from tests.benchmark.coverage_sim import at_least

PLANTED = {f"K{k:02d}" for k in (3, 7, 12, 14)}  # the demo design's planted countries


def _run(rng):
    """One simulated demo run (16 countries x 6 concepts x 12 triplets, concept effects
    planted): its scores and each country's true SP on these concepts."""
    run = cs.simulate(rng, cs.DEMO)
    country = np.array([f"K{k:02d}" for k in run.country])
    sims = np.eye(3)[run.winner]  # the winner has the highest similarity
    scores = association_scores(sims, {"country": country, "concept": run.concept.astype(str)})
    p = (run.cell_p * run.sizes[..., None]).sum(0)
    truth = {f"K{k:02d}": p[k, 1] / p[k, 0] for k in range(cs.COUNTRIES)}
    return scores, truth, run


def _family_coverage(reps: int, seed: int = 0, earlier: bool = False
                     ) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    covered = found = old = 0
    level = 1 - demo_story.FAMILY_ALPHA / cs.COUNTRIES
    for r in range(reps):
        scores, truth, _ = _run(rng)
        vs = demo_story.verdicts(scores, PLANTED)
        covered += all(v.ci_family[0] <= truth[v.country] <= (v.ci_family[1] or np.inf)
                       for v in vs)
        found += all(v.found for v in vs if v.planted)
        ok = earlier
        for code, s in scores["by_country"].items() if earlier else ():  # the earlier rule
            b = bootstrap_intervals(np.array([s["wins_sem"], s["wins_cul"], s["wins_non"]]),
                                    4000, r, level)["SP_ci95"]
            ok &= b[0] is not None and b[0] <= truth[code] <= b[1]
        old += ok
    return covered / reps, found / reps, old / reps


def test_family_wise_verdicts_hold_together_and_find_the_plant():
    reps = 150
    covered, found, _ = _family_coverage(reps)
    assert at_least(covered, reps, 0.95)
    assert found >= 0.85  # all four planted countries (SP ~7, moved by concept effects)


@pytest.mark.slow
def test_family_wise_verdicts_full_simulation():
    """1,000 demo runs: the exact family-wise intervals hold (>= 95% jointly), the earlier
    percentile bootstrap at the same level does not."""
    covered, found, old = _family_coverage(1000, seed=1, earlier=True)
    assert at_least(covered, 1000, 0.95) and found >= 0.85
    assert old < 0.95 and not at_least(old, 1000, 0.95)


def test_the_paragraph_says_what_the_verdicts_say():
    rng = np.random.default_rng(1)
    scores, _, _ = _run(rng)
    vs = demo_story.verdicts(scores, PLANTED)
    assoc = {k: {"marked_images": 40, "images": 72} for k in sorted(PLANTED)}
    text = demo_story.paragraph(vs, assoc, 1152, 6)
    k03 = next(v for v in vs if v.country == "K03")
    assert f"K03 {k03.sp:.2f}" in text and "K03 40 of 72" in text
    assert "on the demo's 6 concepts" in text and "other concepts" in text
    assert ("found the association where it was planted and nowhere else" in text) == all(
        v.as_planted for v in vs)
    # a planted country that shows nothing is reported as a mismatch, not glossed over
    flat = {"by_country": {k: {**s, "wins_sem": s["wins_cul"]}
                           for k, s in scores["by_country"].items()}}
    vs = demo_story.verdicts(flat, PLANTED)
    assert not next(v for v in vs if v.planted).found
    assert "does NOT match the plant" in demo_story.paragraph(vs, assoc, 1152, 6)
    # no semantic win: SP ∞, the exact interval's upper limit open
    assert demo_story.exact_sp_interval(0, 10, 0.99)[1] is None


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
