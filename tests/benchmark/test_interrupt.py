"""Ctrl-C during ``benchmark run``: one line saying what is kept and how to resume, exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import sys, time
    from benchmark import cli

    def slow_run(args):
        print("ready", flush=True)
        time.sleep(60)
        return 0

    cli.run = slow_run
    sys.exit(cli.main(sys.argv[1:]))
""")


def test_sigint_during_run_prints_one_resume_line_and_exits_130(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "run", "--model", "m", "--task", "3xcm",
         "--cache-dir", str(cache)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    lines = [x for x in err.strip().splitlines() if x]
    assert lines == [f"interrupted: the embeddings computed so far are kept in {cache}; run "
                     "the same command again to resume from them"]
