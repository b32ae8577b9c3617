"""serve-images: only the content-addressed images, read-only, no listing, no traversal."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from annotation.serve import make_server, resolve_image
from builder.workdir import WorkDir
from tests.annotation.synth import png


@pytest.fixture
def served(tmp_path):
    wd = WorkDir.open(tmp_path / "wd")
    sha, _ = wd.store_image_bytes(png(1), "png")
    (tmp_path / "wd" / "catalog.sqlite").write_text("secret")
    (tmp_path / "outside.png").write_bytes(b"outside")
    srv = make_server(wd.images_dir)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield srv.server_address[1], sha, wd
    finally:
        srv.shutdown()
        srv.server_close()


def _get(port: int, path: str, method: str = "GET") -> tuple[int, bytes, dict]:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    con.request(method, path)
    r = con.getresponse()
    body = r.read()
    con.close()
    return r.status, body, dict(r.getheaders())


def start_serve(workdir: Path, port: int, binary: Path, env: dict | None = None) -> subprocess.Popen:
    """``python -m annotation serve`` in its own session, its stdout piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "annotation", "serve", "--workdir", str(workdir), "--port",
         str(port), "--label-studio", str(binary)], stdout=subprocess.PIPE, text=True, env=env,
        start_new_session=True)


def read_until_joined(proc: subprocess.Popen) -> str:
    """serve's output up to the line telling annotators how to join."""
    lines: list[str] = []
    while not any("annotators join" in ln for ln in lines):
        line = proc.stdout.readline()
        assert line, f"serve ended: {lines}"
        lines.append(line)
    return "".join(lines)


def test_serves_an_image(served):
    port, sha, _ = served
    status, body, headers = _get(port, f"/img/{sha}.png")
    assert (status, body) == (200, png(1))
    assert headers["Content-Type"] == "image/png"
    status, body, headers = _get(port, f"/img/{sha}.png", "HEAD")
    assert (status, body, headers["Content-Length"]) == (200, b"", str(len(png(1))))


@pytest.mark.parametrize("path", [
    "/", "/img/", "/images/", "/catalog.sqlite", "/img/../catalog.sqlite",
    "/img/%2e%2e/%2e%2e/outside.png", "/img/../../outside.png", "/../outside.png",
    "/img/{sha}.jpg",  # right hash, wrong extension: no such file
    "/img/{SHA}.png",  # upper-case hex is not the content address
    "/img/{sha}.png/..", "/img/{sha}.png%00.txt", "/img/{short}.png",
])
def test_refuses_everything_else(served, path):
    port, sha, _ = served
    status, body, _ = _get(port, path.format(sha=sha, SHA=sha.upper(), short=sha[:20]))
    assert status == 404
    assert b"secret" not in body and b"outside" not in body


def test_read_only(served):
    port, sha, _ = served
    for method in ("POST", "PUT", "DELETE"):
        assert _get(port, f"/img/{sha}.png", method)[0] == 405


def test_symlink_not_followed(tmp_path):
    wd = WorkDir.open(tmp_path)
    sha = "ab" * 32
    (wd.images_dir / "ab").mkdir()
    (wd.images_dir / "ab" / f"{sha}.png").symlink_to(tmp_path / "catalog.sqlite")
    (tmp_path / "catalog.sqlite").write_text("secret")
    assert resolve_image(wd.images_dir, f"/img/{sha}.png") is None


@pytest.mark.integration
def test_cli_serves_on_loopback(tmp_path):
    wd = WorkDir.open(tmp_path / "wd")
    sha, _ = wd.store_image_bytes(png(2), "png")
    proc = subprocess.Popen(
        [sys.executable, "-m", "annotation", "serve-images", "--workdir", str(wd.root),
         "--port", "0"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"at http://127\.0\.0\.1:(\d+)/img/<sha256>\.<ext>", line)
        assert m, line
        port = int(m.group(1))
        assert _get(port, f"/img/{sha}.png")[:2] == (200, png(2))
        assert _get(port, "/")[0] == 404
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_serve_plan_has_the_documented_settings(tmp_path, monkeypatch):
    from annotation.client import AnnotationError
    from annotation.serve import plan

    for k in ("LABEL_STUDIO_USERNAME", "LABEL_STUDIO_PASSWORD", "LABEL_STUDIO_USER_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    wd = tmp_path / "wd"
    with pytest.raises(AnnotationError, match="set LABEL_STUDIO_USERNAME"):
        plan(wd, 8099, "/bin/true")
    monkeypatch.setenv("LABEL_STUDIO_USERNAME", "lead@example.com")
    monkeypatch.setenv("LABEL_STUDIO_PASSWORD", "not-printed-pw")
    p = plan(wd, 8099, "/bin/true")
    assert p.command == ["/bin/true", "start", "--no-browser", "--internal-host", "127.0.0.1",
                         "--port", "8099", "--data-dir", str(wd / "label-studio" / "data")]
    assert p.url == "http://127.0.0.1:8099"
    assert {k: p.env[k] for k in ("LABEL_STUDIO_BASE_DATA_DIR", "LOCAL_FILES_DOCUMENT_ROOT",
                                  "COLLECT_ANALYTICS", "LATEST_VERSION_CHECK",
                                  "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK")} == {
        "LABEL_STUDIO_BASE_DATA_DIR": str(wd / "label-studio" / "data"),
        "LOCAL_FILES_DOCUMENT_ROOT": str(tmp_path), "COLLECT_ANALYTICS": "false",
        "LATEST_VERSION_CHECK": "false", "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true"}
    # annotators see "1 of N" of their own queue (tests/annotation/test_progress_browser.py)
    assert p.env["fflag_fix_all_optic_79_task_count_is_wrong_short"] == "true"
    assert p.token_file == wd / "label-studio" / "api_token"
    assert p.token_file.stat().st_mode & 0o777 == 0o600
    assert p.env["LABEL_STUDIO_USER_TOKEN"] == p.token_file.read_text().strip()
    monkeypatch.delenv("LABEL_STUDIO_PASSWORD")  # a later start needs no admin, same token
    assert plan(wd, 8099, "/bin/true").env["LABEL_STUDIO_USER_TOKEN"] == p.token_file.read_text().strip()


@pytest.mark.integration
@pytest.mark.timeout(420)
def test_serve_starts_label_studio_on_loopback(tmp_path):
    import httpx

    from tests.annotation.conftest import LS_BIN, _free_port

    if not LS_BIN.is_file():
        pytest.skip(f"{LS_BIN} is missing")
    wd = WorkDir.open(tmp_path / "wd")
    port, password = _free_port(), "pw-never-shown-123"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "DJANGO"))}
    env.update(LABEL_STUDIO_USERNAME="lead@example.com", LABEL_STUDIO_PASSWORD=password)
    proc = start_serve(wd.root, port, LS_BIN, env)
    try:
        out = read_until_joined(proc)
        assert f"at http://127.0.0.1:{port}\n" in out and password not in out
        assert re.search(rf"invitation link: http://127\.0\.0\.1:{port}/user/signup/\?token=", out)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        token = (wd.root / "label-studio" / "api_token").read_text().strip()
        who = httpx.get(f"http://127.0.0.1:{port}/api/current-user/whoami", timeout=10,
                        headers={"Authorization": f"Token {token}"})
        assert who.json()["email"] == "lead@example.com"
        assert password not in (wd.root / "label-studio" / "label-studio.log").read_text(
            errors="replace")
        folder = wd.root / "label-studio"  # the database holds the token: the owner's only
        assert {p.stat().st_mode & 0o777 for p in folder.glob("data/*.sqlite3")} == {0o600}
        assert {p.stat().st_mode & 0o777 for p in (folder, folder / "data")} == {0o700}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


# -- serve: a squatted port, private secrets ---------------------------------------------------

class Stranger:
    """Another program's HTTP server on a port: answers everything 200 and keeps the headers
    of every request it gets."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        seen = self.headers = []

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                seen.append(dict(self.headers))
                body = b'{"status": "UP", "invite_url": "/phish"}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        import threading

        threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def fake_ls(tmp_path, monkeypatch):
    """The stand-in label-studio executable, and the admin's environment of a first start."""
    exe = tmp_path / "bin" / "label-studio"
    exe.parent.mkdir()
    src = (Path(__file__).with_name("fake_label_studio.py")).read_text()
    exe.write_text(f"#!{sys.executable}\n{src}")
    exe.chmod(0o755)
    for k in ("LABEL_STUDIO_USER_TOKEN",):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("LABEL_STUDIO_USERNAME", "lead@example.com")
    monkeypatch.setenv("LABEL_STUDIO_PASSWORD", "not-printed-pw")
    return exe


def test_serve_refuses_a_taken_port_before_starting(tmp_path, fake_ls, capsys):
    from annotation.cli import main

    stranger = Stranger()
    try:
        wd = WorkDir.open(tmp_path / "wd")
        assert main(["serve", "--workdir", str(wd.root), "--port", str(stranger.port),
                     "--label-studio", str(fake_ls)]) == 2
    finally:
        stranger.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"port {stranger.port} is taken" in err[0]
    assert stranger.headers == [] and not (wd.root / "label-studio").exists()  # nothing started


def test_serve_sends_no_token_to_a_server_it_did_not_start(tmp_path, fake_ls, monkeypatch):
    """The port is taken between the check and the start (or the check is fooled): Label
    Studio moves to the next port, the stranger answers /health; serve stops, token unsent."""
    from annotation import serve
    from annotation.client import AnnotationError

    monkeypatch.setattr(serve, "port_taken", lambda host, port: False)
    monkeypatch.setattr(serve.signal, "signal", lambda *a: None)
    stranger = Stranger()
    said: list[str] = []
    try:
        with pytest.raises(AnnotationError, match="not from the Label Studio started here"):
            serve.serve(WorkDir.open(tmp_path / "wd").root, stranger.port, str(fake_ls),
                        said.append)
    finally:
        stranger.close()
    token = (tmp_path / "wd" / "label-studio" / "api_token").read_text().strip()
    assert stranger.headers and all(token not in str(h) for h in stranger.headers)
    assert not any("Authorization" in h for h in stranger.headers)
    assert not any("invitation" in line for line in said)


def test_serve_secrets_are_private_from_the_first_byte(tmp_path, fake_ls, monkeypatch):
    """The token file is 0600 when it appears (written private, then moved into place);
    label-studio/ and its data dir are 0700; the database Label Studio makes (it holds the
    token) is 0600 whatever the umask; the own server's invitation link is printed."""
    from tests.annotation.conftest import _free_port

    real_replace, modes = os.replace, {}

    def replace(src, dst, *a, **k):
        modes[os.path.basename(dst)] = os.stat(src).st_mode & 0o777
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", replace)
    old = os.umask(0o022)
    wd = WorkDir.open(tmp_path / "wd")
    port = _free_port()
    proc = start_serve(wd.root, port, fake_ls)
    try:
        from annotation.serve import plan

        out = read_until_joined(proc)
        assert f"invitation link: http://127.0.0.1:{port}/user/signup/?token=own" in out
        folder = wd.root / "label-studio"
        mode = {p.relative_to(folder).as_posix(): p.stat().st_mode & 0o777
                for p in [folder, *folder.rglob("*")]}
        assert mode == {".": 0o700, "data": 0o700, "api_token": 0o600, "label-studio.log": 0o600,
                        "data/label_studio.sqlite3": 0o600}, mode
        plan(tmp_path / "wd2", port, str(fake_ls))  # in this process: the token file's birth
        assert modes["api_token"] == 0o600
    finally:
        os.umask(old)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_waiting_for_label_studio_shows_the_time(monkeypatch, capsys):
    """The first start takes minutes: the wait shows its elapsed time, then ends when
    /health answers."""
    import tqdm.auto

    from annotation import serve
    from tests.fakes.gemini import FakeGemini, Reply

    monkeypatch.setattr(serve, "listens", lambda pid, port: True)
    real = tqdm.auto.tqdm  # the tests' $TQDM_DISABLE=1 was read when tqdm was imported
    monkeypatch.setattr(tqdm.auto, "tqdm", lambda *a, **kw: real(*a, **{**kw, "disable": False}))
    answers = iter([Reply(503), Reply(503), Reply(200, "ok")])
    with FakeGemini() as fake:
        fake.add_route("GET", r"^/health$", lambda f, r, m: next(answers), name="health")

        class Running:
            pid = 0

            def poll(self):
                return None

        serve.wait_ready(fake.url, Running(), timeout_s=30)
        assert len(fake.calls("health")) == 3
    assert "waiting for Label Studio: 00:0" in capsys.readouterr().err
