"""The one CLI kit (``core.clikit``) and ``python -m benchmark`` under it."""

from __future__ import annotations

import errno
import logging
import sqlite3
import sys

import pytest

from benchmark import cli
from core import clikit
from tests.clikit_helpers import sigterm_when_ready


def test_sigterm_during_run_says_what_is_kept_and_exits_143(tmp_path):
    cache = tmp_path / "cache"
    rc, err = sigterm_when_ready(f"""
        import sys, time
        from benchmark import cli

        def slow_run(args):
            print("ready", flush=True)
            time.sleep(60)

        cli.run = slow_run
        sys.exit(cli.main(["run", "--model", "m", "--task", "3xcm", "--cache-dir", {str(cache)!r}]))
    """)
    assert rc == 143, err
    assert [x for x in err.strip().splitlines() if x] == [
        f"interrupted (SIGTERM): the embeddings computed so far are kept in {cache}; run the "
        "same command again to resume from them"]


def test_a_missing_library_is_one_line_naming_its_extra(monkeypatch, capsys):
    def needs_sklearn(args):
        import sklearn  # noqa: F401

    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setattr(cli, "ls", needs_sklearn)
    assert cli.main(["ls"]) == 2
    assert capsys.readouterr().err == (
        "error: the Python module 'sklearn' is missing; install the analysis extra: "
        "pip install -e '.[analysis]'\n")


def test_no_permission_is_one_line(monkeypatch, capsys):
    def refused(args):
        raise PermissionError(errno.EACCES, "Permission denied", "/results/x.json")

    monkeypatch.setattr(cli, "ls", refused)
    assert cli.main(["ls"]) == 2
    assert capsys.readouterr().err == (
        "error: cannot write (/results/x.json): Permission denied; fix the disk or the "
        "permissions and run the same command again (files written before are kept)\n")


# -- the kit itself ----------------------------------------------------------------------------
def _raise(exc: BaseException):
    def body():
        raise exc
    return body


def test_the_kit_maps_every_ending(capsys, caplog):
    class Mine(ValueError):
        pass

    kit = clikit.CliKit(extra="builder", user_errors=lambda: (Mine,),
                        error_lines=(lambda e: "hooked" if isinstance(e, KeyError) else None,),
                        database="the work dir's database")
    assert kit.run(lambda: 3) == 3 and kit.run(lambda: None) == 0
    cases = [
        (Mine("bad --rounds"), 2, "error: bad --rounds\n"),
        (KeyError("x"), 2, "error: hooked\n"),
        (OSError(errno.ENOSPC, "No space left on device"), 2,
         "error: cannot write: No space left on device; fix the disk or the permissions and run "
         "the same command again (files written before are kept)\n"),
        (sqlite3.OperationalError("database or disk is full"), 2,
         "error: cannot write the work dir's database: database or disk is full; fix the disk "
         "or the permissions and run the same command again (files written before are kept)\n"),
        (ModuleNotFoundError("no", name="imagehash"), 2,
         "error: the Python module 'imagehash' is missing; install the builder extra: "
         "pip install -e '.[builder]'\n"),
        (ModuleNotFoundError("no", name="open_clip.model"), 2,
         "error: the Python module 'open_clip.model' is missing; install the openclip extra: "
         "pip install -e '.[openclip]'\n"),
        (KeyboardInterrupt(), 130, "interrupted: run the same command again to resume\n"),
        (clikit.Terminated(), 143,
         "interrupted (SIGTERM): run the same command again to resume\n"),
    ]
    for exc, code, err in cases:
        assert kit.run(_raise(exc)) == code
        assert capsys.readouterr().err == err


def test_our_bugs_are_logged_as_internal_errors_and_keep_their_traceback(caplog):
    kit = clikit.CliKit(extra="builder")
    for exc in (ValueError("an invariant broke"), OSError(errno.EBADF, "bad fd"),
                ModuleNotFoundError("no", name="builder.nope")):
        caplog.clear()
        with caplog.at_level(logging.CRITICAL, logger="core.clikit"), \
                pytest.raises(type(exc)):
            kit.run(_raise(exc))
        assert [r.getMessage().startswith("internal error (a bug in 3XCM") for r in
                caplog.records] == [True]
        assert str(exc) in caplog.records[0].getMessage()


def test_add_workdir_is_the_one_flag():
    import argparse

    p = argparse.ArgumentParser()
    clikit.add_workdir(p)
    assert p.parse_args([]).workdir is None
    assert p.parse_args(["--workdir", "w"]).workdir == "w"


def test_a_bug_in_a_nested_command_is_logged_once(caplog):
    """``pipeline run`` runs each stage's kit inside its own: one internal-error line."""
    kit = clikit.CliKit(extra="builder")
    with caplog.at_level(logging.CRITICAL, logger="core.clikit"), \
            pytest.raises(RuntimeError):
        kit.run(lambda: kit.run(_raise(RuntimeError("deep"))))
    assert [r.getMessage() for r in caplog.records] == [
        "internal error (a bug in 3XCM, not your input; please report it with the traceback "
        "below): RuntimeError: deep"]

