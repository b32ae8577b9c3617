"""``python -m annotation serve``: Label Studio for a work dir; ``serve-images``: a read-only
server of its images.

``serve`` runs Label Studio on 127.0.0.1 with its data under ``W/label-studio``, local-files
storage, invitation-only sign-up and the admin from the environment. Secrets are private from
the first byte (0700 dirs, a 0600 token file, umask 077), a port another program holds is
refused, and the token goes only to the Label Studio started here (docs/annotation.md).
``serve-images`` answers only ``GET/HEAD /img/<sha256>.<ext>`` from the images folder.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from annotation.client import AnnotationError
from core.files import atomic_write_text

log = logging.getLogger(__name__)

CONTENT_TYPES = {
    "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp",
    "gif": "image/gif", "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff",
}
PATH_RE = re.compile(r"^/img/([0-9a-f]{64})\.(" + "|".join(CONTENT_TYPES) + r")$")


def resolve_image(images_dir: Path, url_path: str) -> Path | None:
    """The file for a request path, or None if the path is not a served image."""
    m = PATH_RE.match(url_path)
    if not m:
        return None
    sha, ext = m.groups()
    path = images_dir / sha[:2] / f"{sha}.{ext}"
    if path.is_symlink() or not path.is_file():
        return None
    return path


def make_handler(images_dir: Path) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``images_dir``."""
    root = images_dir.resolve()

    class ImageHandler(BaseHTTPRequestHandler):
        server_version = "xcm3-images/1"

        def _send(self, head_only: bool) -> None:
            parts = urlsplit(self.path)
            path = resolve_image(root, parts.path)
            if path is None:
                self.send_error(HTTPStatus.NOT_FOUND, "not an image of this work dir")
                return
            data = path.read_bytes()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", CONTENT_TYPES[path.suffix[1:]])
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "public, max-age=31536000, immutable")
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if not head_only:
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            self._send(head_only=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._send(head_only=True)

        def _refuse(self) -> None:
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, "read-only")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

        def log_message(self, fmt: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), fmt % args)

    return ImageHandler


def make_server(images_dir: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """The server (not started); ``port=0`` picks a free port (see ``server_address``)."""
    return ThreadingHTTPServer((host, port), make_handler(Path(images_dir)))


# -- Label Studio ---------------------------------------------------------------------------

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
    """The ``label-studio`` executable: the given one, a ``.venv-ls`` one, else PATH's."""
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


PRIVATE_GLOBS = ("api_token", "label-studio.log", "data/*.sqlite3*")  # tightened if older


def private_folder(path: Path) -> None:
    """``path`` created 0700 (an existing one made 0700)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=0o700, exist_ok=True)
    path.chmod(0o700)


def _token(folder: Path) -> tuple[str, Path | None]:
    token = os.environ.get("LABEL_STUDIO_USER_TOKEN", "").strip()
    if token:
        return token, None
    path = folder / "api_token"
    if path.is_file():
        return path.read_text().strip(), path
    token = secrets.token_hex(20)
    atomic_write_text(path, token + "\n", private=True)  # 0600 from its first byte
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
    private_folder(folder)
    private_folder(data_dir)
    for old in (f for g in PRIVATE_GLOBS for f in folder.glob(g)):
        old.chmod(0o600)
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


def port_taken(host: str, port: int) -> bool:
    """Does another program listen on ``host:port``?"""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def listens(pid: int, port: int) -> bool:
    """Does process ``pid`` or one of its children hold the listening socket of ``port``?"""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    for proc in procs:
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                   for c in proc.net_connections("inet")):
                return True
        except psutil.Error:
            continue
    return False


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    """Wait until ``/health`` answers (the first start runs migrations: up to minutes) from
    the Label Studio of ``proc``; an answer from any other program ends the wait, refused."""
    import httpx
    from tqdm.auto import tqdm

    port = urlsplit(url).port or 80
    deadline = time.monotonic() + timeout_s
    bar = tqdm(desc="waiting for Label Studio", bar_format="{desc}: {elapsed}", leave=False)
    while time.monotonic() < deadline:
        bar.update()
        if proc.poll() is not None:
            raise AnnotationError(f"label-studio exited with code {proc.returncode}")
        try:
            ok = httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            ok = False
        if ok and listens(proc.pid, port):
            return
        if ok:
            raise AnnotationError(f"{url} answers, but not from the Label Studio started here "
                                  "(another program took the port); no token was sent to it: "
                                  "stop that program or pass another --port")
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
    binary = find_binary(binary)
    if port_taken("127.0.0.1", port):
        raise AnnotationError(f"port {port} is taken by another program: stop it or pass "
                              "another --port")
    p = plan(workdir, port, binary)
    signal.signal(signal.SIGTERM, _interrupt)  # a TERM stops the server too
    log_path = p.data_dir.parent / "label-studio.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open(log_fd, "ab") as log_file:  # umask 077: the database it makes holds the token
        proc = subprocess.Popen(p.command, env=p.env, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True, umask=0o077)
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
