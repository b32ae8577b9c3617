"""A full disk mid-crawl with many downloads in flight (issue 22): one line, exit 2, the run
``failed`` with the reason; no worker's later error is logged as ours ("internal error") and no
"cannot schedule new futures after shutdown" traceback."""

from __future__ import annotations

import errno
import logging

import pytest

from builder.catalog import Catalog
from builder.crawl import stage as crawl_mod
from builder.workdir import WorkDir
from tests.builder.test_crawl import failing_store, serve_jpegs, urls_argv
from tests.fakes.image_server import ImageServer

pytestmark = pytest.mark.integration


def test_a_full_disk_with_concurrent_downloads_is_one_line_and_the_run_failed(
        tmp_path, monkeypatch, capsys, caplog):
    store = failing_store(3, errno.ENOSPC, "No space left on device")
    caplog.set_level(logging.DEBUG)
    with ImageServer() as srv:
        argv = urls_argv(tmp_path, serve_jpegs(srv, 40, seed=700), concurrency=16)
        monkeypatch.setattr(WorkDir, "store_image_bytes", store)
        assert crawl_mod.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: cannot write (")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "cannot schedule new futures" not in logged + err
    assert "internal error" not in logged
    assert "could not record the end of run" not in logged
    with Catalog.open(tmp_path / "w") as cat:
        run = cat.last_run("crawl")
        statuses = {r[0] for r in cat.query("SELECT status FROM downloads")}
    assert run["status"] == "failed"
    assert run["summary"].startswith("failed: OSError: [Errno 28] No space left on device")
    assert statuses <= {"ok"}  # nothing blamed on a URL


def test_an_end_of_run_that_cannot_be_written_is_one_warning_and_shows_interrupted_later(
        tmp_path, monkeypatch, caplog):
    import sqlite3

    from builder import stagekit

    cat = Catalog.open(tmp_path / "w")

    def full(*a, **k):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(cat, "finish_run", full)
    with pytest.raises(OSError), stagekit.stage_run(cat, "crawl", {}) as rec:
        raise OSError(errno.ENOSPC, "No space left on device")
    warn = [r for r in caplog.records if "could not record the end of run" in r.getMessage()]
    assert len(warn) == 1 and warn[0].exc_info is None  # one line, no traceback
    assert "database or disk is full" in warn[0].getMessage()
    with cat.tx() as con:  # as if this process had exited: its PID is now a dead one
        con.execute("UPDATE stage_runs SET pid=-1 WHERE run_id=?", (rec.run_id,))
    assert cat.stale_runs() == [rec.run_id]
    cat.close()
