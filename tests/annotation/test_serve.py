"""serve-images: only the content-addressed images, read-only, no listing, no traversal."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys

import pytest

from annotation.serve import resolve_image, serve_in_thread
from builder.workdir import WorkDir
from tests.annotation.synth import png


@pytest.fixture
def served(tmp_path):
    wd = WorkDir.open(tmp_path / "wd")
    sha, _ = wd.store_image_bytes(png(1), "png")
    (tmp_path / "wd" / "catalog.sqlite").write_text("secret")
    (tmp_path / "outside.png").write_bytes(b"outside")
    srv = serve_in_thread(wd.images_dir)
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
