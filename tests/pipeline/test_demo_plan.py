"""The demo's plan is the stage list: every stage in order, the review stage skipped with its
reason, then the release export; a stage the demo does not know is an error, not a gap."""

from __future__ import annotations

import pytest

from pipeline import demo
from pipeline.stages import STAGES, Stage, names


def test_the_plan_is_the_stage_list_then_the_export(tmp_path):
    steps = demo.plan(tmp_path, real=False, seed=1)
    assert [s.name for s in steps] == [*names(), "triplets export"]
    assert [s.command for s in steps[:-1]] == [st.command_line for st in STAGES]
    skipped = {s.name: s.skip for s in steps if s.skip}
    assert skipped == {"review": demo.SKIPPED["review"]} and "Label Studio" in skipped["review"]
    review = steps[names().index("review")]
    assert review.main is None and review.argv == []
    assert all(s.main is st.main for s, st in zip(steps[:-1], STAGES, strict=True) if not s.skip)
    assert steps[-1].argv == ["export", "--workdir", str(tmp_path / "work"), "--out",
                              str(tmp_path / "release")]
    trip = steps[names().index("triplets")]
    assert trip.argv == ["--workdir", str(tmp_path / "work"), "--seed", "1",
                         "--per-image", str(demo.PER_IMAGE),
                         "--candidate-countries", ",".join(demo.control())]
    assert set(demo.control()).isdisjoint(demo.PLANTED) and demo.control()
    real = {s.name: s.argv for s in demo.plan(tmp_path, real=True, seed=1)}
    assert "--candidate-countries" not in real["triplets"]


def test_a_stage_the_demo_does_not_know_is_an_error(tmp_path, monkeypatch):
    import builder.queries

    monkeypatch.setattr(demo, "STAGES", [*STAGES, Stage("new_stage", builder.queries)])
    with pytest.raises(demo.DemoError, match="no arguments for stage 'new_stage'"):
        demo.plan(tmp_path, real=False, seed=0)


def test_a_skipped_stage_says_why(capsys):
    step = demo.Step("review", "python -m annotation sync", [], skip="no server")
    assert demo.run_step(step) == 0.0
    assert "=== [review] python -m annotation sync: skipped in the demo: no server" in (
        capsys.readouterr().out)


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
