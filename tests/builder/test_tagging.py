"""Stage tagging through the real google-genai client against the fake Gemini server.

Synchronous path, the Batch API path (submit, poll, collect, resume by job name) and the
offline twin, on a synthetic catalog with planted bad answers.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from builder.catalog import Catalog
from builder.crawl.records import add_item
from builder.crawl.search import Search
from builder.llm.cache import LLMCache
from builder.llm.client import GeminiLLM, LLMConfig
from builder.tagging import rules
from builder.tagging import stage as tagging
from core import datatables, files
from tests.fakes.gemini import FakeGemini, answer
from tests.fakes.gemini_batch import FakeBatches
from tests.worlds import build_world, png

pytestmark = pytest.mark.integration

KEY = "AIzaFAKE-tagging-sentinel-0123456789"
CONCEPTS = ["train", "taxi", "craft"]
COUNTRIES = ["USA", "JPN", "THA", "BRA"]
P_OUTSIDE = ("train", "USA", 0)  # group: a label outside the list; alone: valid -> ok
P_MISSING = ("taxi", "JPN", 1)  # group: index missing; alone: empty list -> refused
P_REPEAT = ("craft", "BRA", 0)  # group: a repeated concept; alone: outside label -> failed


def _sha(key: tuple[str, str, int]) -> str:
    return hashlib.sha256(png("|".join(map(str, key)))).hexdigest()


WHO = {_sha((c, k, i)): (c, k, i) for c in CONCEPTS for k in COUNTRIES for i in range(2)}


def good(c: str, k: str) -> list[str]:
    return [c, "craft"] if (k == "THA" and c != "craft") else [c]


def respond(req):
    """Answers by image identity (decoded from the request's inline image bytes)."""
    keys = [WHO[hashlib.sha256(base64.urlsafe_b64decode(im["data"])).hexdigest()] for im in req.images]
    alone = len(keys) == 1
    out = []
    for i, key in enumerate(keys):
        c, k, _ = key
        if key == P_OUTSIDE:
            out.append({"index": i, "concepts": good(c, k) if alone else [c, "spaceship"]})
        elif key == P_MISSING:
            if alone:
                out.append({"index": i, "concepts": []})
        elif key == P_REPEAT:
            out.append({"index": i, "concepts": ["craft", "moon base"] if alone else [c, c]})
        else:
            out.append({"index": i, "concepts": good(c, k)})
    return answer({"images": out})


@pytest.fixture
def fake():
    with FakeGemini() as f:
        f.respond_with(respond)
        yield f


@pytest.fixture
def world(tmp_path):
    return build_world(tmp_path / "w", CONCEPTS, countries=COUNTRIES, per_cell=2,
                       tag_fn=lambda c, k, i: None)


def make_llm(fake, wd) -> GeminiLLM:
    cfg = LLMConfig(base_url=fake.url, rpm=0, retry_attempts=1, retry_initial_delay=0.01,
                    retry_max_delay=0.02, timeout_s=5)
    return GeminiLLM("gemini-fake", LLMCache(wd.llm_cache_path), KEY, cfg)


def _tags(wd) -> dict[tuple, dict]:
    with Catalog.open(wd) as cat:
        return {WHO[r["sha256"]]: dict(r) for r in cat.query("SELECT * FROM tags")}


def _check_outcome(wd) -> None:
    rows = _tags(wd)
    assert len(rows) == 24
    prompt_sha = files.sha256_file(datatables.data_dir() / "prompts" / "tagging.txt")
    for key, r in rows.items():
        assert r["prompt_sha"] == prompt_sha and r["model"] == "gemini:gemini-fake"
        if key == P_OUTSIDE:
            assert (r["status"], json.loads(r["tags_json"]), r["attempts"]) == ("ok", ["train"], 2)
        elif key == P_MISSING:
            assert (r["status"], r["tags_json"], r["attempts"]) == ("refused", None, 2)
            assert "empty list" in r["reason"] and r["raw"]
        elif key == P_REPEAT:
            assert (r["status"], r["tags_json"]) == ("failed", None)
            assert "outside the concept list" in r["reason"] and "moon base" in r["raw"]
        else:
            assert r["status"] == "ok" and json.loads(r["tags_json"]) == good(*key[:2])
            assert r["attempts"] == 1 and r["raw"] is None


def test_sync_groups_retry_alone_and_record(fake, world):
    with Catalog.open(world) as cat:
        counts = tagging.run_tagging(cat, make_llm(fake, world), images_per_request=8,
                                     workers=3)
        run = cat.last_run("tagging")
    _check_outcome(world)
    calls = sorted(fake.calls(), key=lambda c: -len(c.images))  # 3 workers: any order
    assert [len(c.images) for c in calls] == [8, 8, 8, 1, 1, 1]
    assert "numbered from 0 to 7" in calls[0].prompt and "numbered from 0 to 0" in calls[3].prompt
    listed = calls[0].prompt.split("one per line):\n", 1)[1].split("\n\nOutput:", 1)[0].split("\n")
    assert set(datatables.concepts()) <= set(listed) and set(CONCEPTS) <= set(listed)
    gen = calls[0].json["generationConfig"]
    assert set(gen["responseSchema"]["properties"]) == {"images"}
    assert counts["kept_images_ok"] == 22 and counts["kept_images_refused"] == 1
    assert counts["kept_images_failed"] == 1 and counts["group_retry"] == 3
    params = json.loads(run["params_json"])
    assert params["prompt_sha"] == _tags(world)[P_OUTSIDE]["prompt_sha"]
    assert "kept images by tag state: ok=22, failed=1, refused=1" in run["summary"]
    # a re-run asks nothing: every kept image has tags or a recorded failure
    with Catalog.open(world) as cat:
        again = tagging.run_tagging(cat, make_llm(fake, world), images_per_request=8)
    assert len(fake.calls()) == 6 and again["images_to_tag"] == 0


def test_batch_api_submit_poll_collect(fake, world):
    batches = FakeBatches(fake, polls_before_done=2)
    with Catalog.open(world) as cat:
        tagging.run_tagging(cat, make_llm(fake, world), images_per_request=8, batch=True,
                            poll_interval=0.01)
        jobs = [dict(r) for r in cat.query("SELECT * FROM tag_batch_jobs ORDER BY submitted_at")]
    _check_outcome(world)
    assert fake.calls() == []  # nothing went through the synchronous endpoint
    assert len(fake.calls("batchGenerateContent")) == 2
    assert [j["phase"] for j in jobs] == ["first", "retry"]
    assert all(j["state"] == "collected" for j in jobs)
    assert [len(json.loads(j["requests_json"])) for j in jobs] == [3, 3]
    assert [len(j.requests) for j in batches.jobs.values()] == [3, 3]
    first = batches.jobs[jobs[0]["job_name"]]
    gen = first.requests[0]["request"]["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    assert first.polls == 3  # pending, running, succeeded


def test_batch_job_is_resumed_by_name_after_an_interrupted_run(fake, world, monkeypatch, capsys):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("XCM_GEMINI_BASE_URL", fake.url)
    batches = FakeBatches(fake, polls_before_done=10**6)
    argv = ["--workdir", str(world.root), "--llm", "gemini:gemini-fake", "--batch",
            "--poll-interval", "0.01", "--llm-rpm", "0", "--llm-retries", "0"]
    assert tagging.main([*argv, "--batch-timeout", "0"]) == 1
    assert "batch job still running" in capsys.readouterr().out
    with Catalog.open(world) as cat:
        (job,) = cat.query("SELECT * FROM tag_batch_jobs")
        assert job["state"] == "JOB_STATE_PENDING" and cat.query("SELECT * FROM tags") == []
    batches.polls_before_done = 0
    assert tagging.main(argv) == 0
    _check_outcome(world)
    creates = fake.calls("batchGenerateContent")
    assert len(creates) == 2  # the first job was picked up, only the retry job is new
    with Catalog.open(world) as cat:
        names = [r["job_name"] for r in cat.query(
            "SELECT job_name FROM tag_batch_jobs WHERE phase='first'")]
    assert names == [job["job_name"]]
    for path in world.root.glob("catalog.sqlite*"):
        assert KEY.encode() not in path.read_bytes()


def test_offline_tags_each_image_with_its_crawl_concepts(world, capsys):
    with Catalog.open(world) as cat, cat.tx() as con:  # the same bytes also found for 'craft'
        (r,) = con.execute("SELECT * FROM items WHERE concept='train' AND country='USA' AND"
                           " rank=1").fetchall()
        add_item(con, r["search_id"], r["rank"] + 100,
                 Search("craft", r["country"], r["language"], "native", r["query_text"], "folder"),
                 r["url"] + "#dup", status="ok", sha256=r["sha256"])
    assert tagging.main(["--workdir", str(world.root), "--llm", "offline",
                         "--images-per-request", "5"]) == 0
    rows = _tags(world)
    assert len(rows) == 24 and {r["status"] for r in rows.values()} == {"ok"}
    assert json.loads(rows[("train", "USA", 0)]["tags_json"]) == ["train", "craft"]
    assert json.loads(rows[("taxi", "THA", 1)]["tags_json"]) == ["taxi"]
    assert "kept images by tag state: ok=24" in capsys.readouterr().out


def test_a_missing_image_file_is_a_recorded_failure_not_a_crash(world):
    sha = _sha(("taxi", "JPN", 0))
    world.image_path(sha, "png").unlink()
    assert tagging.main(["--workdir", str(world.root), "--llm", "offline"]) == 0
    rows = _tags(world)
    assert rows[("taxi", "JPN", 0)]["status"] == "failed"
    assert rows[("taxi", "JPN", 0)]["reason"] == "image file missing from the work dir"
    assert sum(r["status"] == "ok" for r in rows.values()) == 23


def test_bad_input_exit_2(world, capsys):
    assert tagging.main(["--workdir", str(world.root), "--llm", "gemini:x"]) == 2
    assert "GEMINI_API_KEY" in capsys.readouterr().err
    assert tagging.main(["--workdir", str(world.root), "--llm", "offline",
                         "--images-per-request", "0"]) == 2


def test_a_failed_batch_job_is_transient_and_the_next_run_asks_again(fake, world):
    batches = FakeBatches(fake, polls_before_done=1, final_state="BATCH_STATE_FAILED")
    with Catalog.open(world) as cat:
        counts = tagging.run_tagging(cat, make_llm(fake, world), images_per_request=8,
                                     batch=True, poll_interval=0.01)
        jobs = cat.query("SELECT phase, state, requests_json FROM tag_batch_jobs"
                         " ORDER BY submitted_at")
        run = cat.last_run("tagging")
    assert [(j["phase"], j["state"]) for j in jobs] == [("first", "collected")]
    rows = _tags(world)
    assert {r["status"] for r in rows.values()} == {"transient"}  # not the images' fault
    assert {r["reason"] for r in rows.values()} == {"error: batch job ended JOB_STATE_FAILED"}
    assert counts["kept_images_transient"] == 24 and counts["batch_jobs_submitted"] == 1
    assert "24 image(s) hit transient errors" in run["summary"]
    batches.final_state = "BATCH_STATE_SUCCEEDED"
    with Catalog.open(world) as cat:
        again = tagging.run_tagging(cat, make_llm(fake, world), images_per_request=8,
                                    batch=True, poll_interval=0.01)
    assert again["images_to_tag"] == 24
    assert (again["kept_images_ok"], again["kept_images_refused"],
            again["kept_images_failed"]) == (22, 1, 1)
    assert "kept_images_transient" not in again


def test_judge_rules():
    allowed = {"train", "taxi"}
    ans = rules.GroupAnswer(rules.TagAnswer(images=[
        rules.ImageTags(index=0, concepts=["taxi", "train"]),
        rules.ImageTags(index=2, concepts=["train", "train"]),
        rules.ImageTags(index=3, concepts=["boat"]),
        rules.ImageTags(index=3, concepts=["taxi"]),
        rules.ImageTags(index=4, concepts=[]),
    ]), "raw")
    got = [(v.status, v.tags) for v in rules.judge(ans, 5, allowed, final=False)]
    assert got == [("ok", ["taxi", "train"]), ("retry", None), ("retry", None),
                   ("retry", None), ("retry", None)]
    final = [v.status for v in rules.judge(ans, 5, allowed, final=True)]
    assert final == ["ok", "failed", "failed", "failed", "refused"]
    # an empty answer is no refusal: only a block of the service is
    empty = rules.GroupAnswer(None, None, "failed: empty answer")
    assert [v.status for v in rules.judge(empty, 1, allowed, final=True)] == ["failed"]
    blocked = rules.GroupAnswer(None, None, "refused: prompt blocked: SAFETY", refused=True)
    assert [(v.status, v.reason) for v in rules.judge(blocked, 1, allowed, final=True)] == [
        ("refused", "refused: prompt blocked: SAFETY")]
    assert [v.status for v in rules.judge(blocked, 2, allowed, final=False)] == ["retry"] * 2
    # a transient failure is nobody's verdict on the image, in a group or alone
    down = rules.GroupAnswer(None, None, "error: ServerError: 503", transient=True)
    assert [v.status for v in rules.judge(down, 3, allowed, final=False)] == ["transient"] * 3
    assert [v.status for v in rules.judge(down, 1, allowed, final=True)] == ["transient"]
