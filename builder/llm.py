"""The LLM client of the builder: Gemini (``google-genai``) and its offline twin, one interface.

``--llm gemini:MODEL`` (default ``gemini:gemini-2.5-flash``) or ``--llm offline``. This module
is the front door (:func:`make_llm`, the ``--llm`` options, every public name); the client's
core is ``builder.llm_base`` and the Gemini transport ``builder.llm_gemini``.

:meth:`BaseLLM.generate_structured` sends one prompt (optionally with image parts), asks for JSON
matching a pydantic schema (Gemini structured output: ``response_schema``), validates the answer
(JSON syntax, the schema, then an optional caller check such as "labels in the allowed set"),
re-asks a bounded number of times with the rejection reason appended, and returns an
:class:`LLMResult`: ``ok`` with the validated value, or ``failed`` with the raw text kept and
the reason. A failed result is never a value.

Every answer goes through the response cache (``builder.llm_cache``) keyed by
(provider, model, prompt-template sha, parameters, input sha): a re-run makes zero API calls.
Transport: the builder's one retry policy (``builder.retry``: 429/408/5xx and transient httpx
errors, exponential backoff with jitter, ``Retry-After`` and Google's ``RetryInfo`` honoured up
to ``max_retry_after``), a deadline on the whole of every HTTP request (``--llm-timeout``;
``builder.llm_http``), and a client-side rate limit (requests/minute). A rejected key or an
unknown model is :class:`LLMSetupError` (one line, exit 2); a safety block is ``refused``.
Usage (API calls, cache hits, tokens, re-asks, failures) is summed in ``llm.usage`` for the
stage-run record.

The API key comes from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY`` only; it is handed to the
``genai.Client`` and nowhere else (not logged, not in the cache key, not in the catalog).

Offline (``--llm offline``): no network, deterministic. The caller may pass ``offline=`` (a
function returning the answer a stage documents for offline builds); otherwise a schema-shaped
placeholder is built from the pydantic schema, seeded by the input hash. Offline answers go
through the same validation and usage accounting (``api_calls`` stays 0); they are computed
each time, not cached (they depend on the stage's inputs, not only on the prompt).

Batch mode (for stages that submit many requests at once): :meth:`BaseLLM.prepare` gives the
request with its cache key, :meth:`BaseLLM.lookup` / :meth:`BaseLLM.check_text` /
:meth:`BaseLLM.store` let a batch runner serve cache hits, validate returned texts and store
them under the same keys as the synchronous path.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.llm_base import (
    BASE_URL_ENV,
    GENERATION_KEYS,
    RETRY_STATUS_CODES,
    BaseLLM,
    ImagePart,
    LLMConfig,
    LLMRefused,
    LLMRequest,
    LLMResult,
    LLMSetupError,
    LLMUsage,
    Validator,
    one_of,
    schema_sha,
)
from builder.llm_cache import LLMCache
from builder.llm_offline import OfflineLLM, schema_example

__all__ = [
    "BASE_URL_ENV", "GENERATION_KEYS", "RETRY_STATUS_CODES", "BaseLLM", "ImagePart", "LLMConfig",
    "LLMRefused", "LLMRequest", "LLMResult", "LLMUsage", "OfflineLLM", "Validator", "one_of",
    "schema_example", "schema_sha", "LLMSetupError", "make_llm", "llm_from_args",
    "add_llm_args", "llm_config_from_args", "api_key_from_env",
]

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_SPEC = f"gemini:{DEFAULT_MODEL}"
KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


def api_key_from_env(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    for name in KEY_ENV_VARS:
        if env.get(name):
            return env[name]
    return None


def __getattr__(name: str) -> Any:
    """``GeminiLLM`` lives in ``builder.llm_gemini`` (it needs google-genai); re-exported here."""
    if name == "GeminiLLM":
        from builder.llm_gemini import GeminiLLM

        return GeminiLLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_llm(
    spec: str | None,
    cache_path: str | Path | None,
    config: LLMConfig | None = None,
    env: Mapping[str, str] | None = None,
) -> BaseLLM:
    """``offline`` or ``gemini[:MODEL]``; raises :class:`LLMSetupError` with one line."""
    spec = (spec or DEFAULT_SPEC).strip()
    if spec == "offline":
        return OfflineLLM(None, config)  # computed, never cached: its inputs are the stage's
    provider, _, model = spec.partition(":")
    if provider != "gemini":
        raise LLMSetupError(f"unknown --llm {spec!r}: use 'gemini:MODEL' or 'offline'")
    key = api_key_from_env(env)
    if not key:
        raise LLMSetupError(
            "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), or use --llm offline"
        )
    from builder.llm_gemini import GeminiLLM

    cache = LLMCache(cache_path) if cache_path is not None else None
    return GeminiLLM(model or DEFAULT_MODEL, cache, key, config)


def add_llm_args(parser: argparse.ArgumentParser) -> None:
    """The ``--llm`` options every LLM stage shares."""
    g = parser.add_argument_group("LLM")
    g.add_argument(
        "--llm", default=DEFAULT_SPEC, help=f"gemini:MODEL or offline (default {DEFAULT_SPEC})"
    )
    g.add_argument("--llm-rpm", type=float, default=60.0, help="requests per minute (0 = no limit)")
    g.add_argument("--llm-max-reasks", type=int, default=2, help="re-asks after an invalid answer")
    g.add_argument("--llm-timeout", type=float, default=120.0,
                   help="seconds per HTTP request, all of it: connect, upload, answer")
    g.add_argument("--llm-retries", type=int, default=6,
                   help="HTTP attempts on 429/5xx/timeouts (Retry-After honoured)")
    g.add_argument("--llm-retry-delay", type=float, default=2.0, help="first backoff delay (s)")
    g.add_argument(
        "--llm-retry-failed", action="store_true", help="ask again where the cache holds a failure"
    )


def llm_from_args(args: argparse.Namespace, cache_path: str | Path | None) -> BaseLLM:
    """The client the ``--llm`` options ask for (``cache_path``: the work dir's LLM cache)."""
    return make_llm(args.llm, cache_path, llm_config_from_args(args))


def llm_config_from_args(args: argparse.Namespace) -> LLMConfig:
    return LLMConfig(
        rpm=args.llm_rpm,
        max_reasks=args.llm_max_reasks,
        timeout_s=args.llm_timeout,
        retry_attempts=args.llm_retries,
        retry_initial_delay=args.llm_retry_delay,
        retry_failed=args.llm_retry_failed,
    )
