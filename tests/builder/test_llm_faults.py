"""The Gemini client under the faults of issue 15, through the real google-genai client against
the fake server: a trickling answer ends at ``--llm-timeout`` (the whole request, not each
read), ``Retry-After`` and Google's ``RetryInfo`` set the wait of the one retry policy, safety
blocks are ``refused`` with the block reason, a rejected key or model stops with one line, and
transient errors are told from requests the API rejects."""

from __future__ import annotations

import re
import time

import pytest
from pydantic import BaseModel

from builder.catalog import RAW_CAP
from builder.llm.base import LLMConfig, LLMSetupError
from builder.llm.cache import LLMCache
from builder.llm.gemini import GeminiLLM
from tests.fakes.gemini import FakeGemini, answer, blocked, error, finished, trickle

pytestmark = pytest.mark.integration

KEY = "AIzaFAKE-faults-sentinel-0123456789"


class Tags(BaseModel):
    labels: list[str]


GOOD = {"labels": ["a"]}


@pytest.fixture
def fake():
    with FakeGemini() as f:
        yield f


def make(fake, tmp_path, **cfg) -> tuple[GeminiLLM, list[float]]:
    base = dict(base_url=fake.url, retry_initial_delay=0.01, retry_max_delay=0.05, rpm=0,
                timeout_s=5, retries=2)
    llm = GeminiLLM("gemini-fake", LLMCache(tmp_path / "llm.sqlite"), KEY,
                    LLMConfig(**{**base, **cfg}))
    sleeps: list[float] = []
    llm.sleep = sleeps.append  # the retry policy's waits, recorded instead of slept
    return llm, sleeps


@pytest.mark.timeout(60)
def test_a_trickling_answer_ends_at_the_timeout(fake, tmp_path):
    """200 bytes at 0.1 s a byte is 20 s; every read returns within the 1 s timeout, so only a
    deadline on the whole request ends it."""
    fake.push(trickle(answer(GOOD), 0.1), trickle(answer(GOOD), 0.1))
    llm, _ = make(fake, tmp_path, timeout_s=1.0, retries=1)
    t0 = time.monotonic()
    res = llm.generate_structured("p", Tags)
    elapsed = time.monotonic() - t0
    assert res.status == "error" and res.transient
    assert "the whole request took longer than 1s (--llm-timeout)" in res.error
    assert elapsed < 4.5 and len(fake.calls()) == 2  # two attempts of about 1 s each
    fake.push(answer(GOOD))
    assert llm.generate_structured("p", Tags).ok  # the connection pool is still usable


def test_retry_after_sets_the_wait(fake, tmp_path):
    fake.push(error(429, "quota", headers={"Retry-After": "3"}), error(503), answer(GOOD))
    llm, sleeps = make(fake, tmp_path)
    res = llm.generate_structured("p", Tags)
    assert res.ok and len(fake.calls()) == 3 and llm.usage.http_retries == 2
    assert sleeps[0] == 3.0 and sleeps[1] < 0.1  # the server's wait, then our backoff


def test_google_retry_info_sets_the_wait_and_a_long_one_gives_up(fake, tmp_path):
    fake.push(error(429, "quota", retry_delay="2.5s"), answer(GOOD))
    llm, sleeps = make(fake, tmp_path)
    assert llm.generate_structured("p", Tags).ok and sleeps == [2.5]
    fake.push(error(429, "daily quota", headers={"Retry-After": "7200"}))
    llm, sleeps = make(fake, tmp_path, max_retry_after=60)
    res = llm.generate_structured("q", Tags)
    assert res.status == "error" and res.transient and sleeps == []
    assert "asked to wait 7200s, over the cap of 60s: a later run asks again" in res.error
    assert len([c for c in fake.calls() if c.prompt == "q"]) == 1


def test_a_prompt_block_is_refused_with_its_reason_and_cached(fake, tmp_path):
    fake.push(blocked("SAFETY"))
    llm, _ = make(fake, tmp_path)
    res = llm.generate_structured("p", Tags)
    assert res.status == "refused" and res.attempts == 1 and llm.usage.refusals == 1
    assert res.error == "prompt blocked: SAFETY [HARM_CATEGORY_DANGEROUS_CONTENT]"
    assert len(fake.calls()) == 1  # a block is not re-asked
    again, _ = make(fake, tmp_path)
    hit = again.generate_structured("p", Tags)
    assert hit.status == "refused" and hit.cached and hit.error == res.error
    fake.push(answer(GOOD))
    retry, _ = make(fake, tmp_path, retry_failed=True)
    assert retry.generate_structured("p", Tags).ok and len(fake.calls()) == 2


def test_an_answer_blocked_by_finish_reason_is_refused(fake, tmp_path):
    fake.push(finished("SAFETY"), finished("PROHIBITED_CONTENT", '{"labels": ['))
    llm, _ = make(fake, tmp_path)
    res = llm.generate_structured("p", Tags)
    assert (res.status, res.error) == (
        "refused", "answer blocked: finishReason SAFETY [HARM_CATEGORY_HARASSMENT]")
    res2 = llm.generate_structured("p2", Tags)
    assert res2.status == "refused" and res2.raw == '{"labels": ['  # the partial text is kept
    fake.push(finished("STOP"))  # no text, not blocked: an empty answer, re-asked
    fake.push(answer(GOOD))
    assert llm.generate_structured("p3", Tags).ok


@pytest.mark.parametrize("reply, words", [
    (error(400, "API key not valid. Please pass a valid API key.", reason="API_KEY_INVALID"),
     "Gemini refused the API key (HTTP 400"),
    (error(403, "permission denied"), "Gemini refused the API key (HTTP 403"),
    (error(404, "models/gemini-fake is not found"), "Gemini does not know the model"),
])
def test_a_rejected_key_or_model_is_a_setup_error_not_an_item_failure(fake, tmp_path, reply,
                                                                       words):
    fake.push(reply)
    llm, _ = make(fake, tmp_path)
    with pytest.raises(LLMSetupError, match=re.escape(words)):
        llm.generate_structured("p", Tags)
    assert len(fake.calls()) == 1 and llm.cache.count() == 0


def test_transient_and_permanent_errors_are_told_apart(fake, tmp_path):
    fake.push(error(503), error(503), error(503))
    llm, _ = make(fake, tmp_path)
    down = llm.generate_structured("p", Tags)
    assert down.status == "error" and down.transient and len(fake.calls()) == 3
    fake.push(error(400, "Request contains an invalid argument."))
    bad = llm.generate_structured("q", Tags)
    assert bad.status == "error" and not bad.transient and len(fake.calls()) == 4  # no retry


def test_a_huge_invalid_answer_is_clipped_where_it_is_kept(fake, tmp_path):
    huge = '{"labels": "' + "x" * 5_000_000
    fake.respond_with(lambda req: answer(huge))
    llm, _ = make(fake, tmp_path, max_reasks=0)
    res = llm.generate_structured("p", Tags)
    assert res.status == "failed" and len(res.raw) > 5_000_000  # the caller sees it all
    cached = llm.cache.get(res.key)
    assert len(cached.text.encode()) < RAW_CAP + 100
    assert cached.text.endswith(f"[truncated from {len(huge)} bytes; the first {RAW_CAP} kept]")


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def no_dns(monkeypatch) -> None:
    """Every host name fails to resolve, as on a machine without network (httpx resolves
    through ``socket.getaddrinfo``)."""
    import socket

    def fail(*a, **kw):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)


def unreachable(tmp_path, url: str, **cfg) -> tuple[GeminiLLM, list[float]]:
    base = dict(base_url=url, retry_initial_delay=1.0, retry_max_delay=8.0, rpm=0,
                timeout_s=5, retries=5)
    llm = GeminiLLM("gemini-fake", LLMCache(tmp_path / "llm.sqlite"), KEY,
                    LLMConfig(**{**base, **cfg}))
    sleeps: list[float] = []
    llm.sleep = sleeps.append
    return llm, sleeps


def test_a_name_that_does_not_resolve_stops_at_once_without_backoff(tmp_path, monkeypatch):
    no_dns(monkeypatch)
    llm, sleeps = unreachable(tmp_path, "http://gemini.example")
    with pytest.raises(LLMSetupError, match="Gemini cannot be reached: .*the host name does "
                                            "not resolve.*--llm offline"):
        llm.generate_structured("p", Tags)
    assert sleeps == [] and llm.usage.http_retries == 0


def test_refused_connections_wait_within_the_request_and_run_bounds(tmp_path):
    """Retried (transient) with backoff, the waits of one request at most max_wait_s; once
    the waits in a row pass run_wait_s the stage is stopped with one line."""
    llm, sleeps = unreachable(tmp_path, f"http://127.0.0.1:{closed_port()}", max_wait_s=10,
                              run_wait_s=16)
    first = llm.generate_structured("p", Tags)
    assert first.status == "error" and first.transient and "ConnectError" in first.error
    assert 0 < sum(sleeps) <= 10 and len(sleeps) >= 2  # 1-1.5, 2-3, 4-6: then 8 > 10 left
    with pytest.raises(LLMSetupError, match=r"Gemini has not answered through \d+ s of retry "
                                            r"waits, and the next would pass --llm-run-wait 16 "
                                            r"\(last: ConnectError"):
        llm.generate_structured("q", Tags)
    assert sum(sleeps) <= 16


def test_an_answer_resets_the_run_wait(fake, tmp_path):
    fake.push(error(503), error(503), answer(GOOD), error(503), error(503), answer(GOOD))
    llm, sleeps = unreachable(tmp_path, fake.url, retry_initial_delay=2.0, run_wait_s=10)
    assert llm.generate_structured("p", Tags).ok and llm.generate_structured("q", Tags).ok
    assert len(sleeps) == 4  # 2-3 + 4-6 twice: over 10 in all, never in a row
