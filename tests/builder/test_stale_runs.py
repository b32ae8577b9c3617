"""A run whose process is gone is shown and recorded ``interrupted`` (issue 22)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from builder import liveness
from builder.catalog import Catalog
from pipeline.cli import main as pipeline_main

SCRIPT = """
import sys, time
from builder.catalog import Catalog
with Catalog.open(sys.argv[1]) as cat:
    print(cat.start_run("crawl", {}), flush=True)
    time.sleep(60)
"""


def _status(tmp_path, capsys) -> dict:
    capsys.readouterr()
    assert pipeline_main(["--workdir", str(tmp_path), "status", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    return {s["stage"]: s for s in st["stages"]}


def test_a_sigkilled_run_is_shown_interrupted_and_the_next_run_records_it(tmp_path, capsys):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, text=True)
    run_id = int(proc.stdout.readline())
    with Catalog.open(tmp_path) as cat:
        row = cat.query("SELECT * FROM stage_runs WHERE run_id=?", (run_id,))[0]
        assert (row["pid"], row["host"]) == (proc.pid, liveness.host_name())
        assert row["proc_start"] == liveness.start_time(proc.pid)
        assert cat.stale_runs() == []  # alive: still running
    assert _status(tmp_path, capsys)["crawl"]["state"] == "running"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    st = _status(tmp_path, capsys)["crawl"]
    assert st["state"] == "interrupted"
    assert st["headline"].startswith(f"interrupted: its process (PID {proc.pid} on ")
    with Catalog.open(tmp_path) as cat:  # status only shows it; the record is unchanged
        assert cat.query("SELECT status FROM stage_runs WHERE run_id=?", (run_id,))[0][0] == \
            "running"
        new = cat.start_run("concepts", {})  # the next run (of any stage) records it
        old = cat.query("SELECT status, summary, ended_at FROM stage_runs WHERE run_id=?",
                        (run_id,))[0]
        assert old["status"] == "interrupted" and old["ended_at"]
        assert old["summary"].startswith("interrupted: its process")
        assert cat.query("SELECT status FROM stage_runs WHERE run_id=?", (new,))[0][0] == \
            "running"


def test_a_reused_pid_is_gone_another_host_or_no_pid_is_not_judged(tmp_path):
    with Catalog.open(tmp_path) as cat:
        reused = cat.start_run("crawl", {})
        other_host = cat.start_run("download", {})
        no_pid = cat.start_run("concepts", {})
        mine = cat.start_run("queries", {})
        with cat.tx() as con:  # our own PID, but a process that started at another time
            con.execute("UPDATE stage_runs SET proc_start='x:1' WHERE run_id=?", (reused,))
            con.execute("UPDATE stage_runs SET pid=999999999, host='elsewhere' WHERE run_id=?",
                        (other_host,))
            con.execute("UPDATE stage_runs SET pid=NULL, host=NULL, proc_start=NULL "
                        "WHERE run_id=?", (no_pid,))
        assert cat.stale_runs() == [reused]
        with cat.tx() as con:
            assert cat.mark_stale_runs(con) == [reused]
        states = dict(cat.query("SELECT run_id, status FROM stage_runs"))
    assert states == {reused: "interrupted", other_host: "running", no_pid: "running",
                      mine: "running"}


def test_gone_on_a_dead_pid_without_proc_start():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    time.sleep(0.05)
    assert liveness.gone(proc.pid, liveness.host_name(), None)
    assert not liveness.gone(os.getpid(), liveness.host_name(), None)
    assert not liveness.gone(os.getpid(), liveness.host_name(), liveness.start_time(os.getpid()))


def test_the_release_records_of_stage_runs_name_no_process_or_host(tmp_path):
    from triplets.release_stats import stage_records

    with Catalog.open(tmp_path) as cat:
        cat.finish_run(cat.start_run("crawl", {"a": 1}), "done", {"n": 2}, "crawl: 2")
        (rec,) = stage_records(cat)
    assert not {"pid", "host", "proc_start"} & set(rec)
    assert (rec["stage"], rec["status"], rec["params"], rec["counts"]) == (
        "crawl", "done", {"a": 1}, {"n": 2})
