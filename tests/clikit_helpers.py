"""Helpers of the CLI-kit tests: run a CLI in a child process, stop it with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def run_code(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (the repository first on the path)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, env=child_env(), timeout=timeout)


def sigterm_when_ready(code: str, timeout: float = 60) -> tuple[int, str]:
    """Start ``code``, wait for it to print ``ready`` on stdout, send SIGTERM; its exit code
    and stderr."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        _, err = proc.communicate(timeout=timeout)
        raise AssertionError(f"the child did not get ready ({line!r}): {err}")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err
