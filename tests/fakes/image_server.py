"""A threaded HTTP image server on 127.0.0.1 for download tests, with per-path hit counts.

It serves every case the downloader must survive (issue 7): JPEG/PNG/WebP/GIF, 404,
500-then-200, 429 with Retry-After, a response slower than the timeout, a truncated JPEG, HTML
with an image content type, a 50 MB body (declared and chunked), a decompression-bomb PNG, a
redirect loop, a redirect to 169.254.169.254, ``X-Robots-Tag: noai``, and the same bytes under
two URLs. ``add(path, body, ...)`` serves any extra bytes; ``delay`` slows every response.
"""

from __future__ import annotations

import io
import struct
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import numpy as np
from PIL import Image

from tests.fakes.loopback import LoopbackServer

BIG = 50 * 1024 * 1024


def image_bytes(fmt: str = "JPEG", size: tuple[int, int] = (64, 48), seed: int = 0,
                quality: int = 90, noise: bool = False) -> bytes:
    """A deterministic test image: a colour gradient, or RGB noise when ``noise``."""
    rng = np.random.default_rng(seed)
    w, h = size
    if noise:
        arr = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    else:
        base = rng.integers(0, 256, 3)
        yy, xx = np.mgrid[0:h, 0:w]
        arr = np.stack([(base[0] + xx * 3) % 256, (base[1] + yy * 3) % 256,
                        (base[2] + xx + yy) % 256], axis=-1).astype(np.uint8)
    buf = io.BytesIO()
    img = Image.fromarray(arr, "RGB")
    kw = {"quality": quality} if fmt in ("JPEG", "WEBP") else {}
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def gif_bytes() -> bytes:
    frames = [Image.new("P", (16, 16), i * 40) for i in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=50)
    return buf.getvalue()


def bomb_png(side: int = 20000) -> bytes:
    """A real 1-bit PNG of ``side`` x ``side`` zero pixels: ~50 KB that decodes to 400 Mpx."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    comp = zlib.compressobj(9)
    row = b"\x00" * (1 + (side + 7) // 8)
    parts = [comp.compress(row * 1000) for _ in range(side // 1000)]
    parts.append(comp.flush())
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts))
            + chunk(b"IEND", b""))


@dataclass
class Route:
    body: bytes
    content_type: str = "image/jpeg"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class ImageServer(LoopbackServer):
    """``with ImageServer() as srv: srv.url('/img/a.jpg')``; ``srv.hits[path]`` counts GETs,
    ``srv.hit_times[path]`` has the ``time.monotonic()`` of each."""

    def __init__(self, slow_seconds: float = 3.0, delay: float = 0.0, fail_times: int = 1):
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self.hit_times: dict[str, list[float]] = {}
        self.slow_seconds = slow_seconds
        self.delay = delay
        self.fail_times = fail_times
        self._lock = threading.Lock()
        self.port = 0
        self._add_cases()

    # -- content --------------------------------------------------------------------------
    def add(self, path: str, body: bytes, content_type: str = "image/jpeg", status: int = 200,
            headers: dict[str, str] | None = None) -> str:
        self.routes[path] = Route(body, content_type, status, dict(headers or {}))
        return path

    def _add_cases(self) -> None:
        self.jpeg = image_bytes("JPEG", seed=1)
        self.add("/img/a.jpg", self.jpeg)
        self.add("/img/b.png", image_bytes("PNG", seed=2), "image/png")
        self.add("/img/c.webp", image_bytes("WEBP", seed=3), "image/webp")
        self.add("/img/d.gif", gif_bytes(), "image/gif")
        self.same = image_bytes("JPEG", seed=4)
        self.add("/same/one.jpg", self.same)
        self.add("/same/two.jpg", self.same)
        self.add("/truncated.jpg", image_bytes("JPEG", (256, 256), seed=5, noise=True)[:3000])
        self.add("/html-as-image.jpg", b"<!doctype html><html><body>Not an image</body></html>",
                 "image/jpeg")
        self.add("/bomb.png", bomb_png(), "image/png")
        self.add("/noai.jpg", image_bytes("JPEG", seed=6), headers={"X-Robots-Tag": "noai"})
        self.add("/other-bot-noindex.jpg", image_bytes("JPEG", seed=7),
                 headers={"X-Robots-Tag": "googlebot: noindex"})
        self.add("/loop", b"", status=302, headers={"Location": "/loop"})
        self.add("/to-metadata", b"", status=302,
                 headers={"Location": "http://169.254.169.254/latest/meta-data/"})
        self.add("/redirect-ok", b"", status=301, headers={"Location": "/img/a.jpg"})
        self.add("/to-ftp", b"", status=302, headers={"Location": "ftp://example.org/x.jpg"})
        self.add("/gone.jpg", b"not found", "text/plain", status=404)
        self.flaky_body = image_bytes("JPEG", seed=8)
        self.limited_body = image_bytes("PNG", seed=9)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        """The URL of ``path``; ``host`` names the server another way (e.g. ``localhost``)."""
        assert self.port, "server not started"
        return f"http://{host}:{self.port}{path}"

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> ImageServer:
        self.port = self.serve(type("Handler", (_Handler,), {"srv": self}), "image-server")
        return self

    def hit(self, path: str) -> int:
        with self._lock:
            self.hits[path] += 1
            self.hit_times.setdefault(path, []).append(time.monotonic())
            return self.hits[path]


class _Handler(BaseHTTPRequestHandler):
    srv: ImageServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        srv = self.srv
        path = self.path.split("?", 1)[0]
        n = srv.hit(path)
        if srv.delay:
            time.sleep(srv.delay)
        try:
            if path == "/flaky.jpg":
                if n <= srv.fail_times:
                    return self._send(500, b"try again", "text/plain")
                return self._send(200, srv.flaky_body, "image/jpeg")
            if path == "/ratelimited.png":
                if n <= srv.fail_times:
                    return self._send(429, b"slow down", "text/plain", {"Retry-After": "1"})
                return self._send(200, srv.limited_body, "image/png")
            if path == "/slow.jpg":
                time.sleep(srv.slow_seconds)
                return self._send(200, srv.jpeg, "image/jpeg")
            if path == "/big-declared.jpg":
                return self._stream(BIG, chunked=False)
            if path == "/big-chunked.jpg":
                return self._stream(BIG, chunked=True)
            route = srv.routes.get(path)
            if route is None:
                return self._send(404, b"no such path", "text/plain")
            return self._send(route.status, route.body, route.content_type, route.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(self, status: int, body: bytes, ctype: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, total: int, chunked: bool) -> None:
        """``total`` bytes of a JPEG header plus zeros, in 1 MB pieces."""
        self.send_response(200)
        self.send_header("Content-Type", "image/jpeg")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(total))
        self.end_headers()
        piece = b"\xff\xd8\xff\xe0" + b"\x00" * (1024 * 1024 - 4)
        sent = 0
        while sent < total:
            data = piece[: min(len(piece), total - sent)]
            if chunked:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            else:
                self.wfile.write(data)
            sent += len(data)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
