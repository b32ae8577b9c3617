"""The multi-model launcher: jobs over device slots in their own processes, concurrently;
failures reported one line each; ``run --model A,B --devices ...`` and one model sharded over
devices."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmark import launch
from benchmark.cli import main
from benchmark.results import model_slug
from tests.benchmark.cache_helpers import passes

ROOT = Path(__file__).resolve().parents[2]
DATA = str(ROOT / "data" / "synthetic-3xcm")


def job_argv(tmp_path: Path, model: str) -> list[str]:
    return ["--model", model, "--task", "3xcm", "--dataset", DATA, "--cache-dir",
            str(tmp_path / "cache"), "--output-dir", str(tmp_path / "out"), "-q"]


@pytest.mark.slow
def test_jobs_run_concurrently_and_a_failure_does_not_stop_the_others(tmp_path):
    """Two Rendezvous jobs finish only if both run at the same time (each waits for the
    other in its constructor); the failing job between them is reported in one line."""
    rdv = tmp_path / "rdv"
    rdv.mkdir()
    model = "tests.benchmark.cache_helpers:Rendezvous"
    jobs = [launch.Job(model, job_argv(tmp_path, model), name="a"),
            launch.Job("nosuch-model", job_argv(tmp_path, "nosuch-model")),
            launch.Job(model, job_argv(tmp_path, model), name="b")]
    # 3 slots: a and b start together; nosuch fails on its own slot
    out = launch.run_jobs(jobs, ["cpu", "cpu", "cpu"], log_dir=tmp_path / "logs",
                          env={"XCM_TEST_RENDEZVOUS": str(rdv), "XCM_TEST_RENDEZVOUS_N": "2"})
    assert [o.job.label for o in out] == ["a", "nosuch-model", "b"]
    assert [o.ok for o in out] == [True, False, True], [o.reason for o in out]
    assert out[1].reason.startswith("error: unknown model 'nosuch-model'")
    assert "FAILED  nosuch-model on cpu" in out[1].describe()
    assert all(o.log.is_file() and o.device == "cpu" for o in out)
    assert out[0].results and Path(out[0].results[0]).is_file()  # shared output dir


@pytest.mark.slow
def test_slots_take_jobs_in_turn(tmp_path):
    jobs = [launch.Job("nosuch", ["--task", "3xcm"], name="x") for _ in range(3)]
    out = launch.run_jobs(jobs, ["cpu"], log_dir=tmp_path)
    assert [o.returncode for o in out] == [2, 2, 2]
    assert len({o.log for o in out}) == 3  # repeated labels get their own logs


def test_failure_reason(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("INFO starting\nerror: bad thing\nTraceback?\n")
    assert launch.failure_reason(log, 2) == "error: bad thing"
    log.write_text("INFO a\nRuntimeError: boom\n\n")
    assert launch.failure_reason(log, 1) == "RuntimeError: boom"
    assert launch.failure_reason(log, -9) == "killed by signal 9"
    log.write_text("")
    assert launch.failure_reason(log, 3) == "exit code 3"


def test_argv_of_reproduces_the_flags():
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--task", action="append")
    p.add_argument("--quiet", "-q", action="store_true")
    p.add_argument("--out", type=Path, default=Path("results"))
    p.add_argument("--k", default="1,5")
    args = p.parse_args(["--model", "m", "--task", "a", "--task", "b", "-q", "--out", "x"])
    argv = launch.argv_of(p, args, skip={"model"})
    assert argv == ["--task", "a", "--task", "b", "--quiet", "--out", "x"]
    again = p.parse_args([*argv, "--model", "m"])
    assert vars(again) == vars(args)


@pytest.mark.slow
def test_run_several_models_over_devices(tmp_path, capsys):
    rc = main(["run", "--model", "hash,nosuch-model", "--devices", "cpu,cpu", "--task", "3xcm",
               "--dataset", DATA, "--cache-dir", str(tmp_path / "c"), "--output-dir",
               str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "ok      hash on cpu" in err
    assert "FAILED  nosuch-model on cpu" in err and "unknown model 'nosuch-model'" in err
    assert "error: 1 of 2 jobs failed" in err
    assert (tmp_path / "o" / "hash" / "3xcm.json").is_file()


@pytest.mark.slow
def test_one_model_sharded_over_devices_then_scored(tmp_path, monkeypatch, capsys):
    counted = tmp_path / "passes"
    monkeypatch.setenv("XCM_TEST_PASSES", str(counted))
    model = "tests.benchmark.cache_helpers:Counting"
    rc = main(["run", "--model", model, "--devices", "cpu,cpu", "--task", "3xcm", "--dataset",
               DATA, "--cache-dir", str(tmp_path / "c"), "--output-dir", str(tmp_path / "o"),
               "-q", "--cache-shard-file"])
    err = capsys.readouterr().err
    assert rc == 0, err
    slug = model_slug("tests.benchmark.cache_helpers:Counting")
    for line in (f"ok      {slug}.shard-0-of-2 on cpu", f"ok      {slug}.shard-1-of-2 on cpu",
                 f"ok      {slug}.score on cpu"):
        assert line in err
    assert sum(passes(counted)) == 67 + 185  # every item once, over the two shards
    res = json.loads((tmp_path / "o" / slug / "3xcm.json").read_text())
    assert res["timings"]["image_embedding"]["embedded"] == 0  # the scoring run embeds nothing
    assert sorted(p.name for p in (tmp_path / "c" / "shards").glob("shard-*")) == [
        "shard-0-of-2.sqlite", "shard-1-of-2.sqlite"]


@pytest.mark.parametrize("devices", ["", " , "])
def test_devices_naming_none_is_one_line(tmp_path, devices, capsys):
    rc = main(["run", "--model", "hash", "--devices", devices, "--task", "3xcm",
               "--dataset", DATA, "--output-dir", str(tmp_path), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["error: --devices: no device named (e.g. cuda:0,cuda:1 or cpu,cpu)"]
