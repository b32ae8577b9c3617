"""The crawl at internet scale, round trip through the REAL img2dataset package (issue 17 §3):
``builder.crawl.stage --export-urls`` -> ``img2dataset`` (its own venv, ``make setup-i2d``, run as a
subprocess against the local image server, re-encoding off) -> ``builder.ingest --img2dataset``
must leave the same catalog as the built-in downloader on the same URLs.

What is normalised, and why (img2dataset does not report it, or it is a time):
``fetched_at`` / ``run_id`` / ``images.first_seen`` (times and runs), ``attempts`` (img2dataset
keeps no count of its retries), ``content_type``, ``x_robots_tag`` and ``final_url`` (it keeps no
response headers and does not report redirects: the ingest leaves them NULL), ``http_status``
except on ``http_error`` (it reports a status only for failures), and the ``reason`` of failures
img2dataset decided itself (its own words; the status is compared). Reasons of the outcomes our
validation decides are compared, less the " via img2dataset" suffix.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from builder.catalog import Catalog
from builder.crawl.stage import CrawlConfig, crawl
from builder.ingest import main as ingest_main
from tests.builder.test_crawl import fetch_cfg, write_urls
from tests.fakes.image_server import ImageServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
IMG2DATASET = ROOT / ".venv-i2d" / "bin" / "img2dataset"

# Every image-server case img2dataset may be pointed at: none of these leaves 127.0.0.1 (the
# redirect to 169.254.169.254 and to ftp://example.org would, so they are not here).
PATHS = ["/img/a.jpg", "/img/b.png", "/img/c.webp", "/img/d.gif", "/same/one.jpg",
         "/same/two.jpg", "/truncated.jpg", "/html-as-image.jpg", "/bomb.png", "/noai.jpg",
         "/other-bot-noindex.jpg", "/loop", "/redirect-ok", "/gone.jpg", "/flaky.jpg",
         "/ratelimited.png", "/slow.jpg", "/big-declared.jpg"]
EXPECTED = {  # the built-in downloader's status per path (the test checks it, then the ingest)
    "/img/a.jpg": "ok", "/img/b.png": "ok", "/img/c.webp": "ok", "/img/d.gif": "ok",
    "/same/one.jpg": "duplicate", "/same/two.jpg": "ok",  # the earlier item keeps ok
    "/truncated.jpg": "corrupt_image", "/html-as-image.jpg": "not_an_image",
    "/bomb.png": "decompression_bomb", "/noai.jpg": "opted_out", "/other-bot-noindex.jpg": "ok",
    "/loop": "redirect_loop", "/redirect-ok": "duplicate",  # it redirects to /img/a.jpg
    "/gone.jpg": "http_error", "/flaky.jpg": "ok", "/ratelimited.png": "ok",
    "/slow.jpg": "timeout", "/big-declared.jpg": "too_large"}
VALIDATED = {"ok", "duplicate", "corrupt_image", "not_an_image", "decompression_bomb",
             "unsupported_format"}
NOT_REPORTED = ("fetched_at", "run_id", "attempts", "content_type", "x_robots_tag", "final_url")


@pytest.fixture(scope="module")
def server():
    with ImageServer(slow_seconds=6.0) as srv:  # well past both timeouts, even on a busy machine
        yield srv


@pytest.fixture(scope="module")
def urls_csv(server: ImageServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("i2d-urls")
    rows = [(("food", "THA", "th") if i % 2 else ("house", "JPN", "ja")) + (
        i // 2 + 1, server.url(p), f"https://page.example/{i}", f"title {i}")
        for i, p in enumerate(PATHS)]
    return write_urls(tmp / "urls.csv", rows)


def fetch() -> Any:
    return fetch_cfg(timeout=2.5, retries=1, backoff=0.01, max_bytes=20 * 1024 * 1024)


@pytest.fixture(scope="module")
def builtin(server: ImageServer, urls_csv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The catalog the built-in downloader makes."""
    server.hits.clear()
    wd = tmp_path_factory.mktemp("builtin") / "w"
    with Catalog.open(wd) as cat:
        crawl(cat, CrawlConfig(search=f"urls:{urls_csv}", fetch=fetch()))
    return wd


def run_img2dataset(urls: Path, out: Path, output_format: str) -> None:
    """The real package, as docs/crawl.md tells a user to run it (multiprocessing distributor)."""
    env = {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1"}  # its import otherwise goes online
    cmd = [str(IMG2DATASET), "--url_list", str(urls), "--input_format", "parquet",
           "--url_col", "url", "--save_additional_columns", '["item_id","concept","country"]',
           "--disable_all_reencoding", "True", "--output_format", output_format,
           "--output_folder", str(out), "--processes_count", "1", "--thread_count", "8",
           "--timeout", "2", "--retries", "1", "--number_sample_per_shard", "10",
           "--enable_wandb", "False"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def snapshot(wd: Path) -> dict[str, Any]:
    """The catalog's download outcome, with what img2dataset cannot report normalised."""
    with Catalog.open(wd) as cat:
        downloads = {}
        for r in cat.query("SELECT * FROM downloads"):
            d = {k: r[k] for k in r.keys() if k not in NOT_REPORTED}
            if d["status"] != "http_error":
                d["http_status"] = None
            if d["status"] in VALIDATED:
                d["reason"] = d["reason"].removesuffix(" via img2dataset")
            else:
                d["reason"] = None
            downloads[r["url"]] = d
        export = [{k: r[k] for k in r.keys() if k not in (*NOT_REPORTED, "reason", "http_status")}
                  for r in cat.query("SELECT * FROM downloads_export ORDER BY item_id")]
        images = [tuple(r) for r in cat.query(
            "SELECT sha256, ext, format, width, height, bytes FROM images ORDER BY sha256")]
        items = [tuple(r) for r in cat.query(
            "SELECT item_id, url, concept, country, language, rank, search_query, status, sha256 "
            "FROM items ORDER BY item_id")]
        files = {p.name: p.read_bytes() for p in cat.workdir.images_dir.rglob("*.*")}
    return {"downloads": downloads, "export": export, "images": images, "items": items,
            "files": files}


def test_builtin_downloader_gives_the_expected_statuses(builtin: Path, server: ImageServer) -> None:
    got = snapshot(builtin)["downloads"]
    assert {u.split(str(server.port), 1)[1]: d["status"] for u, d in got.items()} == EXPECTED


@pytest.fixture
def img2dataset_venv() -> Path:
    """The package's own venv; absent, the test skips (fails under CI, where `make test` built
    it, so a broken set-up is not a silent skip)."""
    if not IMG2DATASET.is_file():
        why = f"{IMG2DATASET.relative_to(ROOT)} is absent: `make setup-i2d` builds it"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return IMG2DATASET


@pytest.mark.parametrize("output_format", ["files", "parquet", "webdataset"])
def test_img2dataset_round_trip_equals_the_builtin_downloader(
        output_format: str, img2dataset_venv: Path, builtin: Path, server: ImageServer,
        urls_csv: Path, tmp_path: Path) -> None:
    wd, urls, out = tmp_path / "w", tmp_path / "urls.parquet", tmp_path / "i2d"
    with Catalog.open(wd) as cat:
        crawl(cat, CrawlConfig(search=f"urls:{urls_csv}", export_urls=str(urls), fetch=fetch()))
    server.hits.clear()  # the flaky and rate-limited paths fail the first request again
    run_img2dataset(urls, out, output_format)
    assert sum(server.hits.values()) >= len(PATHS)  # it really fetched from the server
    argv = ["--img2dataset", str(out), "--workdir", str(wd), "--allow-host", "127.0.0.1"]
    assert ingest_main(argv) == 0
    assert ingest_main(argv) == 0  # idempotent: a second ingest changes nothing
    want, got = snapshot(builtin), snapshot(wd)
    assert got["downloads"] == want["downloads"]
    assert got["export"] == want["export"]  # provenance columns, item statuses, sha256, sizes
    assert got["items"] == want["items"] and got["images"] == want["images"]
    # the stored bytes are the served bytes, content-addressed under the same names
    assert got["files"] == want["files"]
    served = {server.routes[p].body for p in PATHS if EXPECTED[p] == "ok" and p in server.routes
              } | {server.flaky_body, server.limited_body}
    assert len(served) == 8 and served == set(got["files"].values())
    with Catalog.open(wd) as cat:
        reasons = [r[0] for r in cat.query("SELECT reason FROM downloads WHERE status='ok'")]
        run = cat.last_run("ingest")
    assert all(r.endswith(" via img2dataset") and "re-encoded" not in r for r in reasons)
    assert run["status"] == "done"
