"""A report made from other people's results: hostile model names, colliding slugs, damaged
files, foreign schema versions, an interrupted run, a symlinked gallery, several datasets,
many models. Each case is a way the report once failed."""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.report import build, plots
from benchmark.report.build import build_report
from benchmark.results import model_slug, read_results, write_results
from core import files
from core.errors import DataError
from tests.benchmark.fake_results import write_fake_results, write_outcome_run

HOSTILE = "open_clip:local-dir:/home/someone/x/a</script><script>window.PWNED=1</script>"
BIASED = (0.40, 0.45, 0.15)


def rename_run(src: Path, dest_root: Path, name: str) -> Path:
    """A copy of the results file ``src`` (and its outcomes) as model ``name`` would have
    written it under ``dest_root``."""
    raw = json.loads(src.read_text())
    raw["model"]["name"] = name
    r = read_results(src).model_validate(raw)
    out = write_results(dest_root, r)
    rec = raw.get("outcomes")
    if rec:
        (out.parent / rec["file"]).write_bytes((src.parent / rec["file"]).read_bytes())
    return out


def test_slugs_never_collide_and_a_results_file_of_another_model_is_kept(tmp_path):
    pairs = [("exp 1", "exp_1"), ("/ckpt/a/b", "/ckpt/a_b"), ("hash", "hash/"),
             ("Model", "model")]
    for a, b in pairs:
        assert model_slug(a) != model_slug(b), (a, b)
    assert model_slug("clip-l14") == "clip-l14"  # a safe name is its own folder
    assert re.fullmatch(r"open_clip_ViT-L-14_openai-[0-9a-f]{10}",
                        model_slug("open_clip:ViT-L-14/openai"))
    assert len(model_slug("x" * 5000)) < 80
    src = write_outcome_run(tmp_path / "a", "exp 1", BIASED, 1)
    rename_run(src, tmp_path / "r", "exp 1")
    second = rename_run(src, tmp_path / "r", "exp_1")
    assert {p.parent.name for p in (tmp_path / "r").glob("*/3xcm.json")} == {
        model_slug("exp 1"), model_slug("exp_1")} and second.is_file()
    # a file at the slug of another model is never replaced
    target = tmp_path / "r" / model_slug("exp 1") / "3xcm.json"
    raw = json.loads(src.read_text())
    raw["model"]["name"] = "someone else"
    target.write_text(json.dumps(raw))
    with pytest.raises(DataError, match="refusing to overwrite"):
        rename_run(src, tmp_path / "r", "exp 1")
    assert json.loads(target.read_text())["model"]["name"] == "someone else"


def test_a_run_refuses_a_model_folder_holding_another_models_results(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--model", "hash", "--task", "3xcm", "--dataset", "data/synthetic-3xcm",
                 "--output-dir", str(out), "--no-cache", "-q"]) == 0
    path = out / "hash" / "3xcm.json"
    raw = json.loads(path.read_text())
    raw["model"]["name"] = "someone/else"
    path.write_text(json.dumps(raw))
    before = path.read_bytes()
    capsys.readouterr()
    assert main(["run", "--model", "hash", "--task", "3xcm", "--dataset", "data/synthetic-3xcm",
                 "--output-dir", str(out), "--no-cache", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing to overwrite" in err[0]
    assert path.read_bytes() == before


def test_a_pipe_in_a_model_name_keeps_every_table_straight(tmp_path):
    write_fake_results(tmp_path / "r", {"a|b": 1, "plain": 2}, xm=False, with_matrix=False)
    written = build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False,
                           galleries=False)
    md = written["leaderboard_md"].read_text()
    tables = [b for b in md.split("\n\n") if b.startswith("| model")]
    assert len(tables) == 3  # the leaderboard and the two per-country tables
    for t in tables:
        widths = {len(re.split(r"(?<!\\)\|", line)) for line in t.strip().splitlines()}
        assert len(widths) == 1, t
    html = written["html"].read_text()
    for table in re.findall(r"<table.*?</table>", html, re.S):
        rows = re.findall(r"<tr.*?</tr>", table, re.S)
        assert len({len(re.findall(r"<t[hd][ >]", r)) for r in rows}) == 1


def test_no_absolute_path_in_any_table(tmp_path):
    write_fake_results(tmp_path / "r", {"open_clip:local-dir:/home/someone/ckpt/v2": 1,
                                        "open_clip:local-dir:/home/someone/other/v2": 2},
                       xm=False, with_matrix=False)
    written = build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False,
                           galleries=False)
    for text in (written["leaderboard_md"].read_text(), written["html"].read_text()):
        assert "/home/someone" not in text
        assert "…/ckpt/v2" in text and "…/other/v2" in text


def test_figures_split_by_dataset_as_the_tables_are(tmp_path, monkeypatch):
    root = tmp_path / "r"
    write_outcome_run(root, "here", BIASED, 1)
    write_outcome_run(root / "other", "elsewhere", BIASED, 2, fingerprint="1" * 64)
    drawn: list[tuple[str, set[str]]] = []
    real = plots.sp_heatmap
    monkeypatch.setattr(plots, "sp_heatmap", lambda m, p, t: (drawn.append((t, set(m))),
                                                               real(m, p, t)))
    written = build_report([root], tmp_path / "o", compare_authors=False, galleries=False)
    assert sorted(drawn) == [("3XCM text -> image, data 000000000000", {"here"}),
                             ("3XCM text -> image, data 111111111111", {"elsewhere"})]
    assert {"sp-heatmap-3xcm-000000000000", "sp-heatmap-3xcm-111111111111"} <= set(written)


def test_a_figure_shows_at_most_its_cap_of_models(tmp_path, monkeypatch):
    root = tmp_path / "r"
    for i in range(build.MAX_MODELS + 3):
        write_outcome_run(root, f"m{i:02d}", BIASED, i, per_country=4)
    panels: list[int] = []

    def draw(models, path, title):
        panels.append(len(models))
        files.atomic_write_bytes(path, b"")

    monkeypatch.setattr(plots, "sp_by_country", draw)
    monkeypatch.setattr(plots, "sp_heatmap", draw)
    build_report([root], tmp_path / "o", compare_authors=False, galleries=False)
    assert panels == [build.MAX_MODELS, build.MAX_MODELS]


def test_an_interrupted_report_resumes_with_the_same_command(tmp_path, monkeypatch):
    write_fake_results(tmp_path / "r", {"a": 1}, xm=False, with_matrix=False)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plots, "sp_heatmap", full)
    with pytest.raises(OSError):
        build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False)
    assert any((tmp_path / "o" / "figures").iterdir())  # a figure was written before
    monkeypatch.undo()
    written = build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False)
    assert written["html"].is_file()


@pytest.mark.parametrize("version", [999, 0, "2", True])
def test_unknown_schema_versions_are_refused(tmp_path, capsys, version):
    write_fake_results(tmp_path / "r", {"a": 1, "b": 2}, xm=False, with_matrix=False)
    path = tmp_path / "r" / "b" / "3xcm.json"
    raw = json.loads(path.read_text())
    raw["schema_version"] = version
    path.write_text(json.dumps(raw))
    md = build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False)[
        "leaderboard_md"].read_text()
    assert f"b/3xcm.json: not a results file: schema_version {version!r} is not one this " \
           "version reads (1)" in md
    board = md.split("## SP by country")[0]
    assert "| b |" in board and board.count("| b |") == 1  # only its i2i results are read
    capsys.readouterr()
    assert main(["compare", str(path), str(tmp_path / "r" / "a" / "3xcm.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "schema_version" in err[0]


def damage(path: Path, how: str) -> None:
    """Damage a run's outcomes the ways a foreign or hand-edited folder does."""
    raw = json.loads(path.read_text())
    side = path.parent / raw["outcomes"]["file"]
    if how == "winner":
        df = pd.read_parquet(side)
        df.loc[0, "winner"] = 7
        df.to_parquet(side, index=False)
    elif how == "truncated":
        side.write_bytes(side.read_bytes()[:100])
    elif how == "record":
        raw["outcomes"]["id_column"] = ["triplet_id"]
    raw["outcomes"]["sha256"] = files.sha256_file(side)
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize("how", ["winner", "truncated", "record"])
def test_a_damaged_outcomes_file_costs_only_its_own_part(tmp_path, capsys, how):
    root = tmp_path / "r"
    for i, name in enumerate(("a", "b", "c")):
        write_outcome_run(root, name, BIASED, i)
    damage(root / "b" / "3xcm.json", how)
    written = build_report([root], tmp_path / "o", compare_authors=False)
    md = written["leaderboard_md"].read_text()
    assert all(f"| {m} |" in md for m in "abc") and written["html"].is_file()
    capsys.readouterr()
    assert main(["compare", str(root / "b" / "3xcm.json"), str(root / "a" / "3xcm.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from tests.benchmark.gallery_runs import make_runs

    return make_runs(tmp_path_factory.mktemp("runs"), xm3600=False)


def test_a_symlinked_gallery_folder_is_one_line(runs, tmp_path, capsys):
    """A report folder whose gallery/ was made a symlink (to another disk, say): its next
    run is refused in one line, nothing written through the link."""
    import shutil

    out = tmp_path / "o"
    assert main(["report", str(runs), "--output", str(out), "--no-authors"]) == 0
    elsewhere = tmp_path / "elsewhere"
    shutil.move(out / "gallery", elsewhere)
    (out / "gallery").symlink_to(elsewhere)
    before = {p: p.stat().st_mtime_ns for p in elsewhere.rglob("*")}
    capsys.readouterr()
    assert main(["report", str(runs), "--output", str(out), "--no-authors"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gallery/ is a symlink" in err[0]
    assert {p: p.stat().st_mtime_ns for p in elsewhere.rglob("*")} == before


def test_a_hostile_model_name_is_inert_in_every_page(runs, tmp_path):
    results = runs
    mixed = tmp_path / "mixed"
    for task in ("3xcm", "3xcm-i2i"):
        rename_run(results / "planted-a" / f"{task}.json", mixed, "planted-a")
        rename_run(results / "planted-b" / f"{task}.json", mixed, HOSTILE)
    out = tmp_path / "o"
    build_report([mixed], out, compare_authors=False)
    pages = [p for p in (out / "gallery").rglob("*.html")] + [out / "report.html"]
    assert len(pages) >= 6
    for p in pages:
        text = p.read_text()
        assert "<script>window.PWNED" not in text and "/home/someone" not in text, p
    compare = next((out / "gallery").glob("3xcm-*/compare.html"))
    config = re.search(r"window\.XCM_PAGE=(.*?);</script>", compare.read_text()).group(1)
    assert len(json.loads(config)["models"]) == 2
