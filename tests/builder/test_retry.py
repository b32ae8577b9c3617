"""The builder's one retry policy (``builder.retry``): attempts, backoff, server waits."""

from __future__ import annotations

import asyncio

import pytest

from builder.retry import Backoff, call, call_async


def scripted(results: list):
    """A call that returns the next scripted result (and counts its calls)."""
    it = iter(results)
    calls = []

    def fn():
        calls.append(1)
        return next(it)

    return fn, calls


def test_backoff_doubles_with_jitter_and_caps():
    sleeps: list[float] = []
    fn, calls = scripted(["busy"] * 5)
    tried = call(fn, Backoff(retries=4, first=5.0, cap=12.0), lambda r: r == "busy",
                 sleep=sleeps.append)
    assert (tried.result, tried.attempts, tried.gave_up, len(calls)) == ("busy", 5, "attempts", 5)
    assert len(sleeps) == 4
    for got, base in zip(sleeps, (5.0, 10.0, 12.0, 12.0), strict=True):
        assert base <= got <= base * 1.5


def test_stops_at_the_first_result_that_needs_no_retry():
    sleeps: list[float] = []
    fn, _ = scripted(["busy", "ok", "never asked"])
    retried = []
    tried = call(fn, Backoff(3, 1.0, 60.0), lambda r: r == "busy", sleep=sleeps.append,
                 on_retry=lambda r, n, d: retried.append((r, n, d)))
    assert (tried.result, tried.attempts, tried.gave_up) == ("ok", 2, None)
    assert [(r, n) for r, n, _ in retried] == [("busy", 1)] and retried[0][2] == sleeps[0]


def test_no_retries_and_exceptions_propagate_at_once():
    fn, calls = scripted(["busy"])
    tried = call(fn, Backoff(0, 1.0, 1.0), lambda r: r == "busy", sleep=pytest.fail)
    assert (tried.attempts, tried.gave_up, len(calls)) == (1, "attempts", 1)

    def boom():
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        call(boom, Backoff(5, 1.0, 1.0), lambda r: True, sleep=pytest.fail)


def test_server_wait_replaces_the_backoff_and_a_long_one_gives_up():
    async def run(results: list[tuple[str, float | None]]):
        sleeps: list[float] = []

        async def sleep(s: float) -> None:
            sleeps.append(s)

        it = iter(results)

        async def fn():
            return next(it)

        tried = await call_async(fn, Backoff(3, 1.0, 60.0, max_server_wait=5.0),
                                 lambda r: r[0] == "429", server_wait=lambda r: r[1],
                                 sleep=sleep)
        return tried, sleeps

    tried, sleeps = asyncio.run(run([("429", 2.0), ("429", None), ("200", None)]))
    assert (tried.result, tried.attempts, tried.gave_up) == (("200", None), 3, None)
    assert sleeps[0] == 2.0 and 2.0 <= sleeps[1] <= 3.0  # Retry-After, then backoff 2 s
    tried, sleeps = asyncio.run(run([("429", 3600.0)]))
    assert (tried.attempts, tried.gave_up, sleeps) == (1, "server_wait", [])


def test_call_async_awaits_what_a_plain_function_returns():
    """The downloader passes ``lambda: self._attempt(...)``: a plain function returning a
    coroutine, which must be awaited and retried like a coroutine function."""
    it = iter(["busy", "ok"])

    async def answer() -> str:
        return next(it)

    async def no_wait(_: float) -> None:
        pass

    tried = asyncio.run(call_async(lambda: answer(), Backoff(3, 1.0, 1.0), lambda r: r == "busy",
                                   sleep=no_wait))
    assert (tried.result, tried.attempts, tried.gave_up) == ("ok", 2, None)
