"""The Gemini client through the real google-genai library against the fake server."""

from __future__ import annotations

import base64
import json
import time

import pytest
from pydantic import BaseModel

from builder.llm.base import ImagePart, LLMConfig, LLMSetupError
from builder.llm.cache import LLMCache
from builder.llm.client import make_llm
from builder.llm.gemini import GeminiLLM
from builder.llm.offline import OfflineLLM, schema_example
from tests.fakes.gemini import FakeGemini, answer, error, slow

pytestmark = pytest.mark.integration

KEY = "AIzaFAKE-sentinel-key-0123456789"


def one_of(values, allowed, what):
    """A validator: every label ``values(answer)`` returns must be in ``allowed``."""
    def check(answer):
        bad = sorted({v for v in values(answer) if v not in set(allowed)})
        return f"{what} outside the allowed set: {bad[:10]}" if bad else None
    return check


class Tags(BaseModel):
    labels: list[str]
    note: str


@pytest.fixture
def fake():
    with FakeGemini() as f:
        yield f


def make(fake, tmp_path, **cfg) -> GeminiLLM:
    base = dict(
        base_url=fake.url,
        retry_initial_delay=0.01,
        retry_max_delay=0.05,
        rpm=0,
        timeout_s=5,
        retries=2,
    )
    base.update(cfg)
    return GeminiLLM("gemini-fake", LLMCache(tmp_path / "llm.sqlite"), KEY, LLMConfig(**base))


GOOD = {"labels": ["a", "b"], "note": "ok"}


def test_valid_answer_then_cache_makes_zero_calls(fake, tmp_path):
    fake.push(answer(GOOD, prompt_tokens=5, output_tokens=3))
    llm = make(fake, tmp_path)
    res = llm.generate_structured("tag this", Tags, template_sha="t1", params={"x": 1})
    assert res.ok and res.value == Tags(**GOOD) and not res.cached and res.attempts == 1
    (call,) = fake.calls()
    assert call.model == "gemini-fake" and call.path.startswith("/v1")
    assert call.headers["x-goog-api-key"] == KEY
    gen = call.json["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    assert set(gen["responseSchema"]["properties"]) == {"labels", "note"}
    assert gen["temperature"] == 0.0
    assert call.prompt == "tag this"
    assert llm.usage.api_calls == 1 and llm.usage.prompt_tokens == 5
    assert llm.usage.output_tokens == 3 and llm.usage.total_tokens == 8

    # a second client on the same cache: zero API calls
    llm2 = make(fake, tmp_path)
    res2 = llm2.generate_structured("tag this", Tags, template_sha="t1", params={"x": 1})
    assert res2.ok and res2.cached and res2.value == res.value
    assert len(fake.calls()) == 1 and llm2.usage.api_calls == 0 and llm2.usage.cache_hits == 1
    # any part of the key changes the request
    fake.push(answer(GOOD), answer(GOOD), answer(GOOD))
    llm2.generate_structured("tag this", Tags, template_sha="t2", params={"x": 1})
    llm2.generate_structured("tag this", Tags, template_sha="t1", params={"x": 2})
    llm2.generate_structured("tag that", Tags, template_sha="t1", params={"x": 1})
    assert len(fake.calls()) == 4


def test_429_then_success_is_retried_by_http_options(fake, tmp_path):
    fake.push(error(429, "quota"), error(503), answer(GOOD))
    llm = make(fake, tmp_path)
    res = llm.generate_structured("p", Tags)
    assert res.ok and res.attempts == 1  # one ask; the HTTP layer retried twice
    assert len(fake.calls()) == 3 and llm.usage.api_errors == 0


def test_persistent_500_is_an_error_not_cached(fake, tmp_path):
    fake.push(error(500), error(500), error(500))
    llm = make(fake, tmp_path, retries=2)
    res = llm.generate_structured("p", Tags)
    assert res.status == "error" and "500" in res.error and res.value is None
    assert len(fake.calls()) == 3 and llm.usage.api_errors == 1
    assert llm.cache.count() == 0
    fake.push(answer(GOOD))
    assert llm.generate_structured("p", Tags).ok  # the next run asks again


def test_malformed_json_is_reasked_with_the_reason(fake, tmp_path):
    fake.push(answer("{not json"), answer(GOOD))
    llm = make(fake, tmp_path)
    res = llm.generate_structured("p", Tags)
    assert res.ok and res.attempts == 2 and llm.usage.reasks == 1
    second = fake.calls()[1].prompt
    assert second.startswith("p\n\nYour previous answer was rejected (invalid JSON")


def test_schema_violation_fails_after_bounded_reasks_and_keeps_raw(fake, tmp_path):
    bad = {"labels": "not-a-list", "note": 3}
    fake.respond_with(lambda req: answer(bad))
    llm = make(fake, tmp_path, max_reasks=2)
    res = llm.generate_structured("p", Tags)
    assert res.status == "failed" and res.value is None
    assert res.error.startswith("schema mismatch") and json.loads(res.raw) == bad
    assert res.attempts == 3 and len(fake.calls()) == 3 and llm.usage.failures == 1
    # the failure is cached with its raw text: a re-run makes no call
    llm2 = make(fake, tmp_path, max_reasks=2)
    again = llm2.generate_structured("p", Tags)
    assert again.status == "failed" and again.cached and again.raw == res.raw
    assert len(fake.calls()) == 3
    # --llm-retry-failed asks again
    fake.respond_with(lambda req: answer(GOOD))
    llm3 = make(fake, tmp_path, max_reasks=2, retry_failed=True)
    assert llm3.generate_structured("p", Tags).ok and len(fake.calls()) == 4


def test_labels_outside_the_allowed_set_are_rejected(fake, tmp_path):
    fake.push(answer({"labels": ["a", "zzz"], "note": ""}), answer({"labels": ["b"], "note": ""}))
    llm = make(fake, tmp_path)
    check = one_of(lambda t: t.labels, ["a", "b"], "labels")
    res = llm.generate_structured("p", Tags, validate=check)
    assert res.ok and res.value.labels == ["b"] and res.attempts == 2
    assert "labels outside the allowed set: ['zzz']" in fake.calls()[1].prompt


def test_slow_answers_time_out_then_succeed(fake, tmp_path):
    fake.push(slow(answer(GOOD), 0.3))
    llm = make(fake, tmp_path, timeout_s=2)
    assert llm.generate_structured("fast enough", Tags).ok
    fake.push(slow(answer(GOOD), 1.5), slow(answer(GOOD), 1.5))
    llm = make(fake, tmp_path, timeout_s=0.4, retries=1)
    t0 = time.monotonic()
    res = llm.generate_structured("too slow", Tags)
    assert res.status == "error" and "Timeout" in res.error
    assert time.monotonic() - t0 < 2.5 and len(fake.calls("generateContent")) == 3


def test_image_parts_are_sent_inline_and_enter_the_cache_key(fake, tmp_path):
    fake.respond_with(lambda req: answer(GOOD))
    llm = make(fake, tmp_path)
    a, b = ImagePart(b"\x89PNG-a", "image/png"), ImagePart(b"jpeg-b", "image/jpeg")
    r1 = llm.generate_structured("which", Tags, images=[a, b])
    (call,) = fake.calls()
    assert [base64.b64decode(i["data"]) for i in call.images] == [a.data, b.data]
    assert [i.get("mimeType") or i.get("mime_type") for i in call.images] == [
        "image/png",
        "image/jpeg",
    ]
    assert call.parts[-1]["text"] == "which"
    r2 = llm.generate_structured("which", Tags, images=[a, ImagePart(b"other", "image/jpeg")])
    assert r1.key != r2.key and len(fake.calls()) == 2
    assert llm.generate_structured("which", Tags, images=[a, b]).cached


def test_rate_limit_spaces_requests(fake, tmp_path):
    fake.respond_with(lambda req: answer(GOOD))
    llm = make(fake, tmp_path, rpm=600)  # one request per 0.1 s
    llm.client()  # build the genai client first: its set-up is not a request
    for i in range(4):
        llm.generate_structured(f"p{i}", Tags)
    times = [c.time for c in fake.calls()]
    assert len(times) == 4 and times[-1] - times[0] >= 0.28


def test_key_appears_only_in_the_request_header(fake, tmp_path, caplog):
    caplog.set_level("DEBUG")
    fake.push(error(429), answer({"labels": 1}), answer(GOOD))
    llm = make(fake, tmp_path)
    assert llm.generate_structured("p", Tags).ok
    assert KEY not in repr(llm) and KEY not in caplog.text
    for call in fake.calls():
        assert KEY.encode() not in call.body
    llm.cache.close()
    for f in tmp_path.iterdir():
        assert KEY.encode() not in f.read_bytes(), f


def test_make_llm_specs_and_missing_key(tmp_path):
    with pytest.raises(LLMSetupError, match="GEMINI_API_KEY"):
        make_llm("gemini:gemini-2.5-flash", None, env={})
    with pytest.raises(LLMSetupError, match="unknown --llm"):
        make_llm("openai:gpt", None, env={})
    llm = make_llm("gemini", None, env={"GOOGLE_API_KEY": KEY})
    assert isinstance(llm, GeminiLLM) and llm.model == "gemini-2.5-flash"
    assert llm.spec == "gemini:gemini-2.5-flash"
    off = make_llm("offline", tmp_path / "c.sqlite", env={})
    assert isinstance(off, OfflineLLM) and off.cache is None  # offline answers are not cached
    assert not (tmp_path / "c.sqlite").exists()


def test_offline_is_deterministic_and_validated(tmp_path):
    llm = OfflineLLM()
    r1 = llm.generate_structured("p", Tags)
    r2 = OfflineLLM().generate_structured("p", Tags)
    seed = llm.prepare("p", Tags).input_sha
    assert r1.ok and r1.value == r2.value
    assert r1.value == Tags(labels=[f"offline-{seed[:8]}"], note=f"offline-{seed[:8]}")
    assert schema_example(Tags, "abc") == {"labels": ["offline-abc"], "note": "offline-abc"}
    r3 = llm.generate_structured("p", Tags, offline=lambda: {"labels": ["x"], "note": "n"})
    assert r3.value == Tags(labels=["x"], note="n") and llm.usage.api_calls == 0
    # an offline answer that breaks the validator is a recorded failure, not a value
    check = one_of(lambda t: t.labels, ["a"], "labels")
    r4 = llm.generate_structured(
        "p", Tags, validate=check, offline=lambda: {"labels": ["x"], "note": ""}
    )
    assert r4.status == "failed" and "outside the allowed set" in r4.error


def test_connection_refused_is_an_error_and_v1beta_is_served(fake, tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    llm = make(fake, tmp_path, base_url=f"http://127.0.0.1:{port}", retries=1)
    res = llm.generate_structured("p", Tags)
    assert res.status == "error" and "Connect" in res.error and llm.usage.api_errors == 1
    fake.push(answer(GOOD))
    beta = make(fake, tmp_path, api_version="v1beta")
    assert beta.generate_structured("p", Tags).ok
    assert fake.calls()[0].path == "/v1beta/models/gemini-fake:generateContent"


def test_client_is_created_once_under_concurrent_first_use(monkeypatch):
    """Threads racing for the lazily created client all get the same one."""
    import threading
    import time as _time

    from builder.llm.gemini import GeminiLLM

    made = []

    class SlowClient:
        def __init__(self, **kw):
            _time.sleep(0.05)
            made.append(self)

    import google.genai as genai

    monkeypatch.setattr(genai, "Client", SlowClient)
    llm = GeminiLLM("gemini-test", None, api_key="k")
    got = []
    threads = [threading.Thread(target=lambda: got.append(llm.client())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and all(c is made[0] for c in got)
