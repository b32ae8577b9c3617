"""The builder's LLM client: ``--llm gemini:MODEL`` or ``--llm offline``. The API key comes
from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY`` and goes to the ``genai.Client`` alone."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from builder.llm.base import DEFAULT_MODEL, DEFAULT_SPEC, BaseLLM, LLMConfig, LLMSetupError
from builder.llm.cache import LLMCache
from builder.llm.offline import OfflineLLM

KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


def make_llm(spec: str | None, cache_path: str | Path | None, config: LLMConfig | None = None,
             env: Mapping[str, str] | None = None) -> BaseLLM:
    """``offline`` or ``gemini[:MODEL]``; raises :class:`LLMSetupError` with one line."""
    spec = (spec or DEFAULT_SPEC).strip()
    if spec == "offline":
        return OfflineLLM(None, config)  # computed, never cached: its inputs are the stage's
    provider, _, model = spec.partition(":")
    if provider != "gemini":
        raise LLMSetupError(f"unknown --llm {spec!r}: use 'gemini:MODEL' or 'offline'")
    env = os.environ if env is None else env
    key = next((env[name] for name in KEY_ENV_VARS if env.get(name)), None)
    if not key:
        raise LLMSetupError("no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), or use "
                            "--llm offline")
    from builder.llm.gemini import GeminiLLM

    cache = LLMCache(cache_path) if cache_path is not None else None
    return GeminiLLM(model or DEFAULT_MODEL, cache, key, config)


def llm_for(config: LLMConfig, cache_path: str | Path | None) -> BaseLLM:
    """The client a stage's ``--llm`` options ask for (``cache_path``: the work dir's cache)."""
    return make_llm(config.spec, cache_path, config)
