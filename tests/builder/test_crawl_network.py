"""The crawl's search under network faults, through the real ``ddgs`` client against a fake
DuckDuckGo on 127.0.0.1 (``XCM_DDG_BASE_URL``): a host name that does not resolve is failed
at once (no backoff), a refused connection is retried within the per-query and per-run
bounds, 202/429 wait their Retry-After (or back off) and stop the run resumably with the time
to wait, a trickling answer ends at the timeout; a skipped query neither breaks nor resets
the failure streak; the ETA ignores failed queries."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from ddgs.exceptions import DDGSException

from builder.catalog import Catalog
from builder.crawl import stage as crawl_mod
from builder.crawl.search import BASE_URL_ENV, DdgsSearch, Search
from builder.queries import QueryRow, upsert_queries
from tests.builder.test_crawl_ddgs import FakeDDGS, fake_ddgs
from tests.fakes.duckduckgo import FakeDuckDuckGo, page, results, status
from tests.fakes.gemini import trickle

__all__ = ["fake_ddgs"]  # the fixture

pytestmark = pytest.mark.integration

#: what ddgs 9.16 raises when duckduckgo.com does not resolve (primp's words, verbatim)
DNS_ERROR = ("DNSError: DNSError('error sending request for url (https://duckduckgo.com/?q=x) "
             "> error resolving DNS > DNS error: no records found for Query { name: "
             "Name(\"duckduckgo.com.\"), query_type: A, query_class: IN }')")


@pytest.fixture
def ddg(monkeypatch):
    with FakeDuckDuckGo() as fake:
        monkeypatch.setenv(BASE_URL_ENV, fake.url)
        yield fake


def backend(sleeps: list[float], **kw) -> DdgsSearch:
    opts = dict(min_interval=0.0, jitter=0.0, retries=3, backoff=5.0, timeout=2,
                sleep=sleeps.append)
    return DdgsSearch(**{**opts, **kw})


def query(text: str = "food") -> Search:
    return Search("food", "THA", "th", "native", text, DdgsSearch.backend, "th-th")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_fake_answers_like_duckduckgo(ddg):
    out = backend([]).search(query())
    assert (out.status, len(out.hits), ddg.searches()) == ("ok", 10, 1)


def test_a_name_that_does_not_resolve_is_failed_at_once(fake_ddgs, monkeypatch):
    monkeypatch.setattr(FakeDDGS, "images", lambda self, q, **kw: (_ for _ in ()).throw(
        DDGSException(DNS_ERROR)))
    sleeps: list[float] = []
    out = backend(sleeps).search(query())
    assert (out.status, out.attempts, sleeps) == ("failed", 1, [])
    assert "error resolving DNS" in out.reason and out.reason.endswith("(not retried)")


def test_a_refused_connection_is_retried_within_the_query_deadline(monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, f"http://127.0.0.1:{closed_port()}")
    sleeps: list[float] = []
    out = backend(sleeps, deadline=12.0).search(query())
    assert out.status == "failed" and out.attempts == 2 and len(sleeps) == 1  # 5-7.5, 10-15
    assert out.stop is None


def test_429_with_retry_after_waits_exactly_that(ddg):
    ddg.push(status(429, "3"))
    sleeps: list[float] = []
    out = backend(sleeps).search(query())
    assert (out.status, out.attempts, sleeps) == ("ok", 2, [3.0])


@pytest.mark.parametrize("code", [202, 429])
def test_a_rate_limit_without_retry_after_backs_off_then_stops_the_run(ddg, code):
    ddg.push(*[status(code)] * 4)
    sleeps: list[float] = []
    out = backend(sleeps, retries=3, backoff=1.0).search(query())
    assert out.status == "failed" and out.attempts == 4 and len(sleeps) == 3
    assert 1.0 <= sleeps[0] <= 1.5  # our backoff, doubled per retry
    assert out.stop.startswith(f"DuckDuckGo rate-limits this machine (RatelimitException: "
                               f"HTTP {code}") and out.stop.endswith("wait (an hour or more)")


def test_a_retry_after_past_the_deadline_stops_at_once_with_the_time_to_wait(ddg):
    ddg.push(status(202, "7200"))
    sleeps: list[float] = []
    out = backend(sleeps).search(query())
    assert (out.attempts, sleeps) == (1, [])
    assert "wait 7200 s, until" in out.stop and "(its Retry-After)" in out.stop


@pytest.mark.timeout(60)
def test_a_trickling_answer_ends_at_the_timeout(ddg):
    ddg.push(trickle(results("q"), 0.05), trickle(results("q"), 0.05))  # ~2 KB: 100 s
    sleeps: list[float] = []
    out = backend(sleeps, retries=1, timeout=1).search(query())
    assert out.status == "failed" and "timed out" in out.reason and out.attempts == 2


def add(cat: Catalog, rows: list[tuple[str, str, str]]) -> None:
    with cat.tx() as con:
        upsert_queries(con, [QueryRow(c, "USA", kind, "en", text, "table")
                             for c, kind, text in rows])


def test_the_run_wait_stops_a_crawl_resumably(tmp_path: Path, monkeypatch, capsys):
    """Refused connections: each query waits within --search-deadline, and once the waits in
    a row pass --search-run-wait the run stops, exit 2, every query still pending."""
    monkeypatch.setenv(BASE_URL_ENV, f"http://127.0.0.1:{closed_port()}")
    with Catalog.open(tmp_path / "w") as cat:
        add(cat, [(f"c{i}", "english", f"c{i}") for i in range(6)])
    sleeps: list[float] = []

    class Recorded(DdgsSearch):
        def __init__(self, **kw):
            super().__init__(**{**kw, "jitter": 0.0, "sleep": sleeps.append})

    monkeypatch.setattr(crawl_mod, "DdgsSearch", Recorded)
    argv = ["--workdir", str(tmp_path / "w"), "--countries", "USA", "--languages", "english",
            "--search-interval", "0", "--search-backoff", "4", "--search-deadline", "10",
            "--search-run-wait", "15", "--skip-download"]
    assert crawl_mod.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: the search backend has not answered through")
    assert "the next would pass --search-run-wait 15" in err
    assert "the queries stay pending" in err
    assert 4.0 <= sum(sleeps) <= 15.0 * 1.5
    with Catalog.open(tmp_path / "w") as cat:
        st = dict(cat.query("SELECT status, COUNT(*) FROM searches GROUP BY status"))
        assert cat.last_run("crawl")["status"] == "failed"
    assert st == {"pending": 6}


def test_a_rate_limited_crawl_stops_with_the_time_to_wait(tmp_path: Path, ddg, capsys):
    with Catalog.open(tmp_path / "w") as cat:
        add(cat, [(f"c{i}", "english", f"c{i}") for i in range(3)])
    ddg.push(page(), results("c0"), status(202, "3600"))  # c0 answered, then a block
    argv = ["--workdir", str(tmp_path / "w"), "--countries", "USA", "--languages", "english",
            "--search-interval", "0", "--skip-download"]
    assert crawl_mod.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "DuckDuckGo rate-limits this machine" in err and "wait 3600 s, until" in err
    assert "run the same command again" in err
    with Catalog.open(tmp_path / "w") as cat:
        st = {r[0]: r[1] for r in cat.query("SELECT search_query, status FROM searches")}
    assert st == {"c0": "ok", "c1": "pending", "c2": "pending"}


def test_a_skipped_query_neither_breaks_nor_resets_the_streak(tmp_path: Path, fake_ddgs,
                                                             monkeypatch):
    """fail, fail, skipped, fail, fail: four failures in a row for the block detector (a
    skipped query is not an answer); the run stops there, not after every query."""
    monkeypatch.setattr(FakeDDGS, "images", lambda self, q, **kw: (
        FakeDDGS.calls.update([q]), (_ for _ in ()).throw(DDGSException(DNS_ERROR)))[1])
    with Catalog.open(tmp_path / "w") as cat:
        add(cat, [("a", "english", "a"), ("a", "native", "a-native"), ("b", "english", "b"),
                  ("b", "native", "b"), ("c", "english", "c"), ("c", "native", "c-native"),
                  ("d", "english", "d"), ("d", "native", "d-native")])  # b native: skipped
        with pytest.raises(crawl_mod.SearchUnavailable, match="failed 4 queries in a row"):
            crawl_mod.crawl(cat, crawl_mod.CrawlConfig(
                countries="USA", skip_download=True, max_failed_searches=4),
                backend=backend([]))
    assert sum(FakeDDGS.calls.values()) == 4  # a, a-native, b, c: then it stopped


def test_the_eta_counts_answered_queries_only():
    pace = crawl_mod._Pace(10)
    assert pace.eta(False, 60.0) == "no query answered yet"  # a failure's waits: no pace
    assert pace.eta(True, 2.0) == "eta 00:16 at 2.0s/query"  # 8 left at 2 s each
    assert pace.eta(False, 90.0) == "eta 00:14 at 2.0s/query"
