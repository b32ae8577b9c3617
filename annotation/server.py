"""``python -m annotation serve``: start Label Studio for a work dir with the documented settings.

The server binds 127.0.0.1, keeps its database under ``W/label-studio/data``, serves the work
dir's images through local-files storage rooted at the folder above the work dir (what
``push`` needs as ``--document-root``), sends no usage reports and does no version check,
lets people join only through the invitation link, and creates the admin from
``LABEL_STUDIO_USERNAME`` / ``LABEL_STUDIO_PASSWORD`` on its first start. The API token is
``LABEL_STUDIO_USER_TOKEN`` when set, else one made at the first start and kept in
``W/label-studio/api_token`` (mode 600). The password is never printed or logged.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from annotation.client import AnnotationError
from core.files import atomic_write_text

log = logging.getLogger(__name__)

FOLDER = "label-studio"


@dataclass(frozen=True)
class ServerPlan:
    """What ``serve`` starts: the command, its environment and where things live."""

    command: list[str]
    env: dict[str, str]
    url: str
    data_dir: Path
    document_root: Path
    token_file: Path | None


def find_binary(given: str | None) -> str:
    """The ``label-studio`` executable: the given one, ``.venv-ls/bin`` of the current
    directory or of this checkout, else the one on PATH."""
    candidates = [given] if given else [
        str(Path.cwd() / ".venv-ls/bin/label-studio"),
        str(Path(__file__).resolve().parents[1] / ".venv-ls/bin/label-studio"),
        shutil.which("label-studio") or ""]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise AnnotationError(
        (f"--label-studio {given!r} is not an executable" if given else "no label-studio found")
        + ": python3 -m venv .venv-ls && .venv-ls/bin/pip install 'label-studio==1.23.*'")


def _token(folder: Path) -> tuple[str, Path | None]:
    token = os.environ.get("LABEL_STUDIO_USER_TOKEN", "").strip()
    if token:
        return token, None
    path = folder / "api_token"
    if path.is_file():
        return path.read_text().strip(), path
    token = secrets.token_hex(20)
    atomic_write_text(path, token + "\n")
    path.chmod(0o600)
    return token, path


def plan(workdir: Path, port: int, binary: str, host: str = "127.0.0.1") -> ServerPlan:
    """The command and environment for ``workdir`` (nothing started)."""
    workdir = Path(workdir).resolve()
    folder = workdir / FOLDER
    data_dir = folder / "data"
    first = not data_dir.exists()
    if first and not (os.environ.get("LABEL_STUDIO_USERNAME")
                      and os.environ.get("LABEL_STUDIO_PASSWORD")):
        raise AnnotationError("the first start creates the admin: set LABEL_STUDIO_USERNAME (an "
                              "e-mail) and LABEL_STUDIO_PASSWORD")
    data_dir.mkdir(parents=True, exist_ok=True)
    token, token_file = _token(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO")}
    env.update({
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        "LATEST_VERSION_CHECK": "false",
        "COLLECT_ANALYTICS": "false",
        # the label stream's counter: "position of total" in this annotator's own queue (LS
        # 1.23 shows the task history's length, "1 of 1", without this flag)
        "fflag_fix_all_optic_79_task_count_is_wrong_short": "true",
        "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "",
        "LOCAL_FILES_SERVING_ENABLED": "true",
        "LOCAL_FILES_DOCUMENT_ROOT": str(workdir.parent),
    })
    cmd = [binary, "start", "--no-browser", "--internal-host", host, "--port", str(port),
           "--data-dir", str(data_dir)]
    return ServerPlan(cmd, env, f"http://{host}:{port}", data_dir, workdir.parent, token_file)


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    """Wait until ``/health`` answers (the first start runs migrations: up to minutes)."""
    import httpx
    from tqdm.auto import tqdm

    deadline = time.monotonic() + timeout_s
    bar = tqdm(desc="waiting for Label Studio", bar_format="{desc}: {elapsed}", leave=False)
    while time.monotonic() < deadline:
        bar.update()
        if proc.poll() is not None:
            raise AnnotationError(f"label-studio exited with code {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AnnotationError(f"label-studio did not answer {url}/health within {timeout_s:.0f} s")


def invite_link(url: str, token: str) -> str | None:
    """The organization's invitation link, None if the server does not give it."""
    import httpx

    try:
        r = httpx.get(f"{url}/api/invite", headers={"Authorization": f"Token {token}"}, timeout=10)
        return url + r.json()["invite_url"] if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def serve(workdir: Path, port: int, binary: str | None, say: Callable[[str], None]) -> int:
    """Start the server, ``say`` where it is and how people join, run until Ctrl-C."""
    p = plan(workdir, port, find_binary(binary))
    signal.signal(signal.SIGTERM, _interrupt)  # a TERM stops the server too
    log_path = p.data_dir.parent / "label-studio.log"
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(p.command, env=p.env, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        say(f"starting Label Studio (log: {log_path}; the first start runs its migrations: "
            "about 2.5 min on a 2-core CPU, longer on a busy machine)")
        wait_ready(p.url, proc)
        token = p.env["LABEL_STUDIO_USER_TOKEN"]
        where = f"in {p.token_file}" if p.token_file else "in LABEL_STUDIO_USER_TOKEN"
        say(f"Label Studio for {workdir} at {p.url}\n"
              f"  the toolkit: export LABEL_STUDIO_URL={p.url} LABEL_STUDIO_API_KEY=<the token "
              f"{where}> LOCAL_FILES_DOCUMENT_ROOT={p.document_root}\n"
              f"  annotators join through the invitation link: "
              f"{invite_link(p.url, token) or 'Organization > Add People'}\n"
              "  (Ctrl-C stops the server)")
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    return 0 if proc.returncode in (0, -15, None) else 2
