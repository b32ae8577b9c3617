"""``reproduce``: the plan, resumability (counted), failures, bad input, the jobs' argv."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchmark.cli import build_parser, main
from benchmark.reproduce import run as run_mod
from benchmark.reproduce.plan import (
    PAPER_KS,
    ReproduceConfig,
    build_plan,
    dataset_ref,
    resolve_models,
)
from benchmark.reproduce.suite import reproduce
from benchmark.results import read_results
from core import datatables
from tests.benchmark.reproduce_data import write_official_xm3600

XCM = str(datatables.data_dir() / "synthetic-3xcm")


@pytest.fixture(scope="module")
def xm(tmp_path_factory) -> Path:
    return write_official_xm3600(tmp_path_factory.mktemp("xm") / "xm3600")


@pytest.fixture
def loads(monkeypatch):
    """Counts model loads (every job of a model shares one load)."""
    calls: list[str] = []
    real = run_mod.open_context

    def counting(cfg):
        calls.append(cfg.model)
        assert cfg.conventions == "reference"  # hash has no authors profile
        return real(cfg)

    monkeypatch.setattr(run_mod, "open_context", counting)
    return calls


def cfg(tmp_path: Path, xm: Path, **kw) -> ReproduceConfig:
    base = dict(output_dir=tmp_path / "repro", models="hash", xcm_dataset=XCM,
                xm3600_dataset=str(xm), cache_dir=tmp_path / "cache", bootstrap=20)
    return ReproduceConfig(**{**base, **kw})


def test_paper_plan():
    plan = build_plan(ReproduceConfig(output_dir=Path("/tmp/x")))
    assert plan.models == ["clip-l14", "chinese-clip-l14", "mclip-xlmr-l14", "mclip-xlmr-b16plus",
                           "colqwen2.5-v0.2", "colqwen2.5-3b-m", "colqwen2.5-7b-m",
                           "gme-qwen2-2b", "gme-qwen2-7b", "jina-v4"]
    assert [j.task for j in plan.jobs[:4]] == ["3xcm", "3xcm-i2i", "analysis", "xm3600-i2t"]
    assert {j.conventions for j in plan.jobs} == {"authors"}
    xm = [j for j in plan.jobs if j.task == "xm3600-i2t"]
    assert {j.ks for j in xm} == {PAPER_KS} == {(1, 5, 10, 15, 25, 50, 99)}
    assert {j.dataset.spec for j in xm} == {"Tierone2025part2/crossmodal_3600"}
    gme = next(j for j in plan.jobs if j.model == "gme-qwen2-2b")
    assert gme.revision == "ce765ae71b8cdb208203cd8fb64a170b1b84293a"
    only = build_plan(ReproduceConfig(output_dir=Path("/tmp/x"), models="jina-v4,paper",
                                      tasks="rq1"))
    assert only.models[0] == "jina-v4" and len(only.models) == 10
    assert {j.task for j in only.jobs} == {"xm3600-i2t"}


def test_every_job_is_a_valid_command_line(tmp_path):
    plan = build_plan(ReproduceConfig(output_dir=tmp_path, models="hash,gme-qwen2-2b"))
    parser = build_parser()
    for job in plan.jobs:
        args = parser.parse_args(job.argv(plan.results_dir, tmp_path / "cache"))
        assert args.model == job.model
        assert args.conventions == ("authors" if job.model == "gme-qwen2-2b" else "reference")
        if job.task == "xm3600-i2t":
            assert args.k == "1,5,10,15,25,50,99" and args.xm3600 == job.dataset.spec


def test_a_job_run_by_its_argv_gives_the_same_scores(tmp_path, xm):
    out = reproduce(cfg(tmp_path, xm, tasks="rq1"))
    job = out.plan.jobs[0]
    assert main(job.argv(tmp_path / "cli", tmp_path / "cache")) == 0
    a = read_results(out.plan.result_path(job)).scores["overall"]
    b = read_results(tmp_path / "cli" / "hash" / "xm3600-i2t.json").scores["overall"]
    assert a == b


def test_second_run_runs_nothing_and_a_changed_plan_reruns_only_that(tmp_path, xm, loads):
    first = reproduce(cfg(tmp_path, xm))
    assert (first.summary.ran, first.summary.up_to_date) == (4, 0) and loads == ["hash"]
    state = json.loads((tmp_path / "repro" / "reproduce-state.json").read_text())
    assert set(state["jobs"]) == {"hash/3xcm", "hash/3xcm-i2i", "hash/analysis",
                                  "hash/xm3600-i2t"}
    second = reproduce(cfg(tmp_path, xm))
    assert (second.summary.ran, second.summary.up_to_date) == (0, 4)
    assert loads == ["hash"]  # no model loaded the second time
    # another XM3600 folder: only the RQ1 job reruns
    xm2 = tmp_path / "xm-copy"
    shutil.copytree(xm, xm2)
    third = reproduce(cfg(tmp_path, xm2))
    assert [o.job.task for o in third.summary.outcomes if o.status == "ran"] == ["xm3600-i2t"]
    assert next(o for o in third.summary.outcomes if o.status == "ran").detail == \
        "the plan changed (dataset)"
    # a changed file in that folder changes its stamp: RQ1 again, RQ2 untouched
    cap = xm2 / "captions.jsonl"
    os.utime(cap, ns=(cap.stat().st_atime_ns, cap.stat().st_mtime_ns + 10**9))
    fourth = reproduce(cfg(tmp_path, xm2))
    assert [o.job.task for o in fourth.summary.outcomes if o.status == "ran"] == ["xm3600-i2t"]
    # another bootstrap count changes the RQ2 jobs only
    fifth = reproduce(cfg(tmp_path, xm2, bootstrap=30))
    assert sorted(o.job.task for o in fifth.summary.outcomes if o.status == "ran") == [
        "3xcm", "3xcm-i2i", "analysis"]
    assert loads == ["hash"] * 4
    assert (tmp_path / "repro" / "paper-comparison.md").is_file()


def test_an_edited_results_file_or_a_lost_state_reruns(tmp_path, xm, loads):
    c = cfg(tmp_path, xm, tasks="rq1")
    reproduce(c)
    path = tmp_path / "repro" / "results" / "hash" / "xm3600-i2t.json"
    path.write_text(path.read_text().replace('"schema_version"', ' "schema_version"', 1))
    assert reproduce(c).summary.ran == 1
    (tmp_path / "repro" / "reproduce-state.json").write_text("{not json")
    assert reproduce(c).summary.ran == 1
    assert reproduce(c).summary.ran == 0


def test_failed_model_is_reported_and_the_others_go_on(tmp_path, xm, capsys):
    argv = ["reproduce", "--output-dir", str(tmp_path / "repro"), "--models",
            "gme-qwen2-2b,hash", "--xcm-dataset", XCM, "--xm3600-dataset", str(xm),
            "--cache-dir", str(tmp_path / "cache"), "--bootstrap", "20"]
    assert main(argv) == 1  # gme's weights are not here (offline)
    err = capsys.readouterr().err
    assert "gme-qwen2-2b/3xcm, gme-qwen2-2b/3xcm-i2i, gme-qwen2-2b/analysis, " \
           "gme-qwen2-2b/xm3600-i2t failed: CheckpointNotFound" in err
    assert "Traceback" not in err
    assert (tmp_path / "repro" / "results" / "hash" / "3xcm.json").is_file()
    md = (tmp_path / "repro" / "paper-comparison.md").read_text()
    assert "## Failed jobs" in md and "gme-qwen2-2b/3xcm" in md
    assert "| GME-Qwen2-2B | M_sem_pct | missing | 83.34 |" in md
    # the failed model is tried again, the finished one is not
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "hash/3xcm                               up-to-date" in out
    assert "gme-qwen2-2b/3xcm                       failed" in out


@pytest.mark.parametrize("extra,needle", [
    (["--models", "nope"], "unknown model 'nope'"),
    (["--models", "gme-qwen2-2"], "did you mean gme-qwen2-2b"),
    (["--tasks", "rq3"], "expected rq1, rq2 or rq1,rq2"),
    (["--models", ","], "names no model"),
    (["--xcm-dataset", "./no/such/folder"], "--xcm-dataset './no/such/folder': no such file"),
    (["--xm3600-dataset", "not a hub id"], "not a hub id ORG/NAME"),
    (["--output-dir", "FILE"], "is a file, not a folder"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, extra, needle):
    (tmp_path / "FILE").write_text("x")
    extra = [str(tmp_path / "FILE") if x == "FILE" else x for x in extra]
    # a later flag overrides the default given first
    argv = ["reproduce", "--output-dir", str(tmp_path / "out"), "--models", "hash", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]


def test_compare_only_runs_nothing(tmp_path, xm, loads):
    out = reproduce(cfg(tmp_path, xm, compare_only=True))
    assert out.summary is None and loads == []
    assert (tmp_path / "repro" / "paper-comparison.html").is_file()


def test_dataset_refs(tmp_path):
    hub = dataset_ref("Chula-AI/association_bias_benchmark", "abc")
    assert not hub.local and hub.revision == "abc" and hub.stamp is None
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.parquet").write_bytes(b"1")
    one = dataset_ref(str(d)).stamp
    (d / "a.parquet").write_bytes(b"12")
    assert dataset_ref(str(d)).stamp != one and dataset_ref(str(d)).spec == str(d.resolve())
    assert resolve_models("hash,hash") == ["hash"]


def test_devices_run_one_process_per_model_and_share_the_state(tmp_path, xm, capsys):
    """``--devices cpu,cpu``: hash and gme-qwen2-2b in two processes at once; gme fails
    (no weights offline) without stopping hash, each process records only its own jobs in the
    shared state file, the launcher writes the comparison once; a second call runs nothing."""
    argv = ["reproduce", "--output-dir", str(tmp_path / "repro"), "--models",
            "gme-qwen2-2b,hash", "--xcm-dataset", XCM, "--xm3600-dataset", str(xm),
            "--cache-dir", str(tmp_path / "cache"), "--bootstrap", "20", "--devices", "cpu,cpu"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "gme-qwen2-2b/3xcm, gme-qwen2-2b/3xcm-i2i, gme-qwen2-2b/analysis, " \
           "gme-qwen2-2b/xm3600-i2t failed: CheckpointNotFound" in captured.err
    assert "hash/3xcm                               ran" in captured.out
    state = json.loads((tmp_path / "repro" / "reproduce-state.json").read_text())["jobs"]
    assert {k: v["status"] for k, v in state.items()} == {
        **{f"hash/{t}": "ok" for t in ("3xcm", "3xcm-i2i", "analysis", "xm3600-i2t")},
        **{f"gme-qwen2-2b/{t}": "failed" for t in ("3xcm", "3xcm-i2i", "analysis",
                                                     "xm3600-i2t")}}
    logs = sorted(p.name for p in (tmp_path / "repro" / "logs").iterdir())
    assert logs == ["gme-qwen2-2b.cpu.log", "hash.cpu.log"]
    assert (tmp_path / "repro" / "paper-comparison.md").is_file()
    assert main(argv) == 1  # the failed model is tried again, the finished one is not
    out = capsys.readouterr().out
    assert "hash/3xcm                               up-to-date" in out


def test_devices_with_device_is_one_line(tmp_path, capsys):
    argv = ["reproduce", "--output-dir", str(tmp_path / "out"), "--models", "hash",
            "--devices", "cpu,cpu", "--device", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--devices and --device" in err[0]


def test_dtype_and_conventions_record_are_part_of_a_job(tmp_path, xm):
    """A results file made with --dtype, or under an edited conventions record, is not the
    plan's: both enter the job's fingerprint."""
    from benchmark.reproduce.plan import profile_sha

    base = build_plan(cfg(tmp_path, xm, models="clip-l14"))
    other = build_plan(cfg(tmp_path, xm, models="clip-l14", dtype="float32"))
    assert {j.fingerprint() for j in base.jobs}.isdisjoint(j.fingerprint() for j in other.jobs)
    job = base.jobs[0]
    assert job.profile == profile_sha("clip-l14", "authors") and job.profile is not None
    assert profile_sha("hash", "reference") is None
    assert "--dtype" in other.jobs[0].args(tmp_path)


def test_devices_reports_up_to_date_jobs_of_a_failing_model_as_up_to_date(tmp_path, xm,
                                                                            monkeypatch):
    """A model's process that fails (one job) leaves its other jobs' records as they were:
    those are up to date, not failed."""
    from benchmark import launch
    from benchmark.reproduce.parallel import execute_on_devices

    c = cfg(tmp_path, xm)
    assert reproduce(c).ok
    plan = build_plan(c)

    def failing(jobs, devices, log_dir):
        return [launch.JobOutcome(j, devices[0], 1, 0.1, log_dir / "x.log", "boom")
                for j in jobs]

    monkeypatch.setattr(launch, "run_jobs", failing)
    summary = execute_on_devices(plan, c, ["cpu"])
    assert {o.status for o in summary.outcomes} == {"up-to-date"}


def test_devices_claim_the_results_folder_before_any_process_starts(tmp_path, xm, monkeypatch):
    """Two model processes starting at once must both find results/ ours: the launcher leaves
    the marker there first (else one saw the other's half-written marker and refused)."""
    from benchmark import launch
    from core import files

    seen = []

    def fake_run_jobs(jobs, devices, log_dir):
        seen.append(files.read_marker(tmp_path / "repro" / "results"))
        return [launch.JobOutcome(j, "cpu", 1, 0.0, log_dir / "x.log", "not run")
                for j in jobs]

    monkeypatch.setattr(launch, "run_jobs", fake_run_jobs)
    out = reproduce(cfg(tmp_path, xm, models="hash", devices="cpu,cpu", no_compare=True))
    assert {o.status for o in out.summary.outcomes} == {"failed"}
    assert seen and seen[0] is not None and seen[0]["kind"] == "3xcm-results"
