"""A fake Gemini API server on 127.0.0.1 for driving the real ``google-genai`` client in tests.

It serves ``POST /v1*/models/{model}:generateContent`` and records every request (method, path,
headers, JSON body, time) so tests can count calls, read prompts and image parts, and check that
no credential leaks anywhere else. Answers are scripted per test:

- ``fake.push(reply, ...)``: replies served in order, one per request;
- ``fake.respond_with(fn)``: ``fn(request) -> Reply`` once the queue is empty (default: 500);
- helpers build replies: :func:`answer` (a JSON or text answer with token usage),
  :func:`error` (an HTTP error in Google's error format; ``retry_delay`` adds Google's
  ``RetryInfo``), :func:`blocked` (a prompt block), :func:`finished` (a candidate ended by a
  ``finishReason`` such as SAFETY), :func:`slow` (delay any reply), :func:`trickle` (send the
  whole response, status line and headers included, a byte at a time).

Routing is a table of ``(method, regex, handler)``; ``fake.add_route(...)`` adds endpoints (e.g.
the Batch API) from another module without touching this one. A handler gets
``(fake, request, match)`` and returns a :class:`Reply`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.loopback import LoopbackServer


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str/bytes sent as is
    delay: float = 0.0  # seconds to wait before answering
    headers: dict[str, str] = field(default_factory=dict)
    trickle: float = 0.0  # seconds between single bytes of the whole response (0: at once)

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body if self.body is not None else {}).encode("utf-8")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    time: float
    route: str = ""
    params: dict[str, str] = field(default_factory=dict)

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            return None

    @property
    def model(self) -> str | None:
        return self.params.get("model")

    @property
    def parts(self) -> list[dict]:
        body = self.json or {}
        return [p for c in body.get("contents", []) for p in c.get("parts", [])]

    @property
    def prompt(self) -> str:
        """The text parts of the request, joined."""
        return "\n".join(p["text"] for p in self.parts if "text" in p)

    @property
    def images(self) -> list[dict]:
        """The inline image parts (``{"data": b64, "mime_type": ...}``)."""
        return [
            p.get("inlineData") or p.get("inline_data")
            for p in self.parts
            if "inlineData" in p or "inline_data" in p
        ]


Handler = Callable[["FakeGemini", Request, "re.Match[str]"], Reply]


def answer(obj: Any, prompt_tokens: int = 11, output_tokens: int = 7) -> Reply:
    """A ``generateContent`` answer whose text is ``obj`` (JSON-encoded unless a str)."""
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return Reply(
        200,
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": output_tokens,
                "totalTokenCount": prompt_tokens + output_tokens,
            },
            "modelVersion": "fake",
        },
    )


_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error(status: int, message: str = "fake error", headers: dict[str, str] | None = None,
          retry_delay: str | None = None, reason: str | None = None) -> Reply:
    """An HTTP error in the Google API error format (``retry_delay``: a ``RetryInfo``
    detail such as ``"2s"``; ``reason``: an ``ErrorInfo`` reason such as API_KEY_INVALID)."""
    err: dict[str, Any] = {"code": status, "message": message,
                           "status": _STATUS.get(status, "UNKNOWN")}
    details = []
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": retry_delay})
    if reason is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                        "domain": "googleapis.com"})
    if details:
        err["details"] = details
    return Reply(status, {"error": err}, headers=dict(headers or {}))


def blocked(reason: str = "SAFETY") -> Reply:
    """A prompt the service blocks: no candidates, ``promptFeedback.blockReason``."""
    return Reply(200, {"promptFeedback": {"blockReason": reason, "safetyRatings": [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
         "blocked": True}]}, "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}})


def finished(reason: str, text: str | None = None) -> Reply:
    """A candidate ended by ``finishReason`` (e.g. SAFETY), with ``text`` or no parts."""
    content: dict[str, Any] = {"role": "model"}
    if text is not None:
        content["parts"] = [{"text": text}]
    return Reply(200, {"candidates": [{"content": content, "finishReason": reason, "index": 0,
                                       "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                                          "probability": "HIGH",
                                                          "blocked": True}]}]})


def slow(reply: Reply, seconds: float) -> Reply:
    reply.delay = seconds
    return reply


def trickle(reply: Reply, seconds_per_byte: float) -> Reply:
    reply.trickle = seconds_per_byte
    return reply


class FakeGemini(LoopbackServer):
    """The server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.queue: deque[Reply] = deque()
        self.responder: Callable[[Request], Reply] | None = None
        self.routes: list[tuple[str, re.Pattern[str], Handler, str]] = []
        self._lock = threading.Lock()
        self.add_route(
            "POST",
            r"^/(?P<version>v1[^/]*)/models/(?P<model>[^/:]+):generateContent$",
            FakeGemini.generate_content,
            name="generateContent",
        )

    # -- scripting --------------------------------------------------------------------------
    def add_route(self, method: str, pattern: str, handler: Handler, name: str = "") -> None:
        """Register an endpoint; earlier routes win on overlap."""
        self.routes.append((method.upper(), re.compile(pattern), handler, name or pattern))

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def respond_with(self, fn: Callable[[Request], Reply] | None) -> None:
        self.responder = fn

    def calls(self, route: str = "generateContent") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.route == route]

    def next_reply(self, req: Request) -> Reply:
        with self._lock:
            if self.queue:
                return self.queue.popleft()
        if self.responder is not None:
            return self.responder(req)
        return error(500, "fake Gemini: no scripted reply")

    @staticmethod
    def generate_content(fake: FakeGemini, req: Request, match: re.Match[str]) -> Reply:
        return fake.next_reply(req)

    # -- server -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None, "not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGemini:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                path = self.path.split("?", 1)[0]
                req = Request(
                    self.command,
                    path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    time.monotonic(),
                )
                reply = error(404, f"fake Gemini: no route for {self.command} {path}")
                for method, pattern, handler, name in fake.routes:
                    m = pattern.match(path)
                    if m and method == self.command:
                        req.route, req.params = name, m.groupdict()
                        with fake._lock:
                            fake.requests.append(req)
                        reply = handler(fake, req, m)
                        break
                else:
                    with fake._lock:
                        fake.requests.append(req)
                if reply.delay:
                    time.sleep(reply.delay)
                data = reply.payload()
                if reply.trickle:
                    self._trickle(reply, data)
                    return
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json; charset=utf-8")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def _trickle(self, reply: Reply, data: bytes) -> None:
                head = (f"HTTP/1.1 {reply.status} OK\r\ncontent-type: application/json\r\n"
                        f"content-length: {len(data)}\r\n\r\n").encode()
                self.close_connection = True
                try:
                    for i in range(len(head) + len(data)):
                        self.wfile.write((head + data)[i:i + 1])
                        self.wfile.flush()
                        time.sleep(reply.trickle)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass  # the client gave up: what the test wants

            do_POST = do_GET = do_DELETE = _serve  # noqa: N815

        self.serve(_Handler, "fake-gemini")
        return self
