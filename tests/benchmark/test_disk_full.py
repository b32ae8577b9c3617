"""A full disk under the evaluator's cache, its output dir, and ``triplets export``: one line,
exit 2, and nothing written before is lost. The disk fills for real for SQLite (a
``max_page_count`` one page above the file's size: SQLite answers "database or disk is full"
as on a full tmpfs) and at the atomic-write layer (``fsync`` answers ENOSPC)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from benchmark import cache as cache_mod
from benchmark.cli import main
from core import clikit, datatables, files

DATA = str(datatables.data_dir() / "synthetic-3xcm")


def _argv(tmp_path: Path) -> list[str]:
    return ["run", "--model", "hash", "--task", "3xcm", "--dataset", DATA, "--bootstrap", "5",
            "--output-dir", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c"), "-q"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    errors = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert "Traceback" not in err and len(errors) == 1, err
    assert errors[0] == err.splitlines()[-1] and errors[0].startswith("error: cannot write")
    assert "files written before are kept" in errors[0]
    return errors[0]


def _no_temp_files(root: Path) -> None:
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_a_full_disk_under_the_embedding_cache(tmp_path, monkeypatch, capsys):
    real = cache_mod._open_writable

    def full(path, wal):
        con = real(path, wal)
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        con.execute(f"PRAGMA max_page_count = {pages + 1}")
        return con

    monkeypatch.setattr(cache_mod, "_open_writable", full)
    assert main(_argv(tmp_path)) == 2
    assert "database or disk is full" in _one_line(capsys)
    monkeypatch.undo()
    assert main(_argv(tmp_path)) == 0  # the cache is still a cache: the same command goes on


def test_a_full_disk_under_the_output_dir_keeps_the_old_results(tmp_path, monkeypatch, capsys):
    assert main(_argv(tmp_path)) == 0
    result = tmp_path / "out" / "hash" / "3xcm.json"
    before = result.read_bytes()

    def enospc(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", enospc)
    assert main(_argv(tmp_path)) == 2
    assert "No space left on device" in _one_line(capsys)
    assert result.read_bytes() == before  # the old results file, whole
    _no_temp_files(tmp_path / "out")


def test_other_os_errors_are_not_called_a_full_disk(tmp_path, monkeypatch):
    """Only a full or read-only disk is this line; any other error stays a bug (traceback)."""
    import pytest

    def boom(fd):
        raise OSError(errno.EBADF, "bad file descriptor")

    monkeypatch.setattr(files.os, "fsync", boom)
    with pytest.raises(OSError, match="bad file descriptor"):
        main(_argv(tmp_path))
    assert clikit.local_failure(sqlite3.OperationalError("no such table: emb")) is None
