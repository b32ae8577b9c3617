"""The ddgs backend against a fake ``DDGS`` class, and planning from the ``queries`` table."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import ddgs
import pytest
from ddgs.exceptions import DDGSException, TimeoutException

from builder.catalog import Catalog
from builder.concepts import add_concept
from builder.crawl.search import AMBIGUOUS, PROBE_QUERY, DdgsSearch, Search
from builder.crawl.stage import CrawlConfig, crawl
from builder.queries import QueryRow, upsert_queries
from builder.statuses import ConceptStatus


class FakeDDGS:
    """Stands in for ``ddgs.DDGS``: behaviour chosen by the query text."""

    calls: Counter[str] = Counter()  # by query text
    by_region: Counter[tuple[str, str]] = Counter()
    kwargs: list[dict] = []
    crash_on: str | None = None

    def __init__(self, proxy=None, timeout=5, **kw):
        self.timeout = timeout

    def images(self, query: str, **kw):
        FakeDDGS.calls[query] += 1
        FakeDDGS.by_region[(query, kw.get("region"))] += 1
        FakeDDGS.kwargs.append({"query": query, **kw})
        n = FakeDDGS.calls[query]
        if query == FakeDDGS.crash_on:
            raise KeyboardInterrupt  # the process dies mid-crawl
        if query.startswith("blocked once") and n <= 1:
            raise DDGSException("No results found.")
        if query.startswith("blocked twice") and n <= 2:
            raise DDGSException("No results found.")
        if query.startswith(("unknown", "always blocked")):
            raise DDGSException("No results found.")
        if query.startswith("slow"):
            raise TimeoutException("timed out")
        if query.startswith("nothing"):
            return []
        return [{"title": f"{query} {i}", "image": f"https://img.example/{query}/{i}.jpg",
                 "thumbnail": "https://t", "url": f"https://page.example/{i}",
                 "height": "480", "width": 640, "source": "Bing"} for i in range(12)]


@pytest.fixture
def fake_ddgs(monkeypatch: pytest.MonkeyPatch):
    FakeDDGS.calls = Counter()
    FakeDDGS.by_region = Counter()
    FakeDDGS.kwargs = []
    FakeDDGS.crash_on = None
    monkeypatch.setattr(ddgs, "DDGS", FakeDDGS)
    return FakeDDGS


def backend(sleeps: list[float], **kw) -> DdgsSearch:
    clock = iter(range(10**6))
    opts = dict(per_query=10, min_interval=2.0, jitter=0.0, retries=3, backoff=5.0,
                sleep=sleeps.append, clock=lambda: float(next(clock)) * 0.0)
    return DdgsSearch(**{**opts, **kw})


def search(text: str, region: str = "th-th") -> Search:
    return Search("food", "THA", "th", "native", text, DdgsSearch.backend, region)


def test_results_carry_rank_fields_and_region(fake_ddgs) -> None:
    out = backend([]).search(search("อาหาร"))
    assert (out.status, out.attempts, len(out.hits)) == ("ok", 1, 10)
    h = out.hits[2]
    assert (h.rank, h.image_url, h.page_url, h.title, h.width, h.height) == (
        3, "https://img.example/อาหาร/2.jpg", "https://page.example/2", "อาหาร 2", 640, 480)
    assert json.loads(h.raw_json)["source"] == "Bing" and json.loads(h.raw_json)["height"] == "480"
    kw = fake_ddgs.kwargs[0]
    assert (kw["region"], kw["backend"], kw["max_results"]) == ("th-th", "duckduckgo", 10)


def test_no_results_exception_is_backed_off_then_retried_once(fake_ddgs) -> None:
    sleeps: list[float] = []
    out = backend(sleeps).search(search("blocked once"))
    assert (out.status, out.attempts, out.ambiguous) == ("ok", 2, False)
    # one backoff (5 s times a jitter in [1, 1.5])
    backoffs = [s for s in sleeps if s >= 5.0]
    assert len(backoffs) == 1 and 5.0 <= backoffs[0] <= 7.5


def test_no_results_twice_is_an_ambiguous_empty_not_a_failure(fake_ddgs) -> None:
    """ddgs 9.16 says "No results found." for a block and for a query with no images alike:
    one bounded retry, then ``empty`` with a reason that says so (not five backoffs, not
    ``failed``)."""
    sleeps: list[float] = []
    b = backend(sleeps)
    blocked = b.search(search("blocked twice"))
    assert (blocked.status, blocked.attempts, blocked.ambiguous) == ("empty", 2, True)
    assert blocked.reason.startswith(AMBIGUOUS) and "or a block" in blocked.reason
    assert len([s for s in sleeps if s >= 5.0]) == 1
    assert b.search(search("always blocked")).attempts == 2


def test_timeouts_fail_with_reason_and_a_true_empty_is_not_ambiguous(fake_ddgs) -> None:
    b = backend([])
    slow = b.search(search("slow"))
    assert (slow.status, slow.attempts) == ("failed", 4)
    assert slow.reason.startswith("TimeoutException: timed out")
    assert "gave up after 4 attempts" in slow.reason
    empty = b.search(search("nothing"))
    assert (empty.status, empty.attempts, empty.ambiguous) == ("empty", 1, False)


def test_pacing_between_requests(fake_ddgs) -> None:
    sleeps: list[float] = []
    b = backend(sleeps)
    for q in ("a", "b", "c"):
        b.search(search(q))
    assert sleeps == [2.0, 2.0]  # none before the first request; clock frozen at 0


def add_queries(cat: Catalog) -> None:
    with cat.tx() as con:
        for name, status in [("food", ConceptStatus.KEPT), ("house", ConceptStatus.KEPT),
                             ("meal", ConceptStatus.MERGED)]:
            add_concept(con, name, "curated", status)
        rows = []
        for concept in ("food", "house", "meal"):
            for code, lang, native in (("THA", "th", f"{concept}-th"), ("USA", "en", concept),
                                       ("KEN", "sw", f"{concept}-sw")):
                rows.append(QueryRow(concept, code, "english", "en", concept, "table"))
                rows.append(QueryRow(concept, code, "native", lang, native, "table"))
        rows[-1] = rows[-1]._replace(text="always blocked")
        upsert_queries(con, rows)
        con.execute("UPDATE queries SET text='always blocked' WHERE concept='house' "
                    "AND country='KEN' AND kind='native'")


def test_crawl_plans_kept_concepts_regions_and_skips_same_text(tmp_path: Path, fake_ddgs) -> None:
    with Catalog.open(tmp_path / "w") as cat:
        add_queries(cat)
        crawl(cat, CrawlConfig(skip_download=True, per_query=3), backend=backend([], per_query=3))
        rows = [tuple(r) for r in cat.query(
            "SELECT concept, country, kind, language, region, status, n_results FROM searches "
            "ORDER BY search_id")]
        items = cat.query("SELECT COUNT(*) FROM items WHERE status='pending'")[0][0]
        empty = cat.query("SELECT reason FROM searches WHERE status='empty'")
    assert rows == [
        ("food", "KEN", "english", "en", "wt-wt", "ok", 3),
        ("food", "KEN", "native", "sw", "wt-wt", "ok", 3),
        ("food", "THA", "english", "en", "th-th", "ok", 3),
        ("food", "THA", "native", "th", "th-th", "ok", 3),
        ("food", "USA", "english", "en", "us-en", "ok", 3),
        ("food", "USA", "native", "en", "us-en", "skipped", 0),
        ("house", "KEN", "english", "en", "wt-wt", "ok", 3),
        ("house", "KEN", "native", "sw", "wt-wt", "empty", 0),
        ("house", "THA", "english", "en", "th-th", "ok", 3),
        ("house", "THA", "native", "th", "th-th", "ok", 3),
        ("house", "USA", "english", "en", "us-en", "ok", 3),
        ("house", "USA", "native", "en", "us-en", "skipped", 0),
    ]
    assert items == 27 and empty[0]["reason"].startswith(AMBIGUOUS)
    assert fake_ddgs.calls["meal"] == 0  # merged concepts are not searched


def test_search_phase_resumes_without_searching_twice(tmp_path: Path, fake_ddgs) -> None:
    with Catalog.open(tmp_path / "w") as cat:
        add_queries(cat)
        fake_ddgs.crash_on = "house-th"
        with pytest.raises(KeyboardInterrupt):
            crawl(cat, CrawlConfig(skip_download=True), backend=backend([]))
        done = {(r["search_query"], r["region"]) for r in cat.query(
            "SELECT search_query, region FROM searches WHERE status='ok'")}
        assert ("food-th", "th-th") in done and ("house-th", "th-th") not in done
        assert cat.last_run("crawl")["status"] == "interrupted"
        fake_ddgs.crash_on = None
        crawl(cat, CrawlConfig(skip_download=True), backend=backend([]))
        n_items = cat.query("SELECT COUNT(*) FROM items")[0][0]
    assert len(done) == 7 and all(fake_ddgs.by_region[q] == 1 for q in done)
    assert fake_ddgs.calls["house-th"] == 2  # the interrupted query ran again, once
    assert n_items == 9 * 10
    # the ambiguous empty is not searched again by a plain re-run, only with --retry-failed
    assert fake_ddgs.calls["always blocked"] == 2
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(skip_download=True), backend=backend([]))
        assert fake_ddgs.calls["always blocked"] == 2
        crawl(cat, CrawlConfig(skip_download=True, retry_failed=True), backend=backend([]))
    assert fake_ddgs.calls["always blocked"] == 4 and fake_ddgs.calls["food-th"] == 1


def test_backend_down_stops_with_one_line_and_leaves_queries_pending(
        tmp_path: Path, fake_ddgs, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from builder.crawl import stage as crawl_mod

    with Catalog.open(tmp_path / "w") as cat:
        add_queries(cat)
    monkeypatch.setattr(FakeDDGS, "images", lambda self, q, **kw: (_ for _ in ()).throw(
        DDGSException("No results found.")))

    class Fast(DdgsSearch):
        def __init__(self, **kw):
            super().__init__(**{**kw, "min_interval": 0.0, "jitter": 0.0, "backoff": 0.0})

    monkeypatch.setattr(crawl_mod, "DdgsSearch", Fast)
    argv = ["--workdir", str(tmp_path / "w"), "--search-retries", "1",
            "--max-failed-searches", "3", "--skip-download"]
    assert crawl_mod.main(argv) == 2
    err = capsys.readouterr().err
    assert "'No results found.' to 3 queries in a row and to the probe query" in err
    assert "most likely a rate limit" in err and "run the same command again" in err
    with Catalog.open(tmp_path / "w") as cat:
        st = dict(cat.query("SELECT status, COUNT(*) FROM searches GROUP BY status"))
        run = cat.last_run("crawl")
    assert st == {"pending": 12}  # the 3 answers went back to pending; nothing else ran
    assert run["status"] == "failed" and "rate limit" in run["summary"]


def test_a_run_of_true_empties_is_told_from_a_block_by_the_probe(tmp_path: Path,
                                                                  fake_ddgs) -> None:
    """Several "No results found." in a row on different queries: the probe query gets
    results, so they are real empties (recorded ``empty``) and the run goes on."""
    with Catalog.open(tmp_path / "w") as cat:
        with cat.tx() as con:
            upsert_queries(con, [
                QueryRow(c, "THA", "english", "en", text, "table")
                for c, text in [(c, f"unknown {c}") for c in ("a1", "a2", "a3", "a4")]
                + [("b", "bread")]])
        crawl(cat, CrawlConfig(skip_download=True, languages=("english",),
                               max_failed_searches=3), backend=backend([]))
        st = {r[0]: (r[1], r[2]) for r in cat.query(
            "SELECT search_query, status, n_results FROM searches")}
    assert st == {"unknown a1": ("empty", 0), "unknown a2": ("empty", 0),
                  "unknown a3": ("empty", 0), "unknown a4": ("empty", 0), "bread": ("ok", 10)}
    assert fake_ddgs.calls[PROBE_QUERY] == 1  # once, after the third
    assert fake_ddgs.by_region[(PROBE_QUERY, "wt-wt")] == 1


@pytest.mark.integration
def test_queries_stage_then_crawl_then_dedup(tmp_path: Path, fake_ddgs, monkeypatch) -> None:
    """The real ``queries`` stage (offline) feeds the crawl; downloads come from 127.0.0.1."""
    from builder import queries
    from builder.crawl.stage import main as crawl_main
    from builder.image_dedup import DedupConfig, image_dedup
    from tests.fakes.image_server import ImageServer, image_bytes

    wd = str(tmp_path / "w")
    assert queries.main(["--workdir", wd, "--llm", "offline", "--countries", "THA,USA"]) == 0
    with ImageServer() as srv:
        for i in range(6):
            srv.add(f"/p/{i}.jpg", image_bytes("JPEG", (80, 60), seed=i))

        def images(self, query, **kw):  # 3 results per query; two queries share one picture
            FakeDDGS.calls[query] += 1
            k = sum(map(ord, query)) % 4
            return [{"title": query, "image": srv.url(f"/p/{k + r}.jpg"), "url": "https://p",
                     "height": 60, "width": 80} for r in range(3)]

        monkeypatch.setattr(FakeDDGS, "images", images)
        argv = ["--workdir", wd, "--concepts", "train,costume", "--per-query", "3",
                "--allow-host", "127.0.0.1", "--search-interval", "0"]
        assert crawl_main(argv) == 0
        assert sum(srv.hits.values()) <= 6  # each distinct URL fetched once
        with Catalog.open(wd) as cat:
            searches = dict(cat.query("SELECT status, COUNT(*) FROM searches GROUP BY status"))
            out = image_dedup(cat, DedupConfig(model=None))
            rows = cat.query("SELECT * FROM downloads_export")
    assert searches == {"ok": 6, "skipped": 2}  # USA's native query equals its English one
    assert len(rows) == 18 and {r["status"] for r in rows} == {"ok"}
    assert {r["region"] for r in rows} == {"th-th", "us-en"}
    distinct = len({(r["concept"], r["sha256"]) for r in rows})
    assert out["items"] == {"kept": distinct, "duplicate": 18 - distinct}
