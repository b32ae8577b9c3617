"""``python -m annotation`` under the one CLI kit: SIGTERM records the review run
``interrupted`` (exit 143), a full disk and a missing library are one line, exit 2."""

from __future__ import annotations

import errno
import os

import annotation.client
import annotation.status
from annotation import cli
from builder.catalog import Catalog
from tests.clikit_helpers import run_code, sigterm_when_ready


def test_sigterm_during_sync_records_the_review_run_interrupted(tmp_path):
    wd = tmp_path / "w"
    rc, err = sigterm_when_ready(f"""
        import os, sys, time
        import annotation.client, annotation.push
        from annotation import cli
        from builder.stagekit import stage_run

        def slow_push(cat, conn, kind, **kw):  # the real run record, a push that never ends
            with stage_run(cat, "review", {{"kind": kind}}):
                print("ready", flush=True)
                time.sleep(60)

        annotation.client.connect = lambda: object()
        annotation.push.push = slow_push
        os.environ["LABEL_STUDIO_URL"] = "http://127.0.0.1:9"
        sys.exit(cli.main(["sync", "--workdir", {str(wd)!r}]))
    """)
    assert rc == 143, err
    assert err.strip().splitlines()[-1] == (
        "interrupted (SIGTERM): run the same command again to resume")
    with Catalog.open(wd) as cat:
        run = cat.last_run("review")
    assert (run["status"], run["summary"]) == ("interrupted", "interrupted: SIGTERM")


def test_a_full_disk_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    def full(*a, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "x.json"))

    monkeypatch.setattr(annotation.client, "connect", lambda: object())
    monkeypatch.setattr(annotation.status, "status", full)
    assert cli.main(["status", "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"error: cannot write ({tmp_path / 'x.json'}): No space left on device; fix the disk or "
        "the permissions and run the same command again (files written before are kept)")


def test_a_missing_sdk_is_one_line_naming_the_annotation_extra(tmp_path):
    proc = run_code(f"""
        import os, sys
        sys.modules["label_studio_sdk"] = None
        os.environ.update(LABEL_STUDIO_URL="http://127.0.0.1:9", LABEL_STUDIO_API_KEY="not-real")
        from annotation import cli
        sys.exit(cli.main(["status", "--workdir", {str(tmp_path / 'w')!r}]))
    """)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "error: the Python module 'label_studio_sdk")
    assert proc.stderr.strip().endswith(
        "is missing; install the annotation extra: pip install -e '.[annotation]'")
