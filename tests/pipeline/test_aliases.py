"""``python -m builder`` is ``python -m pipeline`` under its old name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import builder.__main__ as builder_cli

REPO = Path(__file__).resolve().parents[2]


def _help(module: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", module, "run", "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_builder_is_an_alias_of_pipeline(tmp_path, capsys):
    ours, theirs = _help("builder"), _help("pipeline")
    assert ours.startswith("usage: python -m builder run ")
    same = ours.replace("python -m builder", "python -m pipeline")
    assert same.split() == theirs.split()  # the same flags (the wrapping differs by a column)
    wd = tmp_path / "w"
    assert builder_cli.main(["--workdir", str(wd), "run", "--to", "queries", "--llm", "offline",
                             "--embedder", "hash", "--stage-args",
                             "concepts=--n-concepts 2 --countries THA --rounds 1",
                             "--stage-args", "queries=--countries THA"]) == 0
    out = capsys.readouterr().out
    assert "[concepts] python -m builder.concepts" in out and "[crawl]" not in out
