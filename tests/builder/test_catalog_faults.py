"""The catalog under bad files and concurrency (issue 15): a file that is not a catalog (random
bytes, a truncated copy, 0 bytes, a newer schema) is one line naming it, exit 2, and is left as
it was; concurrent first runs on a new work dir, and concurrent opens of a database with no
schema yet, all succeed and apply each migration once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from builder.catalog import Catalog
from builder.migrations import latest
from pipeline import cli as pipeline_cli

ROOT = Path(__file__).resolve().parents[2]
NEWEST = latest()


def _status(wd: Path, capsys) -> tuple[int, list[str]]:
    rc = pipeline_cli.main(["--workdir", str(wd), "status"])
    return rc, capsys.readouterr().err.strip().splitlines()


def test_random_bytes_are_one_line_naming_the_file(tmp_path, capsys):
    wd = tmp_path / "w"
    wd.mkdir()
    garbage = os.urandom(4096)
    (wd / "catalog.sqlite").write_bytes(garbage)
    rc, err = _status(wd, capsys)
    assert rc == 2 and err == [
        f"error: {wd / 'catalog.sqlite'} is not a usable catalog (file is not a database): "
        "restore it from a backup, or move it away to start the build anew"]
    assert (wd / "catalog.sqlite").read_bytes() == garbage  # left as it was


def test_a_truncated_catalog_is_one_line_in_every_command(tmp_path, capsys):
    from builder.crawl import stage as crawl
    from builder.tagging import stage as tagging

    good = tmp_path / "good"
    with Catalog.open(good):
        pass
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / "catalog.sqlite").write_bytes((good / "catalog.sqlite").read_bytes()[:50_000])
    rc, err = _status(wd, capsys)
    assert rc == 2 and len(err) == 1 and "database disk image is malformed" in err[0]
    for main, argv in ((crawl.main, ["--search", f"folder:{tmp_path}"]),
                       (tagging.main, ["--llm", "offline"])):
        assert main(["--workdir", str(wd), *argv]) == 2
        err = capsys.readouterr().err
        assert f"{wd / 'catalog.sqlite'} is not a usable catalog" in err
        assert "Traceback" not in err


def test_a_corrupt_llm_cache_is_one_line_naming_it(tmp_path):
    from builder.catalog import CatalogError
    from builder.llm.cache import LLMCache

    bad = tmp_path / "llm.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(CatalogError, match=f"{bad} is not a usable LLM cache "
                                           r"\(file is not a database\): move it away"):
        LLMCache(bad)


def test_a_0_byte_catalog_is_not_silently_a_new_build(tmp_path, capsys):
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / "catalog.sqlite").touch()
    rc, err = _status(wd, capsys)
    assert rc == 2 and err == [
        f"error: {wd / 'catalog.sqlite'} is empty (0 bytes), not a catalog: a new build never "
        "leaves it empty. Restore it from a backup, or delete it to start the build anew"]
    assert (wd / "catalog.sqlite").stat().st_size == 0
    (wd / "catalog.sqlite").unlink()
    Catalog.open(wd).close()  # a missing one is a new build (status only reads: it makes none)
    assert _status(wd, capsys)[0] == 0
    assert (wd / "catalog.sqlite").stat().st_size > 0  # and never 0 bytes, even for a moment
    assert not list(wd.glob(".catalog.sqlite.*"))  # no temporary file left behind


def test_a_catalog_newer_than_the_package_is_refused(tmp_path):
    from builder.catalog import CatalogError

    with Catalog.open(tmp_path) as cat:
        cat.con.execute(f"PRAGMA user_version = {NEWEST + 1}")
    with pytest.raises(CatalogError, match=f"schema v{NEWEST + 1}, newer than this package"):
        Catalog.open(tmp_path)


def test_a_folder_at_the_catalog_path_is_one_line(tmp_path):
    from builder.catalog import CatalogError

    (tmp_path / "catalog.sqlite").mkdir()
    with pytest.raises(CatalogError, match="is a folder, not a catalog file"):
        Catalog.open(tmp_path)


# -- concurrency -----------------------------------------------------------------------------
OPEN = """
import sys, time
from builder.catalog import Catalog
from builder.workdir import WorkDir
start = float(sys.argv[2])
ready = time.time() < start
while time.time() < start:
    pass
entered = time.time()
with Catalog.open(sys.argv[1]) as cat:
    version = cat.schema_version
print(version, int(ready), repr(entered), repr(time.time()))
"""


def _race(wd: Path, n: int = 3, lead: float = 1.5) -> list[subprocess.CompletedProcess]:
    """``n`` processes open the same work dir at the same instant: each spins until a common
    start time, then opens the catalog, and prints whether it was up before the start and
    when it entered and left ``Catalog.open``."""
    start = time.time() + lead
    procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(wd), str(start)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(n)]
    return [subprocess.CompletedProcess(p.args, p.wait(60), *p.communicate()) for p in procs]


def _check(wd: Path, runs: list[subprocess.CompletedProcess]) -> bool:
    """Every process succeeded and the catalog is whole; True when the round was a real race
    (every process up before the start, and all inside ``Catalog.open`` at one instant)."""
    spans, all_ready = [], True
    for r in runs:
        assert r.returncode == 0, r.stderr
        version, ready, entered, left = r.stdout.split()
        assert version == str(NEWEST)
        all_ready &= ready == "1"
        spans.append((float(entered), float(left)))
    raced = all_ready and max(e for e, _ in spans) < min(lf for _, lf in spans)
    con = sqlite3.connect(wd / "catalog.sqlite")
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == NEWEST
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        cols = [r[1] for r in con.execute("PRAGMA table_info(downloads)")]
        assert cols.count("x_robots_tag") == 1  # the schema made once
    finally:
        con.close()
    return raced


def _rounds(tmp_path: Path, prepare: Any = None, least: int = 2, most: int = 5) -> None:
    """Race rounds on fresh work dirs: at least ``least``, until one was a real overlap (a
    loaded machine can start a process late), at most ``most``; no overlap at all fails."""
    raced = 0
    for k in range(most):
        wd = tmp_path / f"w{k}"
        if prepare is not None:
            prepare(wd)
        raced += _check(wd, _race(wd))
        if k + 1 >= least and raced:
            return
    pytest.fail(f"in {most} rounds the processes never overlapped in Catalog.open")


@pytest.mark.slow
def test_concurrent_first_runs_on_a_new_work_dir_all_succeed(tmp_path):
    _rounds(tmp_path)  # two of three processes lost the race before, every round


@pytest.mark.slow
def test_concurrent_opens_of_a_database_without_schema_apply_it_once(tmp_path):
    def bare(wd: Path) -> None:
        wd.mkdir()
        con = sqlite3.connect(wd / "catalog.sqlite", isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")  # a database at user_version 0, no tables
        con.close()

    _rounds(tmp_path, bare)
