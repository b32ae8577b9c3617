"""The HTML report in a real headless Chromium (the annotation browser tests' set-up): it
loads with nothing off the machine (no fonts, scripts or images from elsewhere), every figure
decodes, and it fits a laptop screen without sideways scrolling of the page."""

from __future__ import annotations

import json

import pytest

from benchmark.report.build import build_report
from tests.annotation.browser import chromium, require_browser
from tests.benchmark.fake_results import write_fake_results, write_outcome_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_report_offline_and_laptop_sized(tmp_path):
    require_browser()
    from selenium.webdriver.common.by import By

    write_fake_results(tmp_path / "r", {"clip-l14": 1, "my-own-model": 2})
    write_outcome_run(tmp_path / "r2", "fair", (0.6, 0.2, 0.2), 3, fingerprint="2" * 64)
    write_outcome_run(tmp_path / "r2", "biased", (0.4, 0.45, 0.15), 4, fingerprint="2" * 64)
    out = tmp_path / "report"
    build_report([tmp_path / "r", tmp_path / "r2"], out)
    with chromium(tmp_path) as (driver, _proxy):
        driver.set_window_size(1366, 768)
        driver.get((out / "report.html").as_uri())
        assert driver.find_element(By.TAG_NAME, "h1").text == "3XCM report"
        images = driver.find_elements(By.TAG_NAME, "img")
        assert images and all(driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 0", im)
            for im in images)
        boards = driver.find_elements(By.CSS_SELECTOR, "table.leaderboard")
        assert len(boards) == 2
        marks = [td.text for td in boards[1].find_elements(By.CSS_SELECTOR,
                                                            'td[data-key="vs_next"]')]
        assert marks[0].startswith("differs (p ") and marks[1] == "-"
        page_w, view_w = driver.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]")
        assert page_w <= view_w, "the page scrolls sideways on a 1366 px screen"
        fetched = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        assert fetched == []  # nothing fetched at all: CSS, figures and fonts are inline/local
        page = (out / "report.html").as_uri()
        assert requests_of(driver, page) == []  # (Chromium's own background requests,
        # refused by the proxy, are not the page's)


def requests_of(driver, page: str) -> list[str]:
    """Every URL the page ``page`` asked for (beyond itself and data: URIs), from Chromium's
    performance log (reading empties it)."""
    out = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        p = msg.get("params", {})
        if msg.get("method") == "Network.requestWillBeSent" and p.get("documentURL") == page:
            url = p["request"]["url"]
            if url != page and not url.startswith("data:"):
                out.append(url)
    return out


def test_requests_of_sees_an_outside_font(tmp_path):
    """The check above is not blind: a page with an outside stylesheet is caught."""
    require_browser()
    page = tmp_path / "p.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="stylesheet" '
                    'href="http://fonts.example.org/css?family=X"></head><body>x</body></html>')
    with chromium(tmp_path) as (driver, _proxy):
        driver.get(page.as_uri())
        assert requests_of(driver, page.as_uri()) == ["http://fonts.example.org/css?family=X"]
        driver.save_screenshot(str(tmp_path / "report.png"))


def test_report_shows_infinite_sp_and_intervals(tmp_path):
    """A model without a semantic win reads "∞ (no semantic win)" in the browser, its open
    upper limit ∞, and every win rate has its interval beside it (screenshot kept to look
    at: report-infinite.png)."""
    require_browser()
    from selenium.webdriver.common.by import By

    write_fake_results(tmp_path / "r", {"a": 1, "b": 2}, xm=False, with_matrix=False)
    path = tmp_path / "r/a/3xcm.json"
    data = json.loads(path.read_text())
    data["scores"]["overall"].update(SP=None, SP_note="∞ (no semantic win)", wins_sem=0,
                                     M_sem=0.0, SP_ci95=[3.5, None])
    path.write_text(json.dumps(data))
    out = tmp_path / "report"
    build_report([tmp_path / "r"], out, compare_authors=False)
    with chromium(tmp_path) as (driver, _proxy):
        driver.set_window_size(1366, 900)
        driver.get((out / "report.html").as_uri())
        row = driver.find_element(By.CSS_SELECTOR, 'tr.model-row[data-model="a"]')
        cell = {td.get_attribute("data-key"): td.text
                for td in row.find_elements(By.TAG_NAME, "td")}
        assert cell["SP"] == "∞ (no semantic win)" and cell["SP_ci95"] == "[3.500, ∞]"
        assert all(cell[f"{k}_ci95"].startswith("[") for k in ("M_sem", "M_cul", "M_non"))
        board = driver.find_element(By.CSS_SELECTOR, "table.leaderboard")
        driver.execute_script("arguments[0].scrollIntoView()", board)
        board.screenshot(str(tmp_path / "report-infinite.png"))
    assert (tmp_path / "report-infinite.png").stat().st_size > 0
