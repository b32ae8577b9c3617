"""An annotator sees how far along their own stream they are: the label stream's counter
reads "1 of N", then "2 of N" after a submission (N: the tasks of the project this annotator
may answer), in a real Label Studio 1.23 and headless Chromium."""

from __future__ import annotations

import httpx
import pytest

from annotation.cli import main
from builder.catalog import Catalog
from tests.annotation import synth
from tests.annotation.browser import (
    Accounts,
    chromium,
    click_text,
    label_next,
    require_browser,
    shot,
    submit_button,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
COUNTER = "[class*='current-task__task-count']"


def counter(driver) -> str | None:
    from selenium.webdriver.common.by import By

    els = [e for e in driver.find_elements(By.CSS_SELECTOR, COUNTER) if e.is_displayed()]
    return els[0].text.strip() if els else None


def test_the_label_stream_counts_this_annotators_tasks(label_studio, ls_conn, monkeypatch,
                                                      tmp_path, capsys):
    require_browser()
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    monkeypatch.setenv("LOCAL_FILES_DOCUMENT_ROOT", str(label_studio.document_root))
    invite = httpx.get(f"{label_studio.url}/api/invite", timeout=10,
                       headers={"Authorization": f"Token {label_studio.token}"})
    people = Accounts(label_studio.url, invite.json()["invite_url"])
    root = label_studio.document_root / "browser-progress"
    cat, _, _ = synth.build(root)
    synth.build_terms(cat)
    cat.close()
    wd = ["--workdir", str(root)]
    assert main(["push", *wd, "--kind", "queries", "--countries", "PRT"]) == 0
    capsys.readouterr()
    with Catalog.open(root) as c:
        pid = c.query("SELECT project_id FROM ls_projects WHERE kind='queries:pt-PT'")[0][0]
        tasks = [r["task_id"] for r in c.query(
            "SELECT task_id FROM ls_tasks WHERE kind='queries:pt-PT' AND retired_at IS NULL")]
    n = len(tasks)
    assert n >= 2
    client = ls_conn.client
    with chromium(tmp_path) as (driver, _proxy):
        driver.set_window_size(1366, 768)
        people.enter(driver, "progress@example.com")
        assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer",
                     "progress@example.com"]) == 0
        label_next(driver, label_studio.url, pid)
        seen = [wait_for(driver, counter, "the task counter")]
        shot(driver, "queries-progress")
        for k in range(2):
            stored = sum(len(client.annotations.list(id=t)) for t in tasks)
            click_text(driver, "Correct: people here would type this term")
            submit_button(driver).click()
            wait_for(driver, lambda d, m=stored: sum(
                len(client.annotations.list(id=t)) for t in tasks) > m, "the answer stored")
            if k + 1 < n:
                seen.append(wait_for(driver, lambda d: (c := counter(d)) not in (None, seen[-1])
                                     and c, "the next task's counter"))
    assert seen[:2] == [f"1 of {n}", f"2 of {n}"], seen
