"""Gemini through ``google-genai``: every API call goes through :meth:`GeminiLLM.call_api` (the
rate limit, a deadline on the whole request, the builder's one retry policy with bounded waits,
``core.net``). docs/builder.md, "The LLM"."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from builder.catalog import brief
from builder.llm.base import (
    BaseLLM,
    ImagePart,
    LLMConfig,
    LLMRefused,
    LLMRequest,
    LLMSetupError,
)
from builder.llm.cache import LLMCache
from core.net import name_unresolved

log = logging.getLogger(__name__)
T = TypeVar("T")

BASE_URL_ENV = "XCM_GEMINI_BASE_URL"  # a proxy or, in tests, the fake server on 127.0.0.1
#: The parameters passed to the model's generation config (all enter the cache key).
GENERATION_KEYS = ("temperature", "top_p", "top_k", "seed", "max_output_tokens")

#: ``finishReason`` values that mean the service blocked the answer.
BLOCK_FINISH = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                          "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION",
                          "MODEL_ARMOR"})


class RateLimiter:
    """At most ``rpm`` requests per minute (evenly spaced), thread-safe."""

    def __init__(self, rpm: float):
        self.interval = 60.0 / rpm if rpm and rpm > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


@dataclass
class _Call:
    """One attempt of an API call: its value, or the exception it raised."""

    value: Any = None
    error: Exception | None = None


class GeminiLLM(BaseLLM):
    """Gemini through ``google-genai`` (imported on first use)."""

    provider = "gemini"

    def __init__(self, model: str, cache: LLMCache | None, api_key: str,
                 config: LLMConfig | None = None):
        super().__init__(model, cache, config)
        self._api_key = api_key
        self._client: Any = None
        self._client_lock = threading.Lock()  # tagging's worker threads share one client
        self._limiter = RateLimiter(self.config.rpm)
        self._waited = 0.0  # retry waits since the last answer (all threads together)

    def __repr__(self) -> str:  # never show the key
        return f"GeminiLLM(model={self.model!r})"

    def http_options(self) -> Any:
        """``HttpOptions``: our httpx client (the whole-request deadline), no SDK retries."""
        from google.genai import types

        from builder.llm.http import make_client

        c = self.config
        base_url = c.base_url or os.environ.get(BASE_URL_ENV) or None
        return types.HttpOptions(base_url=base_url, api_version=c.api_version,
                                 timeout=int(c.timeout_s * 1000),
                                 httpx_client=make_client(c.timeout_s))

    def client(self) -> Any:
        """The one ``genai.Client`` of this LLM, created once even when threads race for it."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    from google import genai

                    self._client = genai.Client(api_key=self._api_key,
                                                http_options=self.http_options())
        return self._client

    def call_api(self, fn: Callable[[], T], what: str = "request") -> T:
        """``fn()`` (one API call) under the rate limit, the deadline and the retry policy;
        raises the last error, or :class:`LLMSetupError` for a rejected key or model."""
        from builder.llm.http import deadline
        from builder.retry import Backoff, call

        c = self.config
        left = max(0.0, c.run_wait_s - self._waited) if c.run_wait_s else None
        bound = min((b for b in (c.max_wait_s or None, left) if b is not None), default=None)
        policy = Backoff(c.retries, c.retry_initial_delay, c.retry_max_delay,
                         c.max_retry_after, deadline=bound)

        def attempt() -> _Call:
            self._limiter.wait()
            try:
                with deadline(c.timeout_s):
                    return _Call(fn())
            except ModuleNotFoundError:
                raise
            except Exception as exc:  # judged by the policy below
                return _Call(error=exc)

        def log_retry(res: _Call, n: int, delay: float) -> None:
            self.usage.http_retries += 1
            self._waited += delay
            log.warning("Gemini %s: %s; retry %d in %.1fs", what, _brief(res.error), n, delay)

        tried = call(attempt, policy, lambda r: r.error is not None and retryable(r.error),
                     server_wait=lambda r: server_wait(r.error), on_retry=log_retry,
                     sleep=self.sleep)
        err = tried.result.error
        if err is None:
            self._waited = 0.0
            return tried.result.value
        setup = setup_problem(err, self.model)
        if setup:
            raise LLMSetupError(setup) from None
        if name_unresolved(err):
            raise LLMSetupError(f"Gemini cannot be reached: {_brief(err)} (the host name does "
                                "not resolve: no network, or no DNS); check the network, or "
                                "build offline with --llm offline (docs/offline.md)") from None
        if tried.gave_up == "deadline" and left is not None and left <= (bound or 0):
            raise LLMSetupError(
                f"Gemini has not answered through {self._waited:.0f} s of retry waits, and the "
                f"next would pass --llm-run-wait {c.run_wait_s:g} (last: {_brief(err)}): check "
                "the network or wait, then run the same command again (answers so far are "
                "kept)") from None
        if tried.gave_up == "server_wait":
            err.add_note(f"the server asked to wait {server_wait(err):.0f}s, over the cap of "
                         f"{c.max_retry_after:.0f}s: a later run asks again")
        raise err

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def transient(self, exc: BaseException) -> bool:
        return retryable(exc)

    def request_config(self, req: LLMRequest) -> Any:
        from google.genai import types

        gen = {k: req.params[k] for k in GENERATION_KEYS if k in req.params}
        return types.GenerateContentConfig(response_mime_type="application/json",
                                           response_schema=req.schema, **gen)

    def contents(self, prompt: str, images: Sequence[ImagePart]) -> list[Any]:
        """Image parts first, then the text (the order Gemini recommends for image prompts)."""
        from google.genai import types

        parts = [types.Part.from_bytes(data=im.data, mime_type=im.mime_type) for im in images]
        return [types.Content(role="user", parts=[*parts, types.Part.from_text(text=prompt)])]

    def _complete(self, prompt, req, offline):
        client = self.client()
        self.usage.api_calls += 1
        resp = self.call_api(lambda: client.models.generate_content(
            model=self.model, contents=self.contents(prompt, req.images),
            config=self.request_config(req)), "generateContent")
        text, block = response_text(resp), block_reason(resp)
        if block is not None:
            raise LLMRefused(block, text)
        return text, response_tokens(resp)


def _code(exc: BaseException | None) -> int | None:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def retryable(exc: BaseException | None) -> bool:
    """408/429/5xx, timeouts (ours included), connection errors: worth another try."""
    import httpx

    code = _code(exc)
    if code is not None and type(exc).__module__.startswith("google."):
        return code in (408, 429) or code >= 500
    return not name_unresolved(exc) and isinstance(
        exc, (httpx.TimeoutException, httpx.TransportError, TimeoutError, ConnectionError))


def server_wait(exc: BaseException | None) -> float | None:
    """The wait the server asked for: ``Retry-After`` (seconds or an HTTP date), else the
    ``RetryInfo.retryDelay`` of Google's error details (``"37s"``), else None."""
    from builder.retry import parse_retry_after

    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is not None:
        wait = parse_retry_after(headers.get("retry-after"))
        if wait is not None:
            return wait
    details = getattr(exc, "details", None)
    error = details.get("error", details) if isinstance(details, dict) else {}
    for item in (error.get("details") or []) if isinstance(error, dict) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            m = re.fullmatch(r"\s*([0-9.]+)s\s*", str(item.get("retryDelay", "")))
            if m:
                return float(m.group(1))
    return None


def setup_problem(exc: BaseException, model: str) -> str | None:
    """One line when the API refuses us, not the request: a rejected key, an unknown model."""
    code = _code(exc)
    if code is None or not type(exc).__module__.startswith("google."):
        return None
    text = f"{getattr(exc, 'status', '') or ''} {getattr(exc, 'message', '') or ''}".strip()
    if code in (401, 403) or "API_KEY_INVALID" in str(exc) or "API key not valid" in text:
        return (f"Gemini refused the API key (HTTP {code} {text[:200]}): check GEMINI_API_KEY "
                "(or GOOGLE_API_KEY)")
    if code == 404:
        return f"Gemini does not know the model {model!r} (HTTP 404 {text[:200]}): check --llm"
    return None


def _brief(exc: BaseException | None) -> str:
    return brief(f"{type(exc).__name__}: {exc}", 200)


def block_reason(resp: Any) -> str | None:
    """Why the service blocked this prompt or answer (prompt feedback's ``blockReason``, or a
    ``finishReason`` of :data:`BLOCK_FINISH`, with the blocked safety categories), or None."""
    fb = getattr(resp, "prompt_feedback", None)
    reason = _enum(getattr(fb, "block_reason", None))
    if reason and reason != "BLOCKED_REASON_UNSPECIFIED":
        msg = getattr(fb, "block_reason_message", None)
        return f"prompt blocked: {reason}" + (f" ({msg})" if msg else "") + _ratings(fb)
    cands = getattr(resp, "candidates", None) or []
    finish = _enum(getattr(cands[0], "finish_reason", None)) if cands else None
    if finish in BLOCK_FINISH:
        return f"answer blocked: finishReason {finish}" + _ratings(cands[0])
    return None


def _enum(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def _ratings(obj: Any) -> str:
    blocked = [_enum(getattr(r, "category", None)) for r in (getattr(obj, "safety_ratings", None)
                                                             or []) if getattr(r, "blocked", None)]
    return f" [{', '.join(str(b) for b in blocked)}]" if blocked else ""


def response_text(resp: Any) -> str | None:
    """The answer text, or None when the model gave no text part (blocked, empty)."""
    try:
        cands = resp.candidates or []
        parts = (cands[0].content.parts or []) if cands and cands[0].content else []
        texts = [p.text for p in parts
                 if getattr(p, "text", None) and not getattr(p, "thought", False)]
        return "".join(texts) if texts else None
    except (AttributeError, IndexError):
        return None


def response_tokens(resp: Any) -> dict[str, int]:
    """Token counts of a response (prompt, output, thinking, total); {} when it has none."""
    um = getattr(resp, "usage_metadata", None)
    if um is None:
        return {}
    return {"prompt_tokens": um.prompt_token_count or 0,
            "output_tokens": um.candidates_token_count or 0,
            "thought_tokens": um.thoughts_token_count or 0,
            "total_tokens": um.total_token_count or 0}
