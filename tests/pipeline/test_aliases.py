"""``python -m builder`` lists the stages and points at ``python -m pipeline``; the package's
commands (``[project.scripts]``) are the pipeline's entry points."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import builder.__main__ as builder_cli
from builder.stage_list import STAGES
from pipeline import stages

REPO = Path(__file__).resolve().parents[2]


def test_builder_help_lists_every_stage_and_how_to_run_them_all():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "builder", "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    lines = done.stdout.splitlines()
    for st in stages.STAGES:  # one line each: name, command, what it makes
        [line] = [x for x in lines if x.split()[:1] == [st.name]]
        assert st.command_line in line
    assert [s.name for s in STAGES] == stages.names()
    assert "python -m pipeline run" in done.stdout
    check = subprocess.run([sys.executable, "-c", "import sys, builder.__main__ as m; "
                            "m.build_parser(); print(sorted(k for k in sys.modules "
                            "if k.split('.')[0] in ('pipeline', 'annotation', 'triplets')))"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert check.stdout.strip() == "[]", check.stderr


def test_builder_with_a_command_points_at_the_pipeline(capsys):
    with pytest.raises(SystemExit) as exc:
        builder_cli.main(["run"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "python -m pipeline" in err and "'run'" in err
    assert builder_cli.main([]) == 0
    assert "concept_dedup" in capsys.readouterr().out


def test_the_package_commands_are_the_pipeline_entry_points():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    targets = {}
    for name, spec in scripts.items():
        module, _, attr = spec.partition(":")
        targets[name] = getattr(importlib.import_module(module), attr)
    from pipeline import cli, demo

    assert targets == {"xcm3-pipeline": cli.main, "xcm3-demo": demo.main}
