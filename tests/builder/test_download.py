"""The downloader against the local image server: every hostile case ends with its status."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from builder.crawl.download import (
    Downloader,
    FetchConfig,
    FetchResult,
    inspect_image,
    interleave_hosts,
    robots_opt_out,
)
from builder.crawl.netguard import address_blocked
from builder.retry import parse_retry_after
from builder.workdir import WorkDir
from tests.fakes.image_server import ImageServer, bomb_png, image_bytes

pytestmark = pytest.mark.integration

LOCAL = frozenset({"127.0.0.1"})

# path -> (status, http_status, attempts)
EXPECTED = {
    "/img/a.jpg": ("ok", 200, 1),
    "/img/b.png": ("ok", 200, 1),
    "/img/c.webp": ("ok", 200, 1),
    "/img/d.gif": ("ok", 200, 1),
    "/same/one.jpg": ("ok", 200, 1),
    "/same/two.jpg": ("ok", 200, 1),
    "/gone.jpg": ("http_error", 404, 1),
    "/flaky.jpg": ("ok", 200, 2),
    "/ratelimited.png": ("ok", 200, 2),
    "/truncated.jpg": ("corrupt_image", 200, 1),
    "/html-as-image.jpg": ("not_an_image", 200, 1),
    "/big-declared.jpg": ("too_large", 200, 1),
    "/big-chunked.jpg": ("too_large", 200, 1),
    "/bomb.png": ("decompression_bomb", 200, 1),
    "/loop": ("redirect_loop", None, 1),
    "/to-metadata": ("blocked_host", None, 1),
    "/to-ftp": ("unsupported_scheme", None, 1),
    "/redirect-ok": ("ok", 200, 1),
    "/noai.jpg": ("opted_out", 200, 1),
    "/other-bot-noindex.jpg": ("ok", 200, 1),
}


@pytest.fixture(scope="module")
def fetched(tmp_path_factory: pytest.TempPathFactory):
    """One download run over every case (the server's hit counts come with it)."""
    with ImageServer() as srv:
        wd = WorkDir.open(tmp_path_factory.mktemp("wd"))
        cfg = FetchConfig(timeout=15.0, retries=1, backoff=0.01, allow_hosts=LOCAL,
                          concurrency=8, per_host=8)
        results: list[FetchResult] = []
        t0 = time.monotonic()
        Downloader(cfg, wd).run([srv.url(p) for p in EXPECTED], results.append)
        elapsed = time.monotonic() - t0
        by_path = {r.url.split(str(srv.port), 1)[1]: r for r in results}
        yield srv, wd, by_path, elapsed, len(results)


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_every_case_ends_with_its_status(fetched, path: str) -> None:
    _, wd, by_path, _, _ = fetched
    status, http_status, attempts = EXPECTED[path]
    res = by_path[path]
    assert (res.status, res.http_status, res.attempts) == (status, http_status, attempts), res
    assert res.reason
    assert res.data is None  # bytes never linger in results
    if status == "ok":
        stored = wd.image_path(res.sha256, res.ext)
        assert stored.is_file() and stored.stat().st_size == res.nbytes
    else:
        assert res.sha256 is None


def test_one_result_per_url_and_exact_hits(fetched) -> None:
    srv, _, by_path, _, n = fetched
    assert n == len(EXPECTED) == len(by_path)
    assert srv.hits["/loop"] == 1 and srv.hits["/to-metadata"] == 1
    assert srv.hits["/flaky.jpg"] == 2 and srv.hits["/ratelimited.png"] == 2
    assert srv.hits["/redirect-ok"] == 1 and srv.hits["/img/a.jpg"] == 2
    assert "/latest/meta-data/" not in srv.hits


def test_retry_after_is_honoured(fetched) -> None:
    srv, _, _, elapsed, _ = fetched
    first, second = srv.hit_times["/ratelimited.png"]
    assert second - first >= 1.0  # the 429 said "Retry-After: 1"; the backoff alone is 0.01 s
    flaky = srv.hit_times["/flaky.jpg"]  # a 500 without Retry-After: the backoff only
    assert flaky[1] - flaky[0] < 0.9 and elapsed >= 1.0


def test_same_bytes_are_stored_once(fetched) -> None:
    _, wd, by_path, _, _ = fetched
    one, two = by_path["/same/one.jpg"], by_path["/same/two.jpg"]
    assert one.sha256 == two.sha256
    assert len(list(wd.images_dir.rglob(f"{one.sha256}.*"))) == 1


def test_reasons_name_the_problem(fetched) -> None:
    _, _, by_path, _, _ = fetched
    assert "169.254.169.254" in by_path["/to-metadata"].reason
    assert "link-local" in by_path["/to-metadata"].reason
    assert by_path["/noai.jpg"].reason == "X-Robots-Tag: noai"
    assert "Content-Length 52428800" in by_path["/big-declared.jpg"].reason
    assert "stopped reading" in by_path["/big-chunked.jpg"].reason
    assert by_path["/gone.jpg"].reason == "HTTP 404 Not Found"
    assert by_path["/img/a.jpg"].reason == "JPEG 64x48"


def test_slow_response_times_out_and_is_retried(tmp_path) -> None:
    with ImageServer(slow_seconds=2.0) as srv:
        out: list[FetchResult] = []
        cfg = FetchConfig(timeout=0.5, retries=1, backoff=0.01, allow_hosts=LOCAL)
        Downloader(cfg, WorkDir.open(tmp_path)).run([srv.url("/slow.jpg")], out.append)
        assert srv.hits["/slow.jpg"] == 2
    assert (out[0].status, out[0].http_status, out[0].attempts) == ("timeout", None, 2)
    assert out[0].reason == "no complete response within 0.5s (after 2 attempts)"


def test_loopback_is_refused_without_allow_host(tmp_path) -> None:
    with ImageServer() as srv:
        out: list[FetchResult] = []
        Downloader(FetchConfig(retries=0), WorkDir.open(tmp_path)).run(
            [srv.url("/img/a.jpg"), "http://[::1]:9/x.jpg", "file:///etc/passwd", "nonsense"],
            out.append)
        assert srv.hits["/img/a.jpg"] == 0
    got = {r.url: r.status for r in out}
    assert got[srv.url("/img/a.jpg")] == "blocked_host"
    assert got["http://[::1]:9/x.jpg"] == "blocked_host"
    assert got["file:///etc/passwd"] == "blocked_host"  # outside every search folder
    assert got["nonsense"] == "invalid_url"


def test_retries_are_bounded(tmp_path) -> None:
    with ImageServer(fail_times=100) as srv:
        out: list[FetchResult] = []
        cfg = FetchConfig(retries=2, backoff=0.01, allow_hosts=LOCAL)
        Downloader(cfg, WorkDir.open(tmp_path)).run([srv.url("/flaky.jpg")], out.append)
        assert srv.hits["/flaky.jpg"] == 3
    assert (out[0].status, out[0].http_status, out[0].attempts) == ("http_error", 500, 3)
    assert out[0].reason == "HTTP 500 Internal Server Error (after 3 attempts)"


def test_long_retry_after_gives_up(tmp_path) -> None:
    with ImageServer() as srv:
        srv.add("/busy.jpg", b"", status=503, headers={"Retry-After": "3600"})
        out: list[FetchResult] = []
        cfg = FetchConfig(retries=3, max_retry_after=5, allow_hosts=LOCAL)
        Downloader(cfg, WorkDir.open(tmp_path)).run([srv.url("/busy.jpg")], out.append)
        assert srv.hits["/busy.jpg"] == 1
    assert out[0].status == "http_error" and "Retry-After 3600s exceeds the cap 5s" in out[0].reason


def test_address_blocked() -> None:
    assert address_blocked("8.8.8.8") is None
    assert address_blocked("2606:4700:4700::1111") is None
    assert "loopback" in address_blocked("127.0.0.1")
    assert "private" in address_blocked("10.1.2.3")
    assert "private" in address_blocked("192.168.0.1")
    assert "link-local" in address_blocked("169.254.169.254")
    assert "loopback" in address_blocked("::ffff:127.0.0.1")
    assert "unspecified" in address_blocked("0.0.0.0")
    assert address_blocked("100.64.0.1") is not None  # carrier-grade NAT: not global


def test_robots_directives() -> None:
    assert robots_opt_out("noai") == "noai"
    assert robots_opt_out("noindex, nofollow") == "noindex"
    assert robots_opt_out("NoImageAI") == "noimageai"
    assert robots_opt_out("googlebot: noindex") is None
    assert robots_opt_out("xcm3: noai") == "noai"
    assert robots_opt_out("nofollow") is None
    assert robots_opt_out(None) is None


def test_retry_after_parsing() -> None:
    assert parse_retry_after("7") == 7.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= parse_retry_after(later) <= 31
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_inspect_image() -> None:
    assert inspect_image(image_bytes("PNG", (10, 7)), 1000)[:2] == ("ok", "PNG 10x7")
    status, reason, _ = inspect_image(image_bytes("PNG", (40, 30)), 1000)
    assert status == "decompression_bomb" and "1200 pixels exceeds the cap 1000" in reason
    assert inspect_image(bomb_png(2000), 10**6)[0] == "decompression_bomb"
    assert inspect_image(b"GIF89a garbage", 1000)[0] in ("not_an_image", "corrupt_image")
    assert inspect_image(b"hello", 1000)[0] == "not_an_image"


def test_interleave_hosts_round_robin() -> None:
    urls = ["http://a/1", "http://a/2", "http://a/3", "http://b/1", "http://c/1", "http://b/2"]
    assert interleave_hosts(urls) == ["http://a/1", "http://b/1", "http://c/1", "http://a/2",
                                      "http://b/2", "http://a/3"]


def test_http2_option_and_unexpected_errors_are_recorded(tmp_path, monkeypatch) -> None:
    import builder.crawl.download as dl

    def boom(*a, **kw):
        raise RuntimeError("decoder exploded")

    with ImageServer() as srv:
        out: list[FetchResult] = []
        Downloader(FetchConfig(http2=True, allow_hosts=LOCAL), WorkDir.open(tmp_path)).run(
            [srv.url("/img/a.jpg")], out.append)
        monkeypatch.setattr(dl, "validate_and_store", boom)
        Downloader(FetchConfig(allow_hosts=LOCAL), WorkDir.open(tmp_path)).run(
            [srv.url("/img/b.png")], out.append)
    assert [(r.status, r.reason) for r in out] == [
        ("ok", "JPEG 64x48"), ("internal_error", "internal error: RuntimeError: decoder exploded")]
