"""Stage crawl: urls:/folder: sources, provenance, idempotent re-runs, export, CLI errors."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builder.catalog import Catalog
from builder.crawl.download import FetchConfig
from builder.crawl.stage import CrawlConfig, crawl, main
from tests.fakes.image_server import ImageServer, image_bytes

pytestmark = pytest.mark.integration

EXPORT_COLUMNS = ["url", "concept", "country", "language", "rank", "status", "reason",
                  "http_status", "sha256", "bytes", "content_type", "width", "height"]


def write_urls(path: Path, rows: list[tuple]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["concept", "country", "language", "rank", "image_url", "page_url", "title"])
        w.writerows(rows)
    return path


def serve_jpegs(srv: ImageServer, n: int, seed: int) -> list[str]:
    """``n`` distinct 40x30 JPEGs on the fake server (``/f/<i>.jpg``); their URLs."""
    return [srv.url(srv.add(f"/f/{i}.jpg", image_bytes("JPEG", (40, 30), seed=seed + i)))
            for i in range(n)]


def urls_argv(tmp_path: Path, urls: list[str], *extra: str, concurrency: int = 1) -> list[str]:
    """The crawl's command line for ``urls`` (all food/THA, in rank order) as a URL CSV,
    work dir ``tmp_path/w``, the fake server's host allowed, no retries."""
    rows = [("food", "THA", "th", i + 1, u, "", "") for i, u in enumerate(urls)]
    return ["--workdir", str(tmp_path / "w"), "--search",
            f"urls:{write_urls(tmp_path / 'u.csv', rows)}", "--allow-host", "127.0.0.1",
            "--concurrency", str(concurrency), "--per-host", str(concurrency), "--retries", "0",
            *extra]


def failing_store(after: int, code: int, message: str):
    """A ``WorkDir.store_image_bytes`` that stores ``after`` images, then raises
    ``OSError(code, message)`` (a full or read-only disk)."""
    from builder.workdir import WorkDir

    real = WorkDir.store_image_bytes
    stored: list[str] = []

    def store(self, data, ext):
        if len(stored) >= after:
            raise OSError(code, message, str(self.images_dir / "ab" / "x.tmp"))
        stored.append(ext)
        return real(self, data, ext)

    return store


def fetch_cfg(**kw) -> FetchConfig:
    base = dict(timeout=10.0, retries=1, backoff=0.01, allow_hosts=frozenset({"127.0.0.1"}))
    return FetchConfig(**{**base, **kw})


@pytest.fixture
def server():
    with ImageServer() as srv:
        yield srv


def test_urls_crawl_statuses_and_provenance(tmp_path: Path, server: ImageServer) -> None:
    u = server.url
    f = write_urls(tmp_path / "u.csv", [
        ("food", "THA", "th", 1, u("/img/a.jpg"), "https://p/1", "Thai food"),
        ("food", "THA", "th", 2, u("/same/one.jpg"), "https://p/2", "same A"),
        ("food", "JPN", "ja", 1, u("/same/two.jpg"), "https://p/3", "same B"),
        ("food", "JPN", "ja", 2, u("/gone.jpg"), "", ""),
        ("food", "Japan", "ja", 3, u("/img/a.jpg"), "https://p/4", "same URL again"),
        ("house", "GER", "de", 1, u("/noai.jpg"), "", ""),
        ("house", "Narnia", "xx", 1, u("/img/b.png"), "", ""),
        ("house", "DEU", "de", 0, u("/img/b.png"), "", ""),
    ])
    with Catalog.open(tmp_path / "w") as cat:
        res = crawl(cat, CrawlConfig(search=f"urls:{f}", fetch=fetch_cfg()))
        rows = [dict(r) for r in cat.query("SELECT * FROM downloads_export")]
        errors = [dict(r) for r in cat.query("SELECT line, reason FROM crawl_input_errors")]
        run = cat.last_run("crawl")
    assert set(EXPORT_COLUMNS) <= set(rows[0])
    got = [(r["concept"], r["country"], r["language"], r["rank"], r["url"].split(str(server.port))[1],
            r["status"], r["item_status"]) for r in rows]
    assert got == [
        ("food", "JPN", "ja", 1, "/same/two.jpg", "ok", "ok"),
        ("food", "JPN", "ja", 2, "/gone.jpg", "http_error", "failed"),
        ("food", "JPN", "ja", 3, "/img/a.jpg", "ok", "ok"),
        ("food", "THA", "th", 1, "/img/a.jpg", "ok", "ok"),
        ("food", "THA", "th", 2, "/same/one.jpg", "duplicate", "ok"),
        ("house", "DEU", "de", 1, "/noai.jpg", "opted_out", "failed"),
    ]
    assert rows[0]["sha256"] == rows[4]["sha256"] and rows[4]["reason"] == (
        f"same bytes as {u('/same/two.jpg')}")
    a = rows[3]
    assert (a["http_status"], a["content_type"], a["width"], a["height"], a["format"]) == (
        200, "image/jpeg", 64, 48, "JPEG")
    assert a["bytes"] == len(server.jpeg) and a["page_url"] == "https://p/1"
    assert a["title"] == "Thai food" and a["backend"] == f"urls:{f}" and a["fetched_at"]
    assert rows[1]["reason"] == "HTTP 404 Not Found"
    assert server.hits["/img/a.jpg"] == 1  # one URL under two items is fetched once
    assert sorted((e["line"], e["reason"][:16]) for e in errors) == [
        ("8", "unknown country "), ("9", "rank must be a p")]
    assert run["status"] == "done"
    counts = json.loads(run["counts_json"])
    assert counts["urls"] == {"duplicate": 1, "http_error": 1, "ok": 2, "opted_out": 1}
    assert counts["by_country"]["JPN"] == {"failed": 1, "ok": 2}
    assert res.counts["input_errors"] == 2 and "urls:" in res.summary


def test_rerun_is_idempotent_and_fetches_nothing(tmp_path: Path, server: ImageServer) -> None:
    f = write_urls(tmp_path / "u.csv", [("food", "THA", "th", i, server.url(p), "", "")
                                        for i, p in enumerate(["/img/a.jpg", "/img/b.png",
                                                               "/gone.jpg"], start=1)])

    def snapshot(cat: Catalog) -> list:
        return [tuple(r) for r in cat.query(
            "SELECT url, status, reason, sha256, item_status FROM downloads_export")]

    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"urls:{f}", fetch=fetch_cfg()))
        first, hits = snapshot(cat), dict(server.hits)
        crawl(cat, CrawlConfig(search=f"urls:{f}", fetch=fetch_cfg()))
        assert snapshot(cat) == first and dict(server.hits) == hits
        assert cat.query("SELECT COUNT(*) FROM stage_runs WHERE stage='crawl'")[0][0] == 2


def test_retry_failed_refetches_transient_failures(tmp_path: Path) -> None:
    with ImageServer(fail_times=3) as srv:
        f = write_urls(tmp_path / "u.csv", [("food", "THA", "th", 1, srv.url("/flaky.jpg"), "", ""),
                                            ("food", "THA", "th", 2, srv.url("/gone.jpg"), "", "")])
        with Catalog.open(tmp_path / "w") as cat:
            crawl(cat, CrawlConfig(search=f"urls:{f}", fetch=fetch_cfg(retries=0)))
            crawl(cat, CrawlConfig(search=f"urls:{f}", fetch=fetch_cfg(retries=0)))
            assert srv.hits["/flaky.jpg"] == 1
            crawl(cat, CrawlConfig(search=f"urls:{f}", retry_failed=True,
                                   fetch=fetch_cfg(retries=2)))
            st = {r["url"]: r["status"] for r in cat.query("SELECT url, status FROM downloads")}
        assert srv.hits["/flaky.jpg"] == 4 and srv.hits["/gone.jpg"] == 1
    assert st[srv.url("/flaky.jpg")] == "ok"


def test_folder_source(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    (root / "food" / "THA").mkdir(parents=True)
    (root / "food" / "Japan").mkdir(parents=True)
    (root / "food" / "Atlantis").mkdir(parents=True)
    (root / "food" / "THA" / "b.png").write_bytes(image_bytes("PNG", seed=1))
    (root / "food" / "THA" / "a.jpg").write_bytes(image_bytes("JPEG", seed=2))
    (root / "food" / "THA" / "notes.txt").write_text("not an image")
    (root / "food" / "Japan" / "x.webp").write_bytes(image_bytes("WEBP", seed=3))
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(image_bytes("JPEG", seed=4))
    (root / "food" / "Japan" / "y.jpg").symlink_to(outside)
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{root}", fetch=fetch_cfg()))
        rows = [(r["country"], r["rank"], r["title"], r["status"])
                for r in cat.query("SELECT * FROM downloads_export")]
        err = cat.query("SELECT line, reason FROM crawl_input_errors")
        kinds = {r["kind"] for r in cat.query("SELECT kind FROM searches")}
    assert rows == [("JPN", 1, "x.webp", "ok"), ("JPN", 2, "y.jpg", "blocked_host"),
                    ("THA", 1, "a.jpg", "ok"), ("THA", 2, "b.png", "ok"),
                    ("THA", 3, "notes.txt", "not_an_image")]
    assert [(e["line"], e["reason"][:15]) for e in err] == [("food/Atlantis", "unknown country")]
    assert kinds == {"folder"}


def test_country_and_concept_filters(tmp_path: Path, server: ImageServer) -> None:
    f = write_urls(tmp_path / "u.csv", [("food", "THA", "th", 1, server.url("/img/a.jpg"), "", ""),
                                        ("food", "JPN", "ja", 1, server.url("/img/b.png"), "", ""),
                                        ("house", "THA", "th", 1, server.url("/img/c.webp"), "", "")])
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"urls:{f}", countries="THA", concepts="food",
                               fetch=fetch_cfg()))
        got = [(r["concept"], r["country"]) for r in cat.query("SELECT * FROM searches")]
    assert got == [("food", "THA")]
    assert server.hits["/img/b.png"] == 0 and server.hits["/img/c.webp"] == 0


def test_export_urls_for_img2dataset(tmp_path: Path, server: ImageServer) -> None:
    f = write_urls(tmp_path / "u.csv", [
        ("food", "THA", "th", 1, server.url("/img/a.jpg"), "https://p", "t"),
        ("food", "JPN", "ja", 1, server.url("/img/a.jpg"), "", ""),
        ("food", "JPN", "ja", 2, server.url("/img/b.png"), "", ""),
        ("food", "JPN", "ja", 3, "ftp://example.org/x.jpg", "", "")])
    out = tmp_path / "urls.parquet"
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"urls:{f}", export_urls=str(out), fetch=fetch_cfg()))
        pending = cat.query("SELECT COUNT(*) FROM items WHERE status='pending'")[0][0]
    table = pq.read_table(out).to_pylist()
    assert sum(server.hits.values()) == 0 and pending == 4
    assert [(r["url"].rsplit("/", 1)[1], r["concept"], r["country"], r["rank"]) for r in table] == [
        ("a.jpg", "food", "JPN", 1), ("b.png", "food", "JPN", 2)]
    assert {"url", "item_id", "language", "page_url", "title", "search_query", "backend"} <= set(
        table[0])


def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = ["--workdir", str(tmp_path / "w")]
    assert main(["--search", "bing", *w]) == 2
    assert "--search must be ddgs" in capsys.readouterr().err
    assert main(["--countries", "Narnia", *w]) == 2
    assert "unknown country 'Narnia'" in capsys.readouterr().err
    assert main(["--languages", "french", *w]) == 2
    f = write_urls(tmp_path / "u.csv", [("food", "THA", "th", 1, "http://x/a.jpg", "", "")])
    assert main(["--search", f"urls:{f}", "--concepts", "food,drink", *w]) == 2
    assert "--concepts: no queries or images for drink" in capsys.readouterr().err
    assert main(["--search", f"urls:{tmp_path / 'missing.csv'}", *w]) == 2
    assert main(w) == 2  # no queries in the catalog yet
    assert "builder.queries" in capsys.readouterr().err


def test_builder_export_downloads_writes_the_provenance_view(tmp_path: Path) -> None:
    """`python -m pipeline export downloads` writes the downloads_export view's columns."""
    from pipeline.cli import main as pipeline_main

    root = tmp_path / "photos"
    (root / "food" / "THA").mkdir(parents=True)
    (root / "food" / "THA" / "a.jpg").write_bytes(image_bytes("JPEG", seed=2))
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{root}", fetch=fetch_cfg()))
    out = tmp_path / "downloads.csv"
    assert pipeline_main(["--workdir", str(tmp_path / "w"), "export", "downloads", "--out",
                         str(out)]) == 0
    with out.open() as f:
        rows = list(csv.DictReader(f))
    need = {"url", "concept", "country", "language", "rank", "status", "reason", "http_status",
            "sha256", "bytes", "content_type", "width", "height"}
    assert need <= set(rows[0]) and len(rows) == 1
    assert (rows[0]["concept"], rows[0]["country"], rows[0]["status"]) == ("food", "THA", "ok")
    raw = tmp_path / "raw.csv"
    assert pipeline_main(["--workdir", str(tmp_path / "w"), "export", "downloads:raw", "--out",
                         str(raw)]) == 0
    with raw.open() as f:
        assert "concept" not in next(csv.reader(f))


def test_a_file_name_that_is_not_utf8_is_an_input_error_and_the_crawl_goes_on(
        tmp_path: Path) -> None:
    root = tmp_path / "photos"
    (root / "food" / "THA").mkdir(parents=True)
    (root / "food" / "THA" / "a.jpg").write_bytes(image_bytes("JPEG", seed=2))
    bad = os.fsencode(root / "food" / "THA") + b"/caf\xe9.jpg"  # Latin-1, not UTF-8
    with open(bad, "wb") as f:
        f.write(image_bytes("JPEG", seed=3))
    os.mkdir(os.fsencode(root) + b"/dr\xefnk")  # a concept folder, the same
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{root}", fetch=fetch_cfg()))
        rows = [(r["country"], r["title"], r["status"])
                for r in cat.query("SELECT * FROM downloads_export")]
        err = [(e["line"], e["reason"]) for e in cat.query(
            "SELECT line, reason FROM crawl_input_errors ORDER BY line")]
    assert rows == [("THA", "a.jpg", "ok")]
    assert err == [("dr\\xefnk", "name is not valid UTF-8; rename it"),
                   ("food/THA/caf\\xe9.jpg", "name is not valid UTF-8; rename it")]
