"""The galleries in a real headless Chromium (the annotation browser tests' set-up, every
request off the machine refused): a model's page shows exactly its wrong triplets from the
outcomes file, the country filter and the pager change what is shown as the data says, the
side-by-side page shows the disagreements, and nothing is fetched from elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmark.report.build import build_report
from tests.annotation.browser import chromium, require_browser
from tests.benchmark.gallery_runs import make_runs, outcomes
from tests.benchmark.test_report_browser import requests_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAGE = 10  # cards per page


def shown(driver) -> list[tuple[str, str]]:
    """The cards on the page, read in one script call (a page re-rendered between two reads of
    element handles would make them stale)."""
    return [tuple(x) for x in driver.execute_script(
        "return Array.from(document.querySelectorAll('article.card'), c =>"
        " [c.dataset.tripletId, c.dataset.outcome]);")]


def wait_for_page(driver, n: int) -> None:
    """Wait until the pager says ``page n of`` (read by script: the pager is re-rendered)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda d: f"page {n} of" in d.execute_script(
        "const p = document.querySelector('.pager'); return p ? p.textContent : '';"))


def test_gallery_filters_and_pages_show_the_outcomes(tmp_path):
    require_browser()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    results = make_runs(tmp_path, xm3600=False)
    out = tmp_path / "report"
    build_report([results], out, compare_authors=False, gallery_page_size=PAGE)
    df = outcomes(results, "planted-b", "3xcm")
    codes = {0: "semantic", 1: "cultural", 2: "non_relevant"}
    wrong = df[df["winner"] != 0]
    [sub] = [p for p in (out / "gallery").iterdir() if p.name.startswith("3xcm-")
             and not p.name.startswith("3xcm-i2i")]
    with chromium(tmp_path) as (driver, _proxy):
        driver.set_window_size(1366, 768)
        page = (sub / "planted-b.html").as_uri()
        driver.get(page)
        first = shown(driver)
        assert len(first) == min(PAGE, len(wrong))
        by_id = dict(zip(wrong["triplet_id"], wrong["winner"].map(codes), strict=True))
        assert all(by_id[t] == o for t, o in first)  # each card is a wrong triplet, as chosen
        seen = {t for t, _ in first}
        pager = driver.find_element(By.CSS_SELECTOR, ".pager")
        pages = -(-len(wrong) // PAGE)
        assert f"page 1 of {pages}" in pager.text
        for i in range(pages - 1):  # every page, each card once: all the wrong triplets
            driver.find_element(By.XPATH, "//button[contains(., 'next')]").click()
            wait_for_page(driver, i + 2)
            seen |= {t for t, _ in shown(driver)}
        assert seen == set(wrong["triplet_id"])
        # a country filter: exactly that country's wrong triplets, from page 1
        country = sorted(wrong["query_country"].unique())[-1]
        Select(driver.find_element(By.ID, "f-country")).select_by_value(country)
        wait_for_page(driver, 1)
        want = wrong[wrong["query_country"] == country]
        got = shown(driver)
        assert {t for t, _ in got} <= set(want["triplet_id"]) and len(got) == min(PAGE, len(want))
        assert f"{len(want)} of {len(wrong)}" in driver.find_element(By.CSS_SELECTOR,
                                                                      ".summary").text
        fig = driver.find_elements(By.CSS_SELECTOR, "article.card figure.chosen img")
        assert fig and all(driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 0", im) for im in fig)
        if os.environ.get("XCM_DOCS_IMG"):
            driver.save_screenshot(str(Path(os.environ["XCM_DOCS_IMG"]) / "gallery.png"))
        asked = requests_of(driver, page)  # its script, style, data and thumbnails: all local
        assert asked and all(u.startswith(out.as_uri() + "/gallery/") for u in asked), asked
        # side by side: the triplets where planted-a and planted-b choose differently
        a = outcomes(results, "planted-a", "3xcm").set_index("triplet_id")["winner"]
        b = df.set_index("triplet_id")["winner"]
        differ = set(a.index[a != b.reindex(a.index)])
        driver.get((sub / "compare.html").as_uri())
        cards = driver.find_elements(By.CSS_SELECTOR, "article.card")
        ids = {c.get_attribute("data-triplet-id") for c in cards}
        assert ids and ids <= differ and len(cards) == min(PAGE, len(differ))
