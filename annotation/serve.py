"""``python -m annotation serve-images``: a read-only server of a work dir's images.

The alternative to Label Studio's local-files storage: the browser of an annotator loads each
image from ``http://127.0.0.1:PORT/img/<sha256>.<ext>``. Only that one path shape is served
(64 lowercase hex digits and an image extension), from ``images/<sha[:2]>/<sha>.<ext>`` of the
work dir; anything else (other paths, ``..``, directory listings, methods other than GET and
HEAD) is refused. The server binds 127.0.0.1 by default; the name never comes from the request
other than through that pattern, so no path can leave the images folder.
"""

from __future__ import annotations

import logging
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

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


def serve_in_thread(images_dir: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Start the server in a daemon thread; call ``shutdown()`` and ``server_close()`` to stop."""
    srv = make_server(images_dir, host, port)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True, name="serve-images").start()
    return srv
