"""The tagging stage under the faults of issue 15 (real google-genai client, fake Gemini on
127.0.0.1): transient failures are not the images' and are asked again; a service that is down
stops the stage; safety blocks are ``refused`` with the reason; raw invalid answers are kept
clipped; the progress bar says what it waits on; requests and Batch API jobs are split by size
(the 20 MB inline limit) and every job is resumed."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from builder.catalog import RAW_CAP, Catalog
from builder.tagging import stage as tagging
from builder.tagging.rules import Img
from tests.builder.test_tagging import (
    CONCEPTS,
    COUNTRIES,
    KEY,
    P_REPEAT,
    WHO,
    _tags,
    make_llm,
    respond,
)
from tests.fakes.gemini import FakeGemini, answer, blocked, error, slow
from tests.fakes.gemini_batch import FakeBatches
from tests.worlds import build_world

pytestmark = pytest.mark.integration

P_BLOCK = ("taxi", "THA", 0)  # the service blocks every request that holds this image


@pytest.fixture
def fake():
    with FakeGemini() as f:
        f.respond_with(respond)
        yield f


@pytest.fixture
def world(tmp_path):
    return build_world(tmp_path / "w", CONCEPTS, countries=COUNTRIES, per_cell=2,
                       tag_fn=lambda c, k, i: None)


def keys_of(req) -> list[tuple]:
    return [WHO[hashlib.sha256(base64.urlsafe_b64decode(im["data"])).hexdigest()]
            for im in req.images]


def _argv(fake, world, monkeypatch, *extra: str) -> list[str]:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("XCM_GEMINI_BASE_URL", fake.url)
    return ["--workdir", str(world.root), "--llm", "gemini:gemini-fake", "--llm-rpm", "0",
            "--llm-retries", "0", "--workers", "1", *extra]


def _states(world) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in _tags(world).values():
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def test_a_down_service_leaves_images_transient_stops_and_the_next_run_asks_again(
        fake, world, monkeypatch, capsys):
    fake.respond_with(lambda req: error(503, "overloaded"))
    argv = _argv(fake, world, monkeypatch, "--images-per-request", "2")
    assert tagging.main(argv) == 2  # nothing succeeded: a failed run, not a done one
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: tagging: none of 10 images succeeded (last: error: Server")
    with Catalog.open(world.root) as cat:
        run = cat.last_run("tagging")
    assert run["status"] == "failed"
    assert "stopped asking after 5 requests in a row failed with transient errors" in run[
        "summary"]
    assert "10 image(s) hit transient errors (429/5xx, timeouts, a failed batch job)" in run[
        "summary"]
    rows = _tags(world)
    assert len(rows) == 10 and {r["status"] for r in rows.values()} == {"transient"}
    assert {r["reason"] for r in rows.values()} == {"error: ServerError: 503 UNAVAILABLE. "
        "{'error': {'code': 503, 'message': 'overloaded', 'status': 'UNAVAILABLE'}}"}
    asked = len(fake.calls())
    assert 5 <= asked <= 6  # the stage stopped instead of asking every image (12 requests)
    fake.respond_with(respond)  # the service is back: the same command asks for all of them
    assert tagging.main(argv) == 0
    assert _states(world) == {"ok": 22, "refused": 1, "failed": 1}


def test_llm_retry_failed_asks_the_failed_images_again(fake, world, monkeypatch):
    argv = _argv(fake, world, monkeypatch)
    assert tagging.main(argv) == 0
    assert _tags(world)[P_REPEAT]["status"] == "failed"
    n = len(fake.calls())
    assert tagging.main(argv) == 0 and len(fake.calls()) == n  # a plain re-run asks nothing
    fake.respond_with(lambda req: answer({"images": [
        {"index": i, "concepts": [k[0]]} for i, k in enumerate(keys_of(req))]}))
    assert tagging.main([*argv, "--llm-retry-failed"]) == 0
    assert len(fake.calls()) == n + 1  # exactly the failed image, nothing else
    row = _tags(world)[P_REPEAT]
    assert (row["status"], json.loads(row["tags_json"])) == ("ok", ["craft"])


def test_a_safety_block_is_refused_with_the_block_reason(fake, world, monkeypatch):
    def respond_blocking(req):
        return blocked("SAFETY") if P_BLOCK in keys_of(req) else respond(req)

    fake.respond_with(respond_blocking)
    assert tagging.main(_argv(fake, world, monkeypatch)) == 0
    rows = _tags(world)
    row = rows[P_BLOCK]
    assert (row["status"], row["tags_json"]) == ("refused", None)
    assert row["reason"] == "refused: prompt blocked: SAFETY [HARM_CATEGORY_DANGEROUS_CONTENT]"
    # the other images of the blocked group were asked alone and tagged
    assert _states(world) == {"ok": 21, "refused": 2, "failed": 1}


def test_raw_invalid_answers_are_kept_clipped_and_say_so(fake, world, monkeypatch):
    huge = '{"images": "' + "y" * 2_000_000

    def respond_huge(req):
        keys = keys_of(req)
        return answer(huge) if len(keys) > 1 or keys[0] == P_REPEAT else respond(req)

    fake.respond_with(respond_huge)
    assert tagging.main(_argv(fake, world, monkeypatch, "--llm-max-reasks", "0")) == 0
    rows = _tags(world)
    assert rows[P_REPEAT]["status"] == "failed"
    note = f"[truncated from {len(huge)} bytes; the first {RAW_CAP} kept]"
    assert rows[P_REPEAT]["raw"].endswith(note)
    kept = [r["raw"] for r in rows.values() if r["raw"] is not None]
    assert all(len(r.encode()) <= RAW_CAP + 100 for r in kept)
    with Catalog.open(world) as cat:
        cat.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # 24 images each saw a 2 MB answer in its group: kept whole that was over 48 MB
    assert (world.root / "catalog.sqlite").stat().st_size < 2_000_000


def test_the_progress_bar_says_what_it_waits_on(fake, world, monkeypatch):
    monkeypatch.setattr(tagging, "WAIT_NOTE_EVERY", 0.1)
    fake.respond_with(lambda req: slow(respond(req), 0.8))

    class Bar:
        notes: list[str] = []

        def set_postfix_str(self, s, refresh=True):
            self.notes.append(s)

    bar = Bar()
    with Catalog.open(world) as cat:
        llm = make_llm(fake, world)
        ctx = tagging.TagContext(world, llm, *tagging.load_prompt(*tagging.PROMPT),
                                 tagging.concept_list(cat))
        fresh, _ = tagging.images_to_tag(cat)
    got = list(tagging.ask_all(ctx, tagging.chunk(fresh[:4], 2), 2, bar))
    assert len(got) == 2 and all(a.value is not None for _, a in got)
    waiting = [n for n in bar.notes if n]
    assert waiting and all(n.startswith("waiting on ") for n in waiting)
    assert "request(s), oldest " in waiting[-1]
    assert "(HTTP requests end at 5s, then retry)" in waiting[-1]
    assert bar.notes[-1] == ""  # cleared once the answer is in


def test_requests_are_split_by_bytes_not_only_by_count(tmp_path):
    imgs = [Img(f"{i:064x}", "jpg", "JPEG", ["x"]) for i in range(5)]
    big = {imgs[1].sha256, imgs[2].sha256, imgs[3].sha256}  # 7 MB as base64, the others 1 MB
    groups = tagging.chunk(imgs, 8, lambda im: 7_000_000 if im.sha256 in big else 1_000_000)
    assert [len(g.images) for g in groups] == [3, 2]  # 1 + 7 + 7, then 7 + 1 (18 MB budget)
    assert [len(g.images) for g in tagging.chunk(imgs, 2)] == [2, 2, 1]
    solo = tagging.chunk(imgs[:2], 8, lambda im: 30_000_000)
    assert [len(g.images) for g in solo] == [1, 1]  # an image over the budget goes alone


def test_batch_jobs_are_split_by_size_and_each_is_resumed(fake, world, monkeypatch, capsys):
    batches = FakeBatches(fake, polls_before_done=10**6, max_body_bytes=14_000)
    with Catalog.open(world) as cat:
        first = tagging.run_tagging(cat, make_llm(fake, world), images_per_request=8,
                                    batch=True, poll_interval=0.01, batch_timeout=0,
                                    batch_job_bytes=13_000)
        jobs = cat.query("SELECT job_name, state, requests_json FROM tag_batch_jobs"
                         " WHERE phase='first' ORDER BY submitted_at")
    assert first["batch_pending"] == 1 and first["batch_jobs_submitted"] >= 2
    assert len(jobs) == first["batch_jobs_submitted"]
    assert sum(len(json.loads(j["requests_json"])) for j in jobs) == 3  # every request, once
    assert max(batches.sizes) <= 14_000  # the fake's (the API's) limit was never exceeded
    batches.polls_before_done = 0
    with Catalog.open(world) as cat:
        again = tagging.run_tagging(cat, make_llm(fake, world), images_per_request=8,
                                    batch=True, poll_interval=0.01, batch_job_bytes=13_000)
        states = {r["job_name"]: r["state"] for r in cat.query(
            "SELECT job_name, state FROM tag_batch_jobs WHERE phase='first'")}
    assert again["batch_jobs_resumed"] == len(jobs)
    assert set(states) == {j["job_name"] for j in jobs}  # no first-phase job was made again
    assert set(states.values()) == {"collected"}
    assert _states(world) == {"ok": 22, "refused": 1, "failed": 1}
    assert max(batches.sizes) <= 14_000


def test_batch_jobs_are_built_one_at_a_time(fake, world, monkeypatch):
    """A phase holds one job's requests (their image bytes) at a time: each job is submitted
    before the next job's requests are built (issue 27: the whole pool's bytes in memory
    before the first job made a million-image phase need hundreds of GB)."""
    from builder.tagging import batch as tagging_batch

    FakeBatches(fake, polls_before_done=0)
    llm = make_llm(fake, world)
    built: list[int] = []
    at_submit: list[tuple[int, int]] = []
    prepare, submit = llm.prepare, tagging_batch.submit
    monkeypatch.setattr(llm, "prepare", lambda *a, **k: built.append(1) or prepare(*a, **k))

    def counting_submit(cat, ctx, groups, reqs, phase, *rest):
        if phase == "first":  # the retry phase comes after the first one's answers
            at_submit.append((len(built), len(reqs)))
        return submit(cat, ctx, groups, reqs, phase, *rest)

    monkeypatch.setattr(tagging_batch, "submit", counting_submit)
    with Catalog.open(world) as cat:
        tagging.run_tagging(cat, llm, images_per_request=1, batch=True, poll_interval=0.01,
                            batch_job_bytes=13_000)
    assert len(at_submit) >= 3
    sent = 0
    for n_built, n_reqs in at_submit[:-1]:
        sent += n_reqs
        assert n_built <= sent + 1  # the requests of the jobs sent, and the one that overflowed
    assert _states(world) == {"ok": 22, "refused": 1, "failed": 1}
