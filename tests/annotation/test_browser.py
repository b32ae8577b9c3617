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
import re
import time

import httpx
import pytest

from annotation.cli import main
from annotation.pull import pull
from annotation.push import push
from builder.catalog import Catalog
from core.datatables import data_file
from tests.annotation import synth
from tests.annotation.browser import (
    Accounts,
    boxes_in_view,
    chromium,
    click_text,
    instructions_layout,
    label_next,
    require_browser,
    responses_off_loopback,
    shot,
    submit,
    submit_button,
    wait_for,
    warning_text,
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


def _refused(driver, client, task_id: int, n_before: int, message: str) -> None:
    """Press Submit and check that Label Studio refuses with ``message`` and stores nothing;
    the warning is closed again."""
    from selenium.webdriver.common.by import By

    submit_button(driver).click()
    wait_for(driver, lambda d: message in warning_text(d), f"the warning {message!r}")
    time.sleep(1.0)  # a refused answer is not sent: give a wrong one the time to arrive
    assert len(client.annotations.list(id=task_id)) == n_before
    for b in driver.find_elements(By.CSS_SELECTOR, ".ant-modal-confirm button"):
        if b.is_displayed():
            b.click()
    wait_for(driver, lambda d: not warning_text(d), "the warning closed")


def _results(client, task_id: int) -> list[list[tuple]]:
    """Per stored annotation of a task: its (from_name, value) results, sorted."""
    out = []
    for a in client.annotations.list(id=task_id):
        out.append(sorted((r["from_name"], repr(r["value"].get("choices", r["value"].get("text"))))
                          for r in a.result))
    return out


TERM_FIELD = "[placeholder^='the better term']"


def _shown(driver, css: str) -> list:
    from selenium.webdriver.common.by import By

    return [e for e in driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]


def _checked(driver) -> list[bool]:
    """Whether each radio button of the page is checked (antd marks its wrapper)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('.ant-radio-wrapper')].filter("
        "(e) => e.offsetParent !== null).map("
        "(e) => e.classList.contains('ant-radio-wrapper-checked'))")


def _keep_layout(driver, into: list[dict], picture: str):
    """An ``on_instructions`` for label_next: record the window's layout, take its picture."""
    def keep(modal) -> None:
        into.append(instructions_layout(driver, modal))
        shot(driver, picture)
    return keep


def _check_guideline_dom(layout: dict, guideline: str) -> None:
    """The instructions window shows the guideline's lists as lists and no heading overlaps
    itself or what follows (computed in the browser, see browser.instructions_layout)."""
    md = data_file(f"annotation/{guideline}").text
    numbered = len(re.findall(r"^\d+\. ", md, re.M))
    bullets = len(re.findall(r"^\s*- ", md, re.M))
    assert (layout["ol_items"], layout["ul_items"]) == (numbered, bullets)
    assert layout["ol_style"] == ["decimal"] and layout["ul_style"] == ["disc"]
    assert layout["li_display"] == ["list-item"]
    assert layout["headings"]
    for h in layout["headings"]:
        assert h["line"] >= h["font"], h  # lines of a wrapped heading do not overlap
        lines = round(h["height"] / h["line"])
        assert lines >= 1 and abs(h["height"] - lines * h["line"]) < 2, h
        assert h["next_top"] is None or h["next_top"] >= h["bottom"] - 0.5, h


def test_query_terms_push_answer_in_the_browser_pull(ls_env, ls_conn, people, tmp_path, capsys):

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
    client = ls_conn.client
    with chromium(tmp_path) as (driver, proxy):
        driver.set_window_size(1366, 768)
        for email in answers:  # the accounts first: assign checks them on the server
            people.enter(driver, email)
        assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer", "REV1@example.com",
                     "--reviewer", "rev2@example.com"]) == 0
        assert "pt-PT: rev1@example.com, rev2@example.com" in capsys.readouterr().out
        for n, (email, term) in enumerate(answers.items()):
            people.enter(driver, email)
            layouts: list[dict] = []
            guide = label_next(driver, ls_env.url, pid,
                               on_instructions=_keep_layout(driver, layouts, "queries-guideline"))
            assert "Query term review guideline" in guide  # shown before the first task
            _check_guideline_dom(layouts[0], "queries_guideline.md")
            text = wait_for(driver, lambda d: "Alfa Pendular" in _page_text(d) and _page_text(d),
                            "the task's texts")
            for shown in ("train | Portugal (pt-PT)", "English search term: train",
                          "What it means: a railway train or its carriages, seen from outside "
                          "or inside; not a tram, a toy train or the station alone",
                          "Shinkansen bullet train (Japan)",
                          "In Portugal, concept generation gave: Alfa Pendular",
                          "The paper authors' term (authors/3xcm): comboio",
                          "Proposed search term", "Correct: people here would type this term",
                          "The concept is unclear in this language"):
                assert shown in text
            assert not _shown(driver, TERM_FIELD)  # no term field before "A better term"
            if n == 0:  # no answer, then "a better term" with nothing typed: both refused
                shot(driver, "queries-task")
                _refused(driver, client, tid["train"], 0, "Choose one answer: Correct, A "
                         "better term, or The concept is unclear in this language.")
                click_text(driver, "A better term (type it below)")
                _refused(driver, client, tid["train"], 0, "Type the better term in the field")
            click_text(driver, "A better term (type it below)")
            box = wait_for(driver, lambda d: next(iter(_shown(d, TERM_FIELD)), None),
                           "the term field")
            box.send_keys(term or "comboio")
            if term is None:  # a typed term, then "Correct": the hidden field is left out
                click_text(driver, "Correct: people here would type this term")
                wait_for(driver, lambda d: not _shown(d, TERM_FIELD), "the term field hidden")
            submit(driver, client, tid["train"], n)
        _assert_nothing_left_loopback(driver, proxy)
    assert sorted(_results(client, tid["train"])) == [  # rev3's "comboio" was not sent
        [("better_term", "['comboio']"), ("verdict", "['better_term']")],
        [("better_term", "['comboio']"), ("verdict", "['better_term']")],
        [("verdict", "['correct']")]]
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
    radios = "input[type=radio]"
    with chromium(tmp_path) as (driver, proxy):
        driver.set_window_size(1366, 768)
        # dup1 ticks "None of these are duplicates": the proposed marks go, and with them
        # the contradiction (None + a remove) that could be submitted before
        people.enter(driver, "dup1@example.com")
        layouts: list[dict] = []
        guide = label_next(driver, ls_env.url, rep.project_id,
                           on_instructions=_keep_layout(driver, layouts, "duplicates-guideline"))
        assert "pre-filled with the automatic stage's proposal" in guide
        _check_guideline_dom(layouts[0], "duplicates_guideline.md")
        text = wait_for(driver, lambda d: "proposal: " in _page_text(d) and _page_text(d),
                        "the group's labels")
        assert "None of these are duplicates" in text and "none_duplicates" not in text
        assert "PROPOSAL, not your answer" in text
        for n, proposal in enumerate(("keep", "remove", "remove"), start=1):
            assert f"copy {n} of 3 · 64×48 px · proposal: {proposal}" in text
        assert "rank" not in text and "SAU" not in text and sha["A"][:10] not in text
        wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "img[alt=image]")) == 3,
                 "the three images")  # loaded (Label Studio shows them from blob: URLs)
        assert "There was an issue loading URL" not in _page_text(driver)
        labels = driver.find_elements(By.XPATH, "//*[contains(text(), ' · proposal: ')]")
        boxes = [(e.location["x"], e.location["y"]) for e in labels]
        assert len(boxes) == 3
        assert len({y for _, y in boxes}) == 1 and boxes == sorted(boxes)  # side by side
        shot(driver, "duplicates-task")
        # a pre-filled mark clicked again stays: keep / remove are radio buttons
        proposed = [True, False, False, True, False, True]  # keep, remove, remove
        wait_for(driver, lambda d: _checked(d) == proposed, "the proposal's marks")
        click_text(driver, "remove", index=1)  # image 2's pre-filled remove, clicked again
        click_text(driver, "remove", index=1)
        time.sleep(0.5)
        assert _checked(driver) == proposed
        click_text(driver, "None of these are duplicates")
        wait_for(driver, lambda d: not _shown(d, radios), "the marks hidden")
        submit(driver, client, tid, 0)
        assert _results(client, tid) == [[("group", "['none_duplicates']")]]
        # dup2 submits the proposal unchanged; dup3 changes image 2 (B) to keep
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
        ("dup1@example.com", a): "none_duplicates", ("dup1@example.com", b): "none_duplicates",
        ("dup1@example.com", c): "none_duplicates",
        ("dup2@example.com", a): "confirmed_keep", ("dup2@example.com", b): "confirmed_remove",
        ("dup2@example.com", c): "confirmed_remove",
        ("dup3@example.com", a): "confirmed_keep", ("dup3@example.com", b): "keep",
        ("dup3@example.com", c): "confirmed_remove",
    }
    # A: keep 3; B: keep 2 (dup1's None, dup3), remove 1; C: keep 1, remove 2
    expected = {"A": "kept", "B": "kept", "C": "removed"}
    for letter, status in expected.items():
        assert {r["status"] for r in cat.query(
            "SELECT status FROM items WHERE item_id=?", (items[letter][0],))} == {status}
    assert cat.query("SELECT status FROM dedup_groups WHERE group_id=1")[0][0] == "reviewed"
    cat.close()


def _group_of(cat, n: int, sizes: list[tuple[int, int]]) -> list[str]:
    """Add dedup group 7 of ``n`` distinct images of the given sizes (the only group waiting
    for review); returns their sha256."""
    import io as _io

    from PIL import Image

    from tests.worlds import World

    shas = []
    with cat.tx() as con:
        con.execute("UPDATE dedup_groups SET status='auto'")
        world = World(cat.workdir, con)
        world.group(7, "food", "needs_review", None)
        search = world.search("food", "USA", "en", "food")  # the synth's: kept as it is
        for i in range(n):
            w, h = sizes[i % len(sizes)]
            buf = _io.BytesIO()
            Image.new("RGB", (w, h), (40 * i % 256, 90, 160)).save(buf, format="PNG")
            s = world.image(buf.getvalue(), w, h, nbytes=100)
            shas.append(s)
            world.item(search, 100 + i, f"http://example.com/g7-{i}.png", s,
                       status="needs_review", group_id=7)
    return shas


def test_a_large_group_fits_and_every_image_needs_an_answer(ls_env, ls_conn, people, tmp_path):
    """Six images (landscape and portrait) at 1366x768: every image and its marks lie in the
    window without scrolling. With the proposal removed, an answer with an image left open
    is refused with a message in words, and nothing is stored."""
    from selenium.webdriver.common.by import By

    root = ls_env.document_root / "browser-layout"
    cat, _, _ = synth.build(root)
    shas = _group_of(cat, 6, [(640, 480), (480, 640), (800, 450)])
    rep = push(cat, ls_conn, "duplicates", title="browser layout",
               document_root=str(ls_env.document_root))
    tid = cat.query("SELECT task_id FROM ls_tasks WHERE group_id=7")[0][0]
    client = ls_conn.client
    for p in client.predictions.list(task=tid):  # the marks arrive empty
        client.predictions.delete(p.id)
    with chromium(tmp_path) as (driver, proxy):
        driver.set_window_size(1366, 768)
        people.enter(driver, "dup1@example.com")
        label_next(driver, ls_env.url, rep.project_id)
        wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "img[alt=image]")) == 6,
                 "the six images")
        time.sleep(1.0)  # the images' boxes settle once loaded
        shot(driver, "duplicates-six")
        images = boxes_in_view(driver, "img[alt=image]")
        marks = boxes_in_view(driver, "input[type=radio]")
        assert len(images) == 6 and len(marks) == 12
        assert all(b["inside"] for b in images + marks), (images, marks)
        for i in range(5):
            click_text(driver, "keep", index=i)
        _refused(driver, client, tid, 0, "Choose keep or remove for every image, or tick "
                 "'None of these are duplicates'.")
        click_text(driver, "remove", index=5)
        submit(driver, client, tid, 0)
        _assert_nothing_left_loopback(driver, proxy)
    assert len(_results(client, tid)[0]) == 6 and len(shas) == 6
    cat.close()
