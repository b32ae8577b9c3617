"""A selection that selects nothing is bad input, never "run nothing" or "run everything":
an empty ``--countries`` / ``--concepts`` list, ``pipeline run`` with ``--from`` after
``--to``, and ``--stage-args`` for a stage that is unknown or not run. One line, exit 2, and
no work dir is created."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipeline.cli as pipeline_cli
from annotation import cli as annotation_cli
from builder import concepts, image_dedup, queries
from builder.crawl import stage as crawl


def _one_error(capsys, needle: str) -> None:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], captured.err
    assert "Traceback" not in captured.err and "[" not in captured.out  # no stage started


@pytest.mark.parametrize("spec", ["", ",", " , ", ",,"])
@pytest.mark.parametrize("stage, extra", [
    (crawl, ["--search", "folder:."]), (queries, ["--llm", "offline"]),
    (concepts, ["--llm", "offline"]),
])
def test_empty_countries(tmp_path, capsys, stage, extra, spec):
    wd = tmp_path / "w"
    assert stage.main(["--workdir", str(wd), "--countries", spec, *extra]) == 2
    _one_error(capsys, f"--countries {spec!r} names no country")
    assert not wd.exists()


@pytest.mark.parametrize("spec", ["", ",", " , "])
@pytest.mark.parametrize("stage, extra", [(crawl, ["--search", "folder:."]),
                                          (image_dedup, ["--model", "none"])])
def test_empty_concepts(tmp_path, capsys, stage, extra, spec):
    wd = tmp_path / "w"
    assert stage.main(["--workdir", str(wd), "--concepts", spec, *extra]) == 2
    _one_error(capsys, f"--concepts {spec!r} names no concept")
    assert not wd.exists()


@pytest.mark.parametrize("argv, needle", [
    (["--from", "crawl", "--to", "concepts"],
     "--from crawl comes after --to concepts: no stage to run"),
    (["--from", "triplets", "--to", "concepts"], "--from triplets comes after --to concepts"),
    (["--to", "queries", "--stage-args", "crawl=--per-query 3"],
     "--stage-args crawl=...: stage crawl is not run (--from/--to run concepts, concept_dedup, "
     "queries)"),
    (["--stage-args", "crawler=--per-query 3"], "--stage-args names no stage: 'crawler'"),
    (["--stage-args", "=--per-query 3"], "--stage-args names no stage: ''"),
])
def test_builder_run_selecting_no_stage(tmp_path, capsys, argv, needle):
    wd = tmp_path / "w"
    assert pipeline_cli.main(["--workdir", str(wd), "run", "--llm", "offline", *argv]) == 2
    _one_error(capsys, needle)
    assert not wd.exists()


@pytest.mark.parametrize("command", [["push", "--kind", "queries"], ["pull", "--kind", "queries"]])
@pytest.mark.parametrize("spec", ["", ","])
def test_annotation_empty_countries(tmp_path: Path, capsys, command, spec):
    wd = tmp_path / "w"
    assert annotation_cli.main([command[0], "--workdir", str(wd), *command[1:], "--countries",
                                spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--countries {spec!r} names no country" in err[0]
    assert not wd.exists()
