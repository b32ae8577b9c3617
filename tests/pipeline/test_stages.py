"""The pipeline runs the stage list with its modules imported, and nothing below the pipeline
imports it."""

from __future__ import annotations

import ast
import json
import types
from pathlib import Path

import pytest

import annotation
import triplets
from builder import concept_dedup, concepts, image_dedup, queries
from builder.crawl import stage as crawl
from builder.stagekit import StageInputError
from builder.tagging import stage as tagging
from pipeline import cli
from pipeline.run import run_stages
from pipeline.stages import STAGES, Stage, names, stage

REPO = Path(__file__).resolve().parents[2]


def test_the_stage_list_holds_the_stage_modules_themselves():
    assert names() == ["concepts", "concept_dedup", "queries", "crawl", "image_dedup", "review",
                       "tagging", "triplets"]
    assert [s.module for s in STAGES] == [concepts, concept_dedup, queries, crawl, image_dedup,
                                          annotation, tagging, triplets]
    assert [s.command_line for s in STAGES] == [
        "python -m builder.concepts", "python -m builder.concept_dedup",
        "python -m builder.queries", "python -m builder.crawl", "python -m builder.image_dedup",
        "python -m annotation sync", "python -m builder.tagging", "python -m triplets sample"]
    assert stage("review").main is annotation.main
    with pytest.raises(KeyError, match="unknown stage 'crawler'.*concepts, concept_dedup"):
        stage("crawler")
    # the forwarded flags reach the stages whose parser has them
    assert [s.name for s in STAGES if s.accepts("--llm")] == ["concepts", "queries", "tagging"]
    assert [s.name for s in STAGES if s.accepts("--embedder")] == ["concept_dedup"]


def _imports(path: Path) -> set[str]:
    """Top-level packages a file imports, statically or through importlib with a literal."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(str(node.args[0].value).split(".")[0])
    return found


@pytest.mark.parametrize("package, above", [
    ("builder", {"pipeline", "annotation", "triplets"}),
    ("annotation", {"pipeline"}),
    ("triplets", {"pipeline"}),
    ("benchmark", {"pipeline", "builder", "annotation", "triplets"}),
])
def test_nothing_below_the_pipeline_imports_upwards(package, above):
    bad = {}
    for path in sorted((REPO / package).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if hit := _imports(path) & above:
            bad[rel] = sorted(hit)
    assert bad == {}


def _fake(name: str, calls: list, rc: int = 0, flags: tuple[str, ...] = ()) -> Stage:
    """A stage whose module records its argv and returns ``rc``; its parser has ``flags``."""
    import argparse

    mod = types.ModuleType(f"fake_{name}")

    def main(argv=None):
        calls.append((name, list(argv or [])))
        return rc

    def build_parser():
        p = argparse.ArgumentParser()
        for f in flags:
            p.add_argument(f)
        return p

    mod.main = main
    if flags:
        mod.build_parser = build_parser
    return Stage(name, mod, f"python -m fake {name}")


def test_run_forwards_flags_to_the_stages_that_take_them_and_stops_at_a_failure(capsys):
    calls: list = []
    stages = [_fake("a", calls, flags=("--llm",)), _fake("b", calls, rc=3),
              _fake("c", calls, flags=("--llm", "--embedder"))]
    forward = {"--llm": "offline", "--embedder": "hash"}
    assert run_stages("W", None, None, forward, {"b": ["-x", "1"]}, stages=stages) == 3
    assert calls == [("a", ["--workdir", "W", "--llm", "offline"]),
                     ("b", ["--workdir", "W", "-x", "1"])]
    out = capsys.readouterr().out
    assert "[a] python -m fake a --workdir W --llm offline" in out
    assert "[b] exited with 3; stopping" in out and "[c]" not in out
    calls.clear()
    assert run_stages(None, "c", "c", forward, {}, stages=stages) == 0
    assert calls == [("c", ["--llm", "offline", "--embedder", "hash"])]
    with pytest.raises(StageInputError, match="--from c comes after --to a"):
        run_stages(None, "c", "a", forward, {}, stages=stages)


def test_status_lists_every_stage_of_the_list(tmp_path, capsys, monkeypatch):
    calls: list = []
    wd = tmp_path / "w"
    # a real stage, then one that never ran: status shows both from the one list
    monkeypatch.setattr(cli, "STAGES", [stage("queries"), _fake("later", calls)])
    argv = ["--workdir", str(wd), "run", "--llm", "offline", "--to", "queries",
            "--stage-args", "queries=--countries THA"]
    assert cli.main(argv) == 0
    assert calls == [] and "[queries] python -m builder.queries" in capsys.readouterr().out
    assert cli.main(["--workdir", str(wd), "status", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [(s["stage"], s["module"], s["state"]) for s in st["stages"]] == [
        ("queries", "builder.queries", "done"), ("later", "fake_later", "not run")]
