"""The report and the galleries in a real headless Chromium, made from results someone else
sent: a model name that closes the script tag and opens another, query texts with a
right-to-left override and 5,000 characters without a space. Nothing runs, every label reads
in its own direction, no card or table spills out of the page. Screenshots go to
``$XCM_DOCS_IMG`` when it is set."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmark.report.build import build_report
from core import files
from tests.annotation.browser import chromium, require_browser, shot
from tests.benchmark.gallery_runs import make_runs
from tests.benchmark.test_report_safety import HOSTILE, rename_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE, with no POP DIRECTIONAL FORMATTING after it
LONG = "W" * 5000


def hostile_texts(path) -> None:
    """Every query text of a run's outcomes: an override first, half of them 5,000 letters."""
    raw = json.loads(path.read_text())
    side = path.parent / raw["outcomes"]["file"]
    df = pd.read_parquet(side)
    df["query_text"] = [RLO + "term" + (LONG if i % 2 else "") for i in range(len(df))]
    df.to_parquet(side, index=False)
    raw["outcomes"]["sha256"] = files.sha256_file(side)
    path.write_text(json.dumps(raw))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"), xm3600=False)


def report_of(runs, root, second: str):
    """A report of planted-a and planted-b (named ``second``), all query texts hostile."""
    mixed = root / "mixed"
    rename_run(runs / "planted-a" / "3xcm.json", mixed, "planted-a")
    rename_run(runs / "planted-b" / "3xcm.json", mixed, second)
    for path in mixed.glob("*/3xcm.json"):
        hostile_texts(path)
    build_report([mixed], root / "out", compare_authors=False, gallery_page_size=6)
    return root / "out"


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory):
    return report_of(runs, tmp_path_factory.mktemp("hostile"), HOSTILE)


@pytest.fixture(scope="module")
def texts(runs, tmp_path_factory):
    return report_of(runs, tmp_path_factory.mktemp("texts"), "planted-b")


OVERFLOW = """return [document.documentElement.scrollWidth, window.innerWidth,
  [...document.querySelectorAll(arguments[0])].filter(e => e.scrollWidth > e.clientWidth + 1)
  .length];"""

#: per card, the x of each character of the English label "(...)" in logical order
LABEL_XS = """return [...document.querySelectorAll('article.card .eng')].map(eng => {
  const xs = [], w = document.createTreeWalker(eng, NodeFilter.SHOW_TEXT);
  while (w.nextNode()) { const n = w.currentNode;
    for (let i = 0; i < n.length; i++) { if (!n.data[i].trim()) continue;
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      xs.push(r.getBoundingClientRect().left); } }
  return xs; });"""


def test_a_hostile_model_name_runs_nothing_and_the_pages_work(report, tmp_path):
    require_browser()
    from selenium.webdriver.common.by import By

    [sub] = [p for p in (report / "gallery").iterdir() if p.name.startswith("3xcm-")]
    pages = [p for p in sub.glob("*.html") if p.name not in ("compare.html", "planted-a.html")]
    assert len(pages) == 1  # the hostile model's own page, under a slug of its own
    with chromium(tmp_path) as (driver, _proxy):
        driver.set_window_size(1366, 900)
        driver.get(pages[0].as_uri())
        assert driver.execute_script("return window.PWNED") is None
        title = driver.find_element(By.TAG_NAME, "h1").text
        assert "</script><script>window.PWNED=1</script>" not in title  # its label, shown as text
        assert "…/" in title and "/home/someone" not in title
        assert driver.find_elements(By.CSS_SELECTOR, "article.card")  # the page works
        shot(driver, "hostile-model-page")
        driver.get((sub / "compare.html").as_uri())
        assert driver.execute_script("return window.PWNED") is None
        options = [o.text for o in driver.find_elements(By.CSS_SELECTOR, "#f-a option")]
        assert len(options) == 2 and "planted-a" in options
        assert driver.find_elements(By.CSS_SELECTOR, "article.card")
        shot(driver, "hostile-compare-page")
        driver.get((report / "report.html").as_uri())
        assert driver.execute_script("return window.PWNED") is None
        rows = driver.find_elements(By.CSS_SELECTOR, "#leaderboard tr.model-row")
        assert len(rows) == 2
        width, view, spilled = driver.execute_script(OVERFLOW, "td, th")
        assert width <= view
        shot(driver, "hostile-report")


def test_an_override_stays_in_its_text_and_a_long_text_wraps(texts, tmp_path):
    require_browser()
    from selenium.webdriver.common.by import By

    [sub] = [p for p in (texts / "gallery").iterdir() if p.name.startswith("3xcm-")]
    with chromium(tmp_path) as (driver, _proxy):
        driver.set_window_size(1366, 900)
        driver.get((sub / "planted-b.html").as_uri())
        cards = driver.find_elements(By.CSS_SELECTOR, "article.card")
        assert cards and any(len(c.find_element(By.CSS_SELECTOR, ".term").text) > 4000
                             for c in cards)
        labels = driver.execute_script(LABEL_XS)
        assert labels and all(xs == sorted(xs) and len(set(xs)) == len(xs) for xs in labels), \
            "a label beside an overridden text is shown reversed"
        width, view, spilled = driver.execute_script(OVERFLOW, "article.card, .term")
        assert width <= view and spilled == 0, "a card spills out of the page"
        shot(driver, "hostile-texts")
        driver.execute_script("[...document.querySelectorAll('article.card')].find(c => "
                              "c.querySelector('.term').textContent.length < 10)"
                              ".scrollIntoView()")
        shot(driver, "hostile-override")
        driver.set_window_size(480, 900)  # a phone: still no sideways scrolling
        width, view, spilled = driver.execute_script(OVERFLOW, "article.card")
        assert width <= view and spilled == 0
