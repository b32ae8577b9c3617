"""Where and when a record came from: the commit of the checkout, the UTC time."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path


def utcnow() -> str:
    """ISO-8601 UTC timestamp with seconds precision: every record's time."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def git_commit() -> str | None:
    """The commit of the checkout this package runs from (``-dirty`` if modified), else None."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
            timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha
