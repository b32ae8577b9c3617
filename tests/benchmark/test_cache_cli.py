"""``run --shard`` end to end (counted forward passes), ``cache merge``, and ``run``'s checks
of the output and cache dirs before any compute."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmark.cli import main
from benchmark.results import model_slug
from tests.benchmark.cache_helpers import passes
from tests.benchmark.test_xm3600_task import make_official

ROOT = Path(__file__).resolve().parents[2]
DATA = str(ROOT / "data" / "synthetic-3xcm")
MODEL = "tests.benchmark.cache_helpers:Counting"
SLUG = model_slug(MODEL)
XCM_TASKS = ["--task", "3xcm", "--task", "3xcm-i2i", "--task", "3xcm-matrix"]


@pytest.fixture
def counted(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "passes"
    monkeypatch.setenv("XCM_TEST_PASSES", str(path))
    return path


def run(tmp_path: Path, *extra: str, cache: str = "cache", out: str = "out") -> int:
    return main(["run", "--model", MODEL, *XCM_TASKS, "--dataset", DATA, "--batch-size", "16",
                 "--cache-dir", str(tmp_path / cache), "--output-dir", str(tmp_path / out),
                 "-q", *extra])


def scores(out: Path) -> dict:
    return {t: json.loads((out / SLUG / f"{t}.json").read_text())["scores"]
            for t in ("3xcm", "3xcm-i2i", "3xcm-matrix")}


def test_shards_then_scoring_from_the_cache_does_no_forward_pass(tmp_path, counted, capsys):
    assert run(tmp_path, cache="ref", out="ref-out") == 0  # one plain run, for reference
    one_run = sum(passes(counted))
    counted.unlink()
    assert run(tmp_path, "--shard", "0/3") == 0
    assert run(tmp_path, "--shard", "1/3", "--cache-shard-file") == 0
    assert run(tmp_path, "--shard", "2/3", "--cache-shard-file") == 0
    assert not (tmp_path / "out" / SLUG / "3xcm.json").exists()  # shards score nothing
    assert sum(passes(counted)) == one_run  # the shards split the work exactly
    assert "stopping before scoring" in capsys.readouterr().err
    assert main(["cache", "merge", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert main(["cache", "merge", "--cache-dir", str(tmp_path / "cache")]) == 0
    err = capsys.readouterr().err
    assert err.count(" new") == 4 and ", 0 new" in err  # second merge: nothing new
    counted.unlink()
    assert run(tmp_path) == 0
    assert passes(counted) == []  # scored from the cache: zero forward passes
    assert scores(tmp_path / "out") == scores(tmp_path / "ref-out")


def test_xm3600_shard(tmp_path, counted):
    xm = make_official(tmp_path / "xm", n=12)
    argv = ["run", "--model", MODEL, "--task", "xm3600-i2t", "--xm3600", str(xm), "--k", "1,5",
            "--cache-dir", str(tmp_path / "c"), "--output-dir", str(tmp_path / "o"), "-q"]
    for s in range(2):
        assert main([*argv, "--shard", f"{s}/2"]) == 0
    assert sum(passes(counted)) > 0 and not (tmp_path / "o" / SLUG / "xm3600-i2t.json").exists()
    counted.unlink()
    assert main(argv) == 0
    assert passes(counted) == [] and (tmp_path / "o" / SLUG / "xm3600-i2t.json").is_file()


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ")
    return err[0]


@pytest.mark.parametrize("argv,words", [
    (["--shard", "3/3"], "need 0 <= I < N"),
    (["--shard", "x"], "expected I/N"),
    (["--cache-shard-file"], "needs --shard"),
    (["--shard", "0/2", "--no-cache"], "cannot run with --no-cache"),
    (["--devices", "cpu", "--device", "cpu"], "give one of them"),
])
def test_bad_scale_flags_are_one_line(tmp_path, counted, capsys, argv, words):
    assert run(tmp_path, *argv) == 2
    assert words in one_error_line(capsys)
    assert passes(counted) == []


def test_output_dir_or_cache_dir_a_file_or_corrupt(tmp_path, counted, capsys):
    (tmp_path / "afile").write_text("x")
    assert run(tmp_path, out="afile") == 2
    line = one_error_line(capsys)
    assert "output dir" in line and "is a file" in line
    assert run(tmp_path, cache="afile") == 2
    line = one_error_line(capsys)
    assert "cache dir" in line and "is a file" in line
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "embeddings.sqlite").write_bytes(b"garbage!" * 1000)
    assert run(tmp_path, cache="bad") == 2
    assert "not a readable embedding cache" in one_error_line(capsys)
    from core.files import claim

    claim(tmp_path / "out2", "3xcm-results")  # a results folder of ours, then
    (tmp_path / "out2" / SLUG).write_text("a file where the model's folder goes")
    assert run(tmp_path, out="out2") == 2
    assert "is a file" in one_error_line(capsys)
    assert passes(counted) == []  # all found before any forward pass


@contextmanager
def read_only(path: Path):
    """``path`` made read-only for this process: chmod 0555 for a user; for root (whom
    permission bits do not stop) the immutable attribute (chattr +i), else skip."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        path.chmod(0o555)
        undo = ["chmod", "755", str(path)]
    else:
        res = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if res.returncode:
            pytest.skip("running as root, and chattr +i is not available here: no way to make "
                        "a folder read-only for this process")
        undo = ["chattr", "-i", str(path)]
    try:
        yield path
    finally:
        subprocess.run(undo, check=True)


@pytest.mark.parametrize("which", ["out", "cache"])
def test_read_only_output_or_cache_dir(tmp_path, counted, capsys, which):
    with read_only(tmp_path / "ro"):
        rc = run(tmp_path, **{which: "ro"})
    assert rc == 2
    line = one_error_line(capsys)
    assert ("output dir" if which == "out" else "cache dir") in line
    assert "not writable" in line
    assert passes(counted) == []
