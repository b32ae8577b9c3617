"""The life cycle every fake server of the tests shares: bound to 127.0.0.1 on a free port,
served by a daemon thread, stopped by its owner (``with Fake() as f: ...``)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client hung up mid-answer (a crawl stopping its downloads): normal
        super().handle_error(request, client_address)


class LoopbackServer:
    """Base of the fakes: :meth:`serve` starts a handler class, :meth:`stop` ends it."""

    _httpd: ThreadingHTTPServer | None = None

    def serve(self, handler: type[BaseHTTPRequestHandler], name: str) -> int:
        """Serve ``handler`` on 127.0.0.1 (a free port, returned) in a daemon thread."""
        httpd = _Server(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, name=name, daemon=True).start()
        return int(httpd.server_address[1])

    def start(self) -> Any:
        raise NotImplementedError  # each fake builds its handler and calls serve

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
