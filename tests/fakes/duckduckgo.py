"""A fake DuckDuckGo image search on 127.0.0.1 for driving the real ``ddgs`` client in tests
(``XCM_DDG_BASE_URL`` points the crawl at it).

It serves the two requests of an image search: ``GET /?q=...`` (the page holding the ``vqd``
token) and ``GET /i.js`` (the results as JSON). Replies pushed with ``fake.push(...)`` are
served first, one per request of either kind (DuckDuckGo rate-limits the first one); then
the page and :func:`results` answer. The reply helpers of :mod:`tests.fakes.gemini`
(``Reply``, ``slow``, ``trickle``) apply; :func:`status` is a bare HTTP status.
"""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.gemini import FakeGemini, Reply, Request


def status(code: int, retry_after: str | None = None) -> Reply:
    """An answer with HTTP ``code`` (DuckDuckGo's rate limit is a 202 with an HTML page)."""
    return Reply(code, "<html>please wait</html>",
                 headers={"Retry-After": retry_after} if retry_after is not None else {})


def page() -> Reply:
    """The search page: what ddgs reads the ``vqd`` token from."""
    return Reply(200, '<html><script>vqd="4-1234567890";</script>')


def results(query: str, n: int = 12) -> Reply:
    return Reply(200, {"results": [
        {"title": f"{query} {i}", "image": f"https://img.example/{i}.jpg",
         "thumbnail": "https://t.example/t.jpg", "url": f"https://page.example/{i}",
         "height": 480, "width": 640, "source": "Bing"} for i in range(n)]})


class FakeDuckDuckGo(FakeGemini):
    """``with FakeDuckDuckGo() as ddg: monkeypatch.setenv("XCM_DDG_BASE_URL", ddg.url)``."""

    def __init__(self) -> None:
        super().__init__()
        self.routes.clear()
        self.add_route("GET", r"^/$", FakeDuckDuckGo._page, name="vqd")
        self.add_route("GET", r"^/i\.js$", FakeDuckDuckGo._results, name="i.js")

    def _scripted(self) -> Reply | None:
        with self._lock:
            return self.queue.popleft() if self.queue else None

    @staticmethod
    def _page(fake: Any, req: Request, match: re.Match[str]) -> Reply:
        return fake._scripted() or page()

    @staticmethod
    def _results(fake: Any, req: Request, match: re.Match[str]) -> Reply:
        return fake._scripted() or results("q")

    def searches(self) -> int:
        """How many search pages were asked for (one per attempt)."""
        return len(self.calls("vqd"))
