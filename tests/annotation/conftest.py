"""A real Label Studio server for the annotation tests, started once per session.

``.venv-ls/bin/label-studio`` (its own virtual environment: label-studio pins many packages)
is started bound to 127.0.0.1 on a free port with a fresh data dir, a preset admin user and a
legacy token, local-files serving under a temp document root; the fixture waits for
``/health``, checks the server is on the port it chose (Label Studio silently moves when the
port is busy), and stops it by its own process group at the end. Without the server the tests
skip, except under CI (``$CI`` set), where they fail.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
LS_BIN = REPO / ".venv-ls" / "bin" / "label-studio"
START_TIMEOUT_S = 240


@dataclass(frozen=True)
class LabelStudioServer:
    url: str
    token: str
    admin_email: str
    document_root: Path
    log_path: Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def label_studio() -> Iterator[LabelStudioServer]:
    if not LS_BIN.is_file():
        msg = (f"{LS_BIN} is missing: python3 -m venv .venv-ls && "
               ".venv-ls/bin/pip install 'label-studio==1.23.*'")
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    tmp = Path(tempfile.mkdtemp(prefix="xcm-ls-"))
    data_dir, doc_root = tmp / "data", tmp / "files"
    data_dir.mkdir()
    doc_root.mkdir()
    port = _free_port()
    token = secrets.token_hex(20)
    admin = "admin@example.com"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "DJANGO"))}
    env.update({
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "LABEL_STUDIO_USERNAME": admin,
        "LABEL_STUDIO_PASSWORD": secrets.token_urlsafe(12),
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        "LATEST_VERSION_CHECK": "false",
        "LOCAL_FILES_SERVING_ENABLED": "true",
        "LOCAL_FILES_DOCUMENT_ROOT": str(doc_root),
        "SENTRY_DSN": "",
        "FRONTEND_SENTRY_DSN": "",
        "COLLECT_ANALYTICS": "false",  # else the server posts usage to tele.labelstud.io
        # the label stream's counter: "position of total" in this annotator's own queue (LS
        # 1.23 shows the task history's length, "1 of 1", without this flag)
        "fflag_fix_all_optic_79_task_count_is_wrong_short": "true",
    })
    log_path = tmp / "label-studio.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [str(LS_BIN), "start", "--no-browser", "--internal-host", "127.0.0.1",
             "--port", str(port), "--data-dir", str(data_dir)],
            cwd=tmp, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"label-studio exited ({proc.returncode}): "
                            f"{log_path.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"label-studio did not answer /health within {START_TIMEOUT_S} s")
            time.sleep(1)
        who = httpx.get(f"{url}/api/current-user/whoami",
                        headers={"Authorization": f"Token {token}"}, timeout=10)
        assert who.status_code == 200 and who.json()["email"] == admin, (
            f"something else answers on port {port}")
        assert f"127.0.0.1:{port}" in log_path.read_text(errors="replace"), (
            "label-studio is not on the port it was given")
        yield LabelStudioServer(url, token, admin, doc_root, log_path)
    finally:
        _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def ls_conn(label_studio: LabelStudioServer):
    """An SDK connection as the admin (what the annotation commands use)."""
    from annotation.client import connect

    return connect(label_studio.url, label_studio.token)
