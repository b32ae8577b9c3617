"""``python -m triplets`` under the one CLI kit: SIGTERM records the sample run
``interrupted`` (exit 143), this machine's failures and a missing library are one line, exit 2."""

from __future__ import annotations

import errno
import os

from builder.catalog import Catalog
from tests.clikit_helpers import run_code, sigterm_when_ready
from tests.worlds import build_world
from triplets import cli, sample_run

RESUME = "interrupted (SIGTERM): run the same command again to resume"


def _world(tmp_path):
    wd = tmp_path / "w"
    build_world(wd, ["train", "taxi"], countries=["USA", "JPN"], per_cell=2)
    return wd


def test_sigterm_during_sample_records_interrupted_and_exits_143(tmp_path):
    wd = _world(tmp_path)
    rc, err = sigterm_when_ready(f"""
        import sys, time
        from triplets import cli, sample_run

        def slow(pool, cfg):
            print("ready", flush=True)
            time.sleep(60)

        sample_run.sample_triplets = slow
        sys.exit(cli.main(["sample", "--workdir", {str(wd)!r}]))
    """)
    assert rc == 143, err
    assert err.strip().splitlines()[-1] == RESUME
    assert "Traceback" not in err
    with Catalog.open(wd) as cat:
        run = cat.last_run("triplets")
    assert (run["status"], run["summary"]) == ("interrupted", "interrupted: SIGTERM")
    assert run["ended_at"] is not None


def test_a_full_disk_or_no_permission_during_sample_is_one_line(tmp_path, monkeypatch, capsys):
    wd = _world(tmp_path)
    for code in (errno.ENOSPC, errno.EACCES):
        def refuse(path, text, *a, code=code, **kw):
            raise OSError(code, os.strerror(code), str(path))

        monkeypatch.setattr(sample_run, "atomic_write_text", refuse)
        assert cli.main(["sample", "--workdir", str(wd)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == (
            f"error: cannot write ({wd / 'exports' / 'triplets.csv'}): {os.strerror(code)}; fix "
            "the disk or the permissions and run the same command again (files written before "
            "are kept)")
        with Catalog.open(wd) as cat:
            assert cat.last_run("triplets")["status"] == "failed"


def test_a_missing_library_is_one_line_naming_the_extra(tmp_path):
    wd = _world(tmp_path)
    assert cli.main(["sample", "--workdir", str(wd)]) == 0
    proc = run_code(f"""
        import sys
        sys.modules["pyarrow"] = None
        from triplets import cli
        sys.exit(cli.main(["export", "--workdir", {str(wd)!r}, "--out", {str(tmp_path / 'r')!r}]))
    """)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: the Python module 'pyarrow' is missing; install the all extra: "
        "pip install -e '.[all]'")
