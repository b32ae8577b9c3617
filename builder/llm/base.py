"""The LLM client's core, one interface for Gemini and its offline twin:
:meth:`BaseLLM.generate_structured` asks for JSON of a pydantic schema, validates it, re-asks a
bounded number of times and returns an :class:`LLMResult`, through the response cache."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from builder.catalog import brief, clip_raw
from builder.llm.cache import LLMCache, cache_key
from core.files import sha256_bytes, sha256_text
from core.options import option

log = logging.getLogger(__name__)

Validator = Callable[[Any], "str | None"]


class LLMSetupError(ValueError):
    """Bad ``--llm``, a missing or rejected credential, an unknown model: one line, exit 2."""


class LLMRefused(Exception):
    """The service blocked the prompt or the answer: ``reason`` names the block."""

    def __init__(self, reason: str, text: str | None = None):
        super().__init__(reason)
        self.reason, self.text = reason, text


@dataclass(frozen=True)
class ImagePart:
    """An image sent with a prompt (bytes and MIME type)."""

    data: bytes
    mime_type: str = "image/jpeg"

    @property
    def sha256(self) -> str:
        return sha256_bytes(self.data)


DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_SPEC = f"gemini:{DEFAULT_MODEL}"


@dataclass
class LLMConfig:
    """The client's settings; those with a flag are every LLM stage's ``--llm*`` options."""

    spec: str = option(f"gemini:MODEL or offline (default {DEFAULT_SPEC})", DEFAULT_SPEC,
                       flags=("--llm",))
    rpm: float = option("requests per minute (0 = no limit)", 60.0, flags=("--llm-rpm",),
                        minimum=0)
    max_reasks: int = option("re-asks after an invalid answer", 2, flags=("--llm-max-reasks",),
                             minimum=0)
    timeout_s: float = option("seconds per HTTP request, all of it: connect, upload, answer",
                              120.0, flags=("--llm-timeout",), above=0)
    retries: int = option("HTTP retries on 429/5xx/timeouts: extra attempts after the first "
                          "(Retry-After honoured)", 5, flags=("--llm-retries",), minimum=0)
    retry_initial_delay: float = option("first backoff delay (s)", 2.0,
                                        flags=("--llm-retry-delay",), minimum=0)
    retry_failed: bool = option("ask again where the cache holds a failure", False,
                                flags=("--llm-retry-failed",))
    temperature: float = 0.0
    retry_max_delay: float = 60.0
    max_retry_after: float = 300.0  # a longer server-given wait gives up (a later run asks)
    max_wait_s: float = option("seconds of retry waits per request, at most (default "
                               "%(default)s; 0: no bound)", 60.0, flags=("--llm-max-wait",),
                               minimum=0)
    run_wait_s: float = option("seconds of retry waits in a row without an answer before the "
                               "stage stops, resumable (default %(default)s; 0: no bound)", 90.0,
                               flags=("--llm-run-wait",), minimum=0)
    base_url: str | None = None
    api_version: str | None = None


@dataclass
class LLMUsage:
    """Summed per stage run and written to ``stage_runs.usage_json``."""

    requests: int = 0  # generate_structured calls
    api_calls: int = 0  # asks sent to the model, re-asks included (HTTP retries not counted)
    cache_hits: int = 0
    reasks: int = 0
    failures: int = 0  # invalid after all re-asks
    refusals: int = 0  # blocked by the service (safety)
    api_errors: int = 0  # transport errors after the HTTP retries
    http_retries: int = 0  # HTTP attempts repeated after 429/5xx/timeouts
    prompt_tokens: int = 0
    output_tokens: int = 0
    thought_tokens: int = 0
    total_tokens: int = 0

    def add_tokens(self, tokens: Mapping[str, int]) -> None:
        for k in ("prompt_tokens", "output_tokens", "thought_tokens", "total_tokens"):
            setattr(self, k, getattr(self, k) + int(tokens.get(k, 0) or 0))


@dataclass
class LLMRequest:
    """One structured request, with its cache identity."""

    prompt: str
    schema: type[BaseModel]
    images: tuple[ImagePart, ...]
    template_sha: str
    params: dict[str, Any]
    input_sha: str
    key: str


@dataclass
class LLMResult:
    """``ok`` (``value`` validated), ``failed`` (invalid after the re-asks), ``refused``
    (blocked) or ``error`` (transport, never cached; ``transient``: a later ask may succeed)."""

    status: str
    value: Any = None
    raw: str | None = None
    error: str | None = None
    attempts: int = 0
    cached: bool = False
    key: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    transient: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class BaseLLM:
    """Cache, validation, re-asks and usage; subclasses implement :meth:`_complete`."""

    provider = "base"

    def __init__(self, model: str, cache: LLMCache | None, config: LLMConfig | None = None):
        self.model = model
        self.cache = cache
        self.config = config or LLMConfig()
        self.usage = LLMUsage()

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}" if self.provider != "offline" else "offline"

    def reset_usage(self) -> None:
        """Start a new count (one per stage run)."""
        self.usage = LLMUsage()

    def prepare(self, prompt: str, schema: type[BaseModel], *,
                images: Sequence[ImagePart] | None = None, template_sha: str = "",
                params: Mapping[str, Any] | None = None) -> LLMRequest:
        """The request and its cache key (the key never includes a credential); a changed
        schema is another request."""
        images = tuple(images or ())
        full = {"temperature": self.config.temperature, **dict(params or {})}
        full["schema_sha"] = sha256_text(json.dumps(schema.model_json_schema(), sort_keys=True))
        input_sha = sha256_text(prompt + "".join(f"\n{im.mime_type}:{im.sha256}" for im in images))
        key = cache_key(self.provider, self.model, template_sha, full, input_sha)
        return LLMRequest(prompt, schema, images, template_sha, full, input_sha, key)

    def lookup(self, req: LLMRequest, validate: Validator | None = None) -> LLMResult | None:
        """The cached result for ``req`` (re-validated), or None."""
        if self.cache is None:
            return None
        hit = self.cache.get(req.key)
        if hit is None or (hit.status in ("failed", "refused") and self.config.retry_failed):
            return None
        if hit.status == "ok":
            value, err = self.check_text(req, hit.text, validate)
            if err is not None:  # the validator changed since it was cached: ask again
                return None
            return LLMResult("ok", value, hit.text, None, hit.attempts, True, req.key, hit.usage)
        return LLMResult(hit.status, None, hit.text, hit.error, hit.attempts, True, req.key,
                         hit.usage)

    def check_text(self, req: LLMRequest, text: str | None, validate: Validator | None = None
                   ) -> tuple[Any, str | None]:
        """Parse and validate a model text: (value, None) or (None, reason)."""
        if text is None or not text.strip():
            return None, "empty answer"
        try:
            value = req.schema.model_validate_json(text)
        except ValidationError as exc:
            kind = "invalid JSON" if "json_invalid" in str(exc) else "schema mismatch"
            return None, f"{kind}: {brief(str(exc))}"
        if validate is not None:
            reason = validate(value)
            if reason:
                return None, f"rejected: {brief(reason)}"
        return value, None

    def store(self, req: LLMRequest, result: LLMResult) -> LLMResult:
        """Cache an ok, failed or refused result (transport errors are not); returns it."""
        if self.cache is None or result.status not in ("ok", "failed", "refused"):
            return result
        self.cache.put(
            req.key, provider=self.provider, model=self.model, template_sha=req.template_sha,
            params=req.params, input_sha=req.input_sha, status=result.status,
            text=result.raw if result.ok else clip_raw(result.raw),  # an ok text is the value
            error=result.error, attempts=result.attempts, usage=result.usage)
        return result

    def generate_structured(
        self, prompt: str, schema: type[BaseModel], *, images: Sequence[ImagePart] | None = None,
        template_sha: str = "", params: Mapping[str, Any] | None = None,
        validate: Validator | None = None, offline: Callable[[], Any] | None = None,
    ) -> LLMResult:
        """Ask for JSON matching ``schema``; cached, validated, re-asked, never raises on the
        model's answers (transport errors come back as ``status='error'``)."""
        req = self.prepare(prompt, schema, images=images, template_sha=template_sha, params=params)
        self.usage.requests += 1
        hit = self.lookup(req, validate)
        if hit is not None:
            self.usage.cache_hits += 1
            return hit
        tokens: dict[str, int] = {}
        text: str | None = None
        reason = "no answer"
        asked = prompt
        for attempts in range(1, 2 + max(0, self.config.max_reasks)):
            if attempts > 1:
                self.usage.reasks += 1
                asked = (f"{prompt}\n\nYour previous answer was rejected ({reason}). Answer "
                         "again with JSON only, matching the response schema exactly.")
            try:
                text, used = self._complete(asked, req, offline)
            except (ModuleNotFoundError, LLMSetupError):
                raise  # a missing library, a rejected key: ours to fix, not the request's
            except LLMRefused as exc:  # a safety block: asking again gets the same block
                self.usage.refusals += 1
                log.info("LLM request refused (%s): %s", self.spec, exc.reason)
                return self.store(req, LLMResult("refused", None, exc.text, exc.reason, attempts,
                                                 False, req.key, tokens))
            except Exception as exc:  # transport: 429/5xx after retries, timeouts, refused
                self.usage.api_errors += 1
                notes = "; ".join(getattr(exc, "__notes__", None) or [])
                msg = f"{type(exc).__name__}: {brief(str(exc))}" + (f" ({notes})" if notes else "")
                log.warning("LLM request failed (%s): %s", self.spec, msg)
                return LLMResult("error", None, text, msg, attempts, False, req.key, tokens,
                                 transient=self.transient(exc))
            for k, v in used.items():
                tokens[k] = tokens.get(k, 0) + int(v or 0)
            self.usage.add_tokens(used)
            value, err = self.check_text(req, text, validate)
            if err is None:
                return self.store(req, LLMResult("ok", value, text, None, attempts, False,
                                                 req.key, tokens))
            reason = err
            log.info("LLM answer rejected (attempt %d): %s", attempts, err)
        self.usage.failures += 1
        return self.store(req, LLMResult("failed", None, text, reason, attempts, False, req.key,
                                         tokens))

    def _complete(self, prompt: str, req: LLMRequest, offline: Callable[[], Any] | None
                  ) -> tuple[str | None, dict[str, int]]:
        raise NotImplementedError  # abstract: GeminiLLM and OfflineLLM implement it

    def transient(self, exc: BaseException) -> bool:
        """Whether a later ask may succeed after ``exc`` (default: yes)."""
        return True
