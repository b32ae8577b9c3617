"""A crawl where no search succeeded is ``failed`` with the reason and exit 2, whatever its
size; the retry waits on one query are bounded by ``--search-deadline`` (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ddgs.exceptions import TimeoutException

from builder.catalog import Catalog
from builder.crawl import stage as crawl_mod
from builder.crawl.search import DdgsSearch
from builder.crawl.stage import CrawlConfig, crawl
from tests.builder.test_crawl_ddgs import FakeDDGS, add_queries, backend, fake_ddgs, search

__all__ = ["fake_ddgs"]  # the fixture


def _down(self, q, **kw):
    raise TimeoutException("timed out connecting")


def test_every_search_failing_fails_the_run_even_below_the_block_detector(
        tmp_path: Path, fake_ddgs, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    with Catalog.open(tmp_path / "w") as cat:
        add_queries(cat)
    monkeypatch.setattr(FakeDDGS, "images", _down)

    class Fast(DdgsSearch):
        def __init__(self, **kw):
            super().__init__(**{**kw, "min_interval": 0.0, "jitter": 0.0, "backoff": 0.0})

    monkeypatch.setattr(crawl_mod, "DdgsSearch", Fast)
    argv = ["--workdir", str(tmp_path / "w"), "--search-retries", "1", "--concepts", "food",
            "--countries", "THA", "--max-failed-searches", "5"]  # 2 queries: never 5 in a row
    assert crawl_mod.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: no search succeeded: all 2 queries of this run failed")
    assert "timed out connecting" in err and "run the same command again" in err
    with Catalog.open(tmp_path / "w") as cat:
        run = cat.last_run("crawl")
        st = dict(cat.query("SELECT status, COUNT(*) FROM searches "
                            "WHERE concept='food' AND country='THA' GROUP BY status"))
    assert run["status"] == "failed" and "no search succeeded" in run["summary"]
    assert st == {"pending": 2}  # never answered: the same command asks them again


def test_one_success_in_an_earlier_run_is_not_a_failed_crawl(tmp_path: Path, fake_ddgs,
                                                             monkeypatch) -> None:
    with Catalog.open(tmp_path / "w") as cat:
        add_queries(cat)
        crawl(cat, CrawlConfig(skip_download=True, concepts="food", countries="USA"),
              backend=backend([]))
        monkeypatch.setattr(FakeDDGS, "images", _down)
        res = crawl(cat, CrawlConfig(skip_download=True, concepts="food", countries="THA",
                                     max_failed_searches=0),
                    backend=backend([], min_interval=0.0, retries=0))
        assert cat.last_run("crawl")["status"] == "done"
    assert res.counts


def test_the_retry_waits_on_one_query_stop_at_the_deadline(fake_ddgs, monkeypatch) -> None:
    monkeypatch.setattr(FakeDDGS, "images", _down)
    sleeps: list[float] = []
    out = backend(sleeps, min_interval=0.0, retries=10, backoff=5.0, deadline=12.0).search(
        search("q"))
    # waits 5-7.5 s, then 10-15 s: the second would pass 12 s, so 2 attempts, one wait
    assert out.status == "failed" and out.attempts == 2 and len(sleeps) == 1
    assert 5.0 <= sleeps[0] <= 7.5
    sleeps.clear()
    out = backend(sleeps, min_interval=0.0, retries=10, backoff=5.0, max_backoff=5.0,
                  deadline=None, run_wait=None).search(search("q"))
    assert out.attempts == 11 and len(sleeps) == 10  # no deadline: every retry


def test_a_negative_search_deadline_is_one_line(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as e:  # checked where the option is declared (argparse)
        crawl_mod.main(["--workdir", str(tmp_path / "w"), "--search-deadline", "-1"])
    assert e.value.code == 2
    assert "argument --search-deadline: must be at least 0" in capsys.readouterr().err
