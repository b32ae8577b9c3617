"""The LLM client of the builder: Gemini (``google-genai``) and its offline twin, one interface.

``--llm gemini:MODEL`` (default ``gemini:gemini-2.5-flash``) or ``--llm offline``. This module
is the front door (:func:`make_llm`, the ``--llm`` options, every public name); the client's
core is ``builder.llm.base`` and the Gemini transport ``builder.llm.gemini``.

:meth:`BaseLLM.generate_structured` sends one prompt (optionally with image parts), asks for JSON
matching a pydantic schema (Gemini structured output: ``response_schema``), validates the answer
(JSON syntax, the schema, then an optional caller check such as "labels in the allowed set"),
re-asks a bounded number of times with the rejection reason appended, and returns an
:class:`LLMResult`: ``ok`` with the validated value, or ``failed`` with the raw text kept and
the reason. A failed result is never a value.

Every answer goes through the response cache (``builder.llm.cache``) keyed by
(provider, model, prompt-template sha, parameters, input sha): a re-run makes zero API calls.
Transport: the builder's one retry policy (``builder.retry``: 429/408/5xx and transient httpx
errors, exponential backoff with jitter, ``Retry-After`` and Google's ``RetryInfo`` honoured up
to ``max_retry_after``), a deadline on the whole of every HTTP request (``--llm-timeout``;
``builder.llm.http``), and a client-side rate limit (requests/minute). A rejected key or an
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
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.llm.base import (
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
from builder.llm.cache import LLMCache
from builder.llm.offline import OfflineLLM, schema_example
from core.options import add_options, option

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
    """``GeminiLLM`` lives in ``builder.llm.gemini`` (it needs google-genai); re-exported here."""
    if name == "GeminiLLM":
        from builder.llm.gemini import GeminiLLM

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
    from builder.llm.gemini import GeminiLLM

    cache = LLMCache(cache_path) if cache_path is not None else None
    return GeminiLLM(model or DEFAULT_MODEL, cache, key, config)


_D = LLMConfig()  # the client's defaults: the flags below take theirs from it
log = logging.getLogger(__name__)


@dataclass
class LLMOptions:
    """The ``--llm`` flags every LLM stage shares (defaults from :class:`LLMConfig`, bounds
    checked where the flag is parsed)."""

    llm: str = option(f"gemini:MODEL or offline (default {DEFAULT_SPEC})", DEFAULT_SPEC)
    llm_rpm: float = option("requests per minute (0 = no limit)", _D.rpm, minimum=0)
    llm_max_reasks: int = option("re-asks after an invalid answer", _D.max_reasks, minimum=0)
    llm_timeout: float = option("seconds per HTTP request, all of it: connect, upload, answer",
                                _D.timeout_s, above=0)
    llm_retries: int | None = option(
        f"HTTP retries on 429/5xx/timeouts: extra attempts after the first (default "
        f"{_D.retry_attempts - 1}; Retry-After honoured)", None, minimum=0)
    llm_attempts: int | None = option(
        "deprecated (removed in the next release): HTTP attempts in all; use --llm-retries "
        "(attempts - 1)", None, minimum=1)
    llm_retry_delay: float = option("first backoff delay (s)", _D.retry_initial_delay,
                                    minimum=0)
    llm_max_wait: float = option("seconds of retry waits per request, at most (default "
                                 "%(default)s; 0: no bound)", _D.max_wait_s, minimum=0)
    llm_run_wait: float = option("seconds of retry waits in a row without an answer before "
                                 "the stage stops, resumable (default %(default)s; 0: no "
                                 "bound)", _D.run_wait_s, minimum=0)
    llm_retry_failed: bool = option("ask again where the cache holds a failure", False)


def add_llm_args(parser: argparse.ArgumentParser) -> None:
    """The ``--llm`` options every LLM stage shares."""
    add_options(parser, LLMOptions, title="LLM")


def llm_from_args(args: argparse.Namespace, cache_path: str | Path | None) -> BaseLLM:
    """The client the ``--llm`` options ask for (``cache_path``: the work dir's LLM cache)."""
    return make_llm(args.llm, cache_path, llm_config_from_args(args))


def llm_config_from_args(args: argparse.Namespace) -> LLMConfig:
    return LLMConfig(
        rpm=args.llm_rpm,
        max_reasks=args.llm_max_reasks,
        timeout_s=args.llm_timeout,
        retry_attempts=_attempts(args),
        retry_initial_delay=args.llm_retry_delay,
        max_wait_s=getattr(args, "llm_max_wait", _D.max_wait_s),
        run_wait_s=getattr(args, "llm_run_wait", _D.run_wait_s),
        retry_failed=args.llm_retry_failed,
    )


def _attempts(args: argparse.Namespace) -> int:
    """HTTP attempts per ask: ``--llm-retries`` + 1 (retries count the tries after the first,
    as ``--retries`` and ``--search-retries`` do); ``--llm-attempts`` is the old meaning of
    ``--llm-retries``, accepted with a deprecation line for one release."""
    retries, attempts = getattr(args, "llm_retries", None), getattr(args, "llm_attempts", None)
    if retries is not None and attempts is not None:
        from builder.stagekit import StageInputError

        raise StageInputError("give --llm-retries or the deprecated --llm-attempts, not both")
    if attempts is not None:
        log.warning("--llm-attempts is deprecated and goes in the next release: --llm-attempts "
                    "%d is --llm-retries %d (retries: the tries after the first)", attempts,
                    attempts - 1)
        return attempts
    if retries is not None:
        log.info("--llm-retries %d: %d HTTP attempts (since this release --llm-retries counts "
                 "the retries after the first attempt, as --retries does; it counted attempts "
                 "before)", retries, retries + 1)
        return retries + 1
    return _D.retry_attempts
