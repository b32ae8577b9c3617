"""Gemini through ``google-genai`` (imported on first use): the real side of ``builder.llm``.

``HttpOptions`` carry explicit ``HttpRetryOptions`` (408/429/5xx and transient httpx errors,
exponential backoff with jitter) and the request timeout; a client-side :class:`RateLimiter`
spaces requests. Requests use structured output (``response_mime_type='application/json'``,
``response_schema=<pydantic model>``); image parts go first, then the text. The API key is
held by the ``genai.Client`` only (``repr`` hides it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from builder.llm_base import (
    BASE_URL_ENV,
    GENERATION_KEYS,
    RETRY_STATUS_CODES,
    BaseLLM,
    ImagePart,
    LLMConfig,
    LLMRequest,
    RateLimiter,
)
from builder.llm_cache import LLMCache


class GeminiLLM(BaseLLM):
    """Gemini through ``google-genai`` (imported on first use)."""

    provider = "gemini"

    def __init__(
        self, model: str, cache: LLMCache | None, api_key: str, config: LLMConfig | None = None
    ):
        super().__init__(model, cache, config)
        self._api_key = api_key
        self._client: Any = None
        self._client_lock = threading.Lock()  # tagging's worker threads share one client
        self._limiter = RateLimiter(self.config.rpm)

    def __repr__(self) -> str:  # never show the key
        return f"GeminiLLM(model={self.model!r})"

    def http_options(self) -> Any:
        """``HttpOptions`` with explicit ``HttpRetryOptions`` (429/5xx, backoff, jitter)."""
        from google.genai import types

        c = self.config
        retry = types.HttpRetryOptions(
            attempts=c.retry_attempts,
            initial_delay=c.retry_initial_delay,
            max_delay=c.retry_max_delay,
            exp_base=c.retry_exp_base,
            jitter=c.retry_jitter,
            http_status_codes=list(RETRY_STATUS_CODES),
        )
        base_url = c.base_url or os.environ.get(BASE_URL_ENV) or None
        return types.HttpOptions(
            base_url=base_url,
            api_version=c.api_version,
            timeout=int(c.timeout_s * 1000),
            retry_options=retry,
        )

    def client(self) -> Any:
        """The one ``genai.Client`` of this LLM, created once even when threads race for it."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    from google import genai

                    self._client = genai.Client(api_key=self._api_key,
                                                http_options=self.http_options())
        return self._client

    def request_config(self, req: LLMRequest) -> Any:
        from google.genai import types

        gen = {k: req.params[k] for k in GENERATION_KEYS if k in req.params}
        return types.GenerateContentConfig(
            response_mime_type="application/json", response_schema=req.schema, **gen
        )

    def contents(self, prompt: str, images: Sequence[ImagePart]) -> list[Any]:
        """Image parts first, then the text (the order Gemini recommends for image prompts)."""
        from google.genai import types

        parts: list[Any] = [
            types.Part.from_bytes(data=im.data, mime_type=im.mime_type) for im in images
        ]
        parts.append(types.Part.from_text(text=prompt))
        return [types.Content(role="user", parts=parts)]

    def _complete(self, prompt, req, offline):
        self._limiter.wait()
        self.usage.api_calls += 1
        resp = self.client().models.generate_content(
            model=self.model,
            contents=self.contents(prompt, req.images),
            config=self.request_config(req),
        )
        return response_text(resp), response_tokens(resp)


def response_text(resp: Any) -> str | None:
    """The answer text, or None when the model gave no text part (blocked, empty)."""
    try:
        cands = resp.candidates or []
        parts = (cands[0].content.parts or []) if cands and cands[0].content else []
        texts = [
            p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False)
        ]
        return "".join(texts) if texts else None
    except (AttributeError, IndexError):
        return None


def response_tokens(resp: Any) -> dict[str, int]:
    """Token counts of a response (prompt, output, thinking, total); {} when it has none."""
    um = getattr(resp, "usage_metadata", None)
    if um is None:
        return {}
    return {
        "prompt_tokens": um.prompt_token_count or 0,
        "output_tokens": um.candidates_token_count or 0,
        "thought_tokens": um.thoughts_token_count or 0,
        "total_tokens": um.total_token_count or 0,
    }
