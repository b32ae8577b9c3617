"""The review UI in a real browser (issue 14 §2 and §3): log in, open a task, answer it by
clicking, submit, pull, and check what was stored.

Real Label Studio (conftest.py) and a real headless Chromium (browser.py) on 127.0.0.1;
every request off 127.0.0.1 is refused, and the tests assert that no response came from
anywhere else. Skipped (with the reason) without /usr/bin/chromium, chromedriver or selenium.
"""

from __future__ import annotations

import csv
import io
import logging

import httpx
import pytest

from annotation.cli import main
from annotation.pull import pull
from annotation.push import push
from builder.catalog import Catalog
from tests.annotation import synth
from tests.annotation.browser import (
    Accounts,
    chromium,
    click_text,
    label_next,
    require_browser,
    responses_off_loopback,
    submit,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def people(label_studio) -> Accounts:
    """Annotators who join through the organization's invitation link."""
    require_browser()
    invite = httpx.get(f"{label_studio.url}/api/invite", timeout=10,
                       headers={"Authorization": f"Token {label_studio.token}"})
    assert invite.status_code == 200, invite.text
    return Accounts(label_studio.url, invite.json()["invite_url"])


@pytest.fixture()
def ls_env(label_studio, monkeypatch):
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    monkeypatch.setenv("LOCAL_FILES_DOCUMENT_ROOT", str(label_studio.document_root))
    return label_studio


def _page_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def _assert_nothing_left_loopback(driver, proxy) -> None:
    assert responses_off_loopback(driver) == []
    # whatever tried to leave was refused by the proxy on 127.0.0.1 (the frontend's trackers)
    log.info("refused off 127.0.0.1: %s", sorted(proxy.hosts()))


def test_query_terms_push_answer_in_the_browser_pull(ls_env, ls_conn, people, tmp_path, capsys):
    from selenium.webdriver.common.by import By

    root = ls_env.document_root / "browser-terms"
    cat, _, _ = synth.build(root)
    synth.build_terms(cat)
    with cat.tx() as con:  # one task in the project, so the label stream hands out that one
        con.execute("UPDATE query_terms SET source='reviewed' WHERE concept='bus'")
    cat.close()
    wd = ["--workdir", str(root)]
    assert main(["push", *wd, "--kind", "queries", "--countries", "PRT"]) == 0
    assert "1 created, 0 unchanged" in capsys.readouterr().out
    with Catalog.open(root) as c:
        pid = c.query("SELECT project_id FROM ls_projects WHERE kind='queries:pt-PT'")[0][0]
        tid = {json_concept(r["data_json"]): r["task_id"] for r in c.query(
            "SELECT task_id, data_json FROM ls_tasks WHERE kind='queries:pt-PT'")}
    assert set(tid) == {"train"}
    answers = {"rev1@example.com": "comboio", "rev2@example.com": "comboio",
               "rev3@example.com": None}  # rev3 is not assigned to pt-PT
    with chromium(tmp_path) as (driver, proxy):
        for email in answers:  # the accounts first: assign checks them on the server
            people.enter(driver, email)
        assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer", "REV1@example.com",
                     "--reviewer", "rev2@example.com"]) == 0
        assert "pt-PT: rev1@example.com, rev2@example.com" in capsys.readouterr().out
        for n, (email, term) in enumerate(answers.items()):
            people.enter(driver, email)
            guide = label_next(driver, ls_env.url, pid)
            assert "Query term review guideline" in guide  # shown before the first task
            text = wait_for(driver, lambda d: "Alfa Pendular" in _page_text(d) and _page_text(d),
                            "the task's texts")
            for shown in ("train | Portugal (pt-PT)", "English search term: train",
                          "Shinkansen bullet train (Japan)",
                          "In Portugal, concept generation gave: Alfa Pendular",
                          "The paper authors' term (authors/3xcm): comboio",
                          "Proposed search term", "Correct: people here would type this term",
                          "The concept is unclear in this language"):
                assert shown in text
            if term is None:
                click_text(driver, "Correct: people here would type this term")
            else:
                click_text(driver, "A better term (type it below)")
                box = wait_for(driver, lambda d: d.find_element(
                    By.CSS_SELECTOR, "[placeholder^='the better term']"), "the term field")
                box.send_keys(term)
            submit(driver, ls_conn.client, tid["train"], n)
        _assert_nothing_left_loopback(driver, proxy)
    assert main(["status", *wd]) == 0
    status = capsys.readouterr().out
    assert "queries:pt-PT: project" in status and "outcomes so far: corrected 1" in status
    assert main(["pull", *wd, "--kind", "queries"]) == 0
    out = capsys.readouterr().out
    assert "not counted (not assigned to pt-PT): rev3@example.com 1" in out
    assert "outcomes: corrected 1" in out
    rows = list(csv.DictReader(io.StringIO((root / "exports" / "queries.csv").read_text())))
    row = next(r for r in rows if (r["concept"], r["country"]) == ("train", "PRT"))
    assert (row["native_term"], row["source"], row["reviewers"], row["locale"]) == (
        "comboio", "reviewed", "2", "pt-PT")
    assert row["reviewed_at"] and row["note"].startswith("review: corrected from 'trem'")
    assert all(r["source"] != "reviewed" for r in rows
               if r["country"] != "PRT")


def json_concept(data_json: str) -> str:
    import json

    return json.loads(data_json)["concept"]


def test_duplicate_review_in_the_browser(ls_env, ls_conn, people, tmp_path):
    from selenium.webdriver.common.by import By

    root = ls_env.document_root / "browser-dup"
    cat, sha, items = synth.build(root)
    with cat.tx() as con:  # group 1 only, so the label stream hands out that task
        con.execute("UPDATE dedup_groups SET status='auto' WHERE group_id IN (2, 3, 4)")
    rep = push(cat, ls_conn, "duplicates", title="browser duplicate review",
               document_root=str(ls_env.document_root))
    tid = cat.query("SELECT task_id FROM ls_tasks WHERE group_id=1")[0][0]
    client = ls_conn.client
    with chromium(tmp_path) as (driver, proxy):
        # dup1 ticks "None of these are duplicates" and leaves the proposed removes: both
        people.enter(driver, "dup1@example.com")
        guide = label_next(driver, ls_env.url, rep.project_id)
        assert "pre-filled with the automatic stage's proposal" in guide
        text = wait_for(driver, lambda d: "automatic proposal" in _page_text(d) and _page_text(d),
                        "the group's labels")
        assert "None of these are duplicates" in text and "none_duplicates" not in text
        assert "PROPOSAL, not your answer" in text
        assert text.count("automatic proposal: keep") == 1
        assert text.count("automatic proposal: remove") == 2
        wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "img[alt=image]")) == 3,
                 "the three images")  # loaded (Label Studio shows them from blob: URLs)
        assert "There was an issue loading URL" not in _page_text(driver)
        labels = driver.find_elements(By.XPATH, "//*[contains(text(), 'automatic proposal:')]")
        boxes = [(e.location["x"], e.location["y"]) for e in labels]
        assert len(boxes) == 3
        assert len({y for _, y in boxes}) == 1 and boxes == sorted(boxes)  # side by side
        click_text(driver, "None of these are duplicates")
        submit(driver, client, tid, 0)
        # dup2 submits the proposal unchanged; dup3 changes image #2 (B) to keep
        people.enter(driver, "dup2@example.com")
        label_next(driver, ls_env.url, rep.project_id)
        submit(driver, client, tid, 1)
        people.enter(driver, "dup3@example.com")
        label_next(driver, ls_env.url, rep.project_id)
        click_text(driver, "keep", index=1)
        submit(driver, client, tid, 2)
        _assert_nothing_left_loopback(driver, proxy)
    pull(cat, ls_conn, "duplicates")
    stored = {(r["annotator"], r["sha256"]): r["decision"] for r in cat.query(
        "SELECT annotator, sha256, decision FROM reviews WHERE task_id=? AND current=1", (tid,))}
    a, b, c = sha["A"], sha["B"], sha["C"]
    assert stored == {
        ("dup1@example.com", a): "contradiction", ("dup1@example.com", b): "contradiction",
        ("dup1@example.com", c): "contradiction",
        ("dup2@example.com", a): "confirmed_keep", ("dup2@example.com", b): "confirmed_remove",
        ("dup2@example.com", c): "confirmed_remove",
        ("dup3@example.com", a): "confirmed_keep", ("dup3@example.com", b): "keep",
        ("dup3@example.com", c): "confirmed_remove",
    }
    for letter in "ABC":  # the contradiction is not resolved silently: the group waits
        (status, reason), = {(r["status"], r["reason"]) for r in cat.query(
            "SELECT status, reason FROM items WHERE item_id=?", (items[letter][0],))}
        assert status == "needs_review"
        assert reason.startswith("review: contradictory answer by dup1@example.com")
    assert cat.query("SELECT status FROM dedup_groups WHERE group_id=1")[0][0] == "needs_review"
    cat.close()
