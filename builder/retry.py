"""The builder's one retry policy (searches, downloads, Gemini calls), on tenacity: a call is
repeated while its result asks for it, after an exponential backoff with jitter or the server's
``Retry-After``, at most ``1 + retries`` attempts within a ``deadline`` (docs/crawl.md)."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")

JITTER = (1.0, 1.5)


@dataclass(frozen=True)
class Backoff:
    """How often and how long to retry."""

    retries: int  # extra attempts after the first
    first: float  # first wait in seconds, doubled per attempt
    cap: float  # no wait (before jitter) is longer
    max_server_wait: float | None = None  # a longer server-given wait gives up
    deadline: float | None = None  # the waits of one call add up to at most this many seconds

    def delay(self, attempt: int) -> float:
        """The jittered wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.cap, self.first * 2 ** (attempt - 1)) * random.uniform(*JITTER)


@dataclass
class Tried(Generic[T]):
    """The last result, its attempts, and why the retries stopped: None (no retry needed),
    ``"attempts"``, ``"server_wait"`` (a wait over ``max_server_wait``) or ``"deadline"``."""

    result: T
    attempts: int
    gave_up: str | None


class _Policy(Generic[T]):
    """The tenacity callbacks of one call: when to retry, stop and wait, and what happened."""

    def __init__(self, backoff: Backoff, again: Callable[[T], bool],
                 server_wait: Callable[[T], float | None] | None,
                 on_retry: Callable[[T, int, float], None] | None):
        self.backoff, self.again, self.server_wait, self.on_retry = (
            backoff, again, server_wait, on_retry)
        self.gave_up: str | None = None
        self.attempts = 0
        self.waited = 0.0  # seconds waited between the attempts so far
        self._drawn: tuple[int, float] = (0, 0.0)  # (attempt, its wait)

    def _wait_of(self, result: T) -> float | None:
        return self.server_wait(result) if self.server_wait is not None else None

    def retry(self, state: Any) -> bool:
        self.attempts = state.attempt_number
        return not state.outcome.failed and self.again(state.outcome.result())

    def stop(self, state: Any) -> bool:
        if state.attempt_number > self.backoff.retries:
            self.gave_up = "attempts"
            return True
        wait, cap = self._wait_of(state.outcome.result()), self.backoff.max_server_wait
        if wait is not None and cap is not None and wait > cap:
            self.gave_up = "server_wait"
            return True
        deadline = self.backoff.deadline
        if deadline is not None and self.waited + self.wait(state) > deadline:
            self.gave_up = "deadline"
            return True
        return False

    def wait(self, state: Any) -> float:
        """The wait after this attempt, drawn once (tenacity asks stop and wait in an order
        that changed between its versions)."""
        if self._drawn[0] != state.attempt_number:
            wait = self._wait_of(state.outcome.result())
            self._drawn = (state.attempt_number,
                           wait if wait is not None else self.backoff.delay(state.attempt_number))
        return self._drawn[1]

    def before_sleep(self, state: Any) -> None:
        self.waited += state.next_action.sleep
        if self.on_retry is not None:
            self.on_retry(state.outcome.result(), state.attempt_number, state.next_action.sleep)

    def kwargs(self) -> dict[str, Any]:
        return dict(stop=self.stop, wait=self.wait, retry=self.retry,
                    before_sleep=self.before_sleep, reraise=True,
                    retry_error_callback=lambda state: state.outcome.result())

    def tried(self, result: T) -> Tried[T]:
        return Tried(result, self.attempts, self.gave_up if self.again(result) else None)


def call(fn: Callable[[], T], backoff: Backoff, again: Callable[[T], bool], *,
         server_wait: Callable[[T], float | None] | None = None,
         on_retry: Callable[[T, int, float], None] | None = None,
         sleep: Callable[[float], None] = time.sleep) -> Tried[T]:
    """Call ``fn`` until ``again(result)`` is false or the policy gives up."""
    from tenacity import Retrying

    policy = _Policy(backoff, again, server_wait, on_retry)
    return policy.tried(Retrying(sleep=sleep, **policy.kwargs())(fn))


async def call_async(fn: Callable[[], Awaitable[T]], backoff: Backoff, again: Callable[[T], bool],
                     *, server_wait: Callable[[T], float | None] | None = None,
                     on_retry: Callable[[T, int, float], None] | None = None,
                     sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> Tried[T]:
    """The same for a coroutine function (waits with ``await sleep(...)``)."""
    from tenacity import AsyncRetrying

    async def attempt() -> T:  # a coroutine function: tenacity calls a plain one without await
        return await fn()

    policy = _Policy(backoff, again, server_wait, on_retry)
    return policy.tried(await AsyncRetrying(sleep=sleep, **policy.kwargs())(attempt))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date), else None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
