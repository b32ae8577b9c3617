"""The crawl under our own faults and hostile URLs (issue 15): a full or read-only disk or a
missing library stops the run (exit 2, run ``failed``, the URL in flight stays pending); a bug
on one URL is ``internal_error``, exit 1, fetched again by the next run; an over-long host name
is a bad URL without a traceback; ``--allow-host`` admits exactly what was named; a
decompression bomb is refused from its header, never decoded."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest
from PIL import ImageFile

import builder.crawl.download as dl
from builder.catalog import Catalog
from builder.crawl import stage as crawl_mod
from builder.crawl.download import Downloader, FetchConfig, FetchResult, inspect_image
from builder.workdir import WorkDir
from tests.builder.test_crawl import failing_store, serve_jpegs, urls_argv
from tests.fakes.image_server import ImageServer, bomb_png, image_bytes

pytestmark = pytest.mark.integration

INSTALL = "install the builder extra: pip install -e '.[builder]'"


def _downloads(tmp_path: Path) -> dict[str, str]:
    with Catalog.open(tmp_path / "w") as cat:
        return {r["url"]: r["status"] for r in cat.query("SELECT url, status FROM downloads")}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_full_or_read_only_disk_stops_the_run_and_nothing_is_blamed_on_the_url(
        tmp_path, monkeypatch, capsys, code):
    real = WorkDir.store_image_bytes
    with ImageServer() as srv:
        urls = serve_jpegs(srv, 5, seed=500)
        monkeypatch.setattr(WorkDir, "store_image_bytes", failing_store(2, code, "disk trouble"))
        assert crawl_mod.main(urls_argv(tmp_path, urls)) == 2
        err = capsys.readouterr().err
        line = err.strip().splitlines()[-1]  # after the progress bars
        assert line.startswith("error: cannot write (") and "Traceback" not in err
        assert "disk trouble; fix the disk or the permissions and run the same command" in line
        got = _downloads(tmp_path)
        assert sorted(got.values()) == ["ok", "ok"]  # the rest is not anybody's fault
        with Catalog.open(tmp_path / "w") as cat:
            run = cat.last_run("crawl")
            items = dict(cat.query("SELECT status, COUNT(*) FROM items GROUP BY status"))
        assert run["status"] == "failed"
        assert run["summary"].startswith(f"failed: OSError: [Errno {code}] disk trouble")
        assert "items:    ok 2, pending 3" in run["summary"]  # the summary says what is left
        assert items == {"ok": 2, "pending": 3}
        monkeypatch.setattr(WorkDir, "store_image_bytes", real)
        assert crawl_mod.main(urls_argv(tmp_path, urls)) == 0  # the same command resumes
        assert set(_downloads(tmp_path).values()) == {"ok"}
        assert sum(srv.hits[f"/f/{i}.jpg"] for i in range(2)) == 2  # stored ones not refetched


def test_a_full_catalog_disk_stops_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    import sqlite3

    import builder.crawl.stage as crawl_module

    def full(con, res, run_id):
        raise sqlite3.OperationalError("database or disk is full")

    with ImageServer() as srv:
        urls = serve_jpegs(srv, 2, seed=500)
        monkeypatch.setattr(crawl_module, "record_download", full)
        assert crawl_mod.main(urls_argv(tmp_path, urls)) == 2
    err = capsys.readouterr().err
    assert "error: cannot write the work dir's database: database or disk is full" in err
    assert "Traceback" not in err and _downloads(tmp_path) == {}


def test_a_missing_library_while_storing_is_one_line_and_the_url_stays_pending(
        tmp_path, monkeypatch, capsys):
    def missing(data, max_pixels):
        raise ModuleNotFoundError("No module named 'imagecodecs'", name="imagecodecs")

    with ImageServer() as srv:
        urls = serve_jpegs(srv, 2, seed=500)
        monkeypatch.setattr(dl, "inspect_image", missing)
        assert crawl_mod.main(urls_argv(tmp_path, urls)) == 2
    err = capsys.readouterr().err
    assert f"error: the Python module 'imagecodecs' is missing; {INSTALL}" in err
    assert _downloads(tmp_path) == {}
    with Catalog.open(tmp_path / "w") as cat:
        assert cat.last_run("crawl")["status"] == "failed"
        assert {r[0] for r in cat.query("SELECT status FROM items")} == {"pending"}


def test_an_internal_error_is_ours_exit_1_and_the_next_run_fetches_it_again(
        tmp_path, monkeypatch, capsys):
    real = dl.validate_and_store

    def buggy(res, workdir, max_pixels):
        if res.url.endswith("/1.jpg"):
            raise RuntimeError("a bug of ours")
        return real(res, workdir, max_pixels)

    with ImageServer() as srv:
        urls = serve_jpegs(srv, 3, seed=500)
        monkeypatch.setattr(dl, "validate_and_store", buggy)
        assert crawl_mod.main(urls_argv(tmp_path, urls)) == 1
        out = capsys.readouterr().out
        assert out.startswith("internal errors (ours, not the servers'): 1 URL(s), fetched "
                              "again by the next run")
        assert _downloads(tmp_path)[urls[1]] == "internal_error"
        with Catalog.open(tmp_path / "w") as cat:
            (item,) = cat.query("SELECT status, reason FROM items WHERE url=?", (urls[1],))
        assert (item["status"], item["reason"]) == (
            "failed", "internal_error: internal error: RuntimeError: a bug of ours")
        monkeypatch.setattr(dl, "validate_and_store", real)
        assert crawl_mod.main(urls_argv(tmp_path, urls)) == 0  # no --retry-failed needed
        assert set(_downloads(tmp_path).values()) == {"ok"}
        assert [srv.hits[f"/f/{i}.jpg"] for i in range(3)] == [1, 2, 1]


def test_over_long_host_names_are_bad_urls_without_a_traceback(tmp_path, caplog):
    from builder.crawl.netguard import host_problem

    caplog.set_level(logging.DEBUG)
    long_label = "a" * 64 + ".example"
    long_name = ".".join(["b" * 60] * 5) + ".example"  # 312 characters
    idna_label = "ä" * 64 + ".example"
    with ImageServer() as srv:
        srv.add("/to-long", b"", status=302, headers={"Location": f"http://{long_label}/x.jpg"})
        urls = [f"http://{long_label}/x.jpg", f"https://{long_name}/x.jpg",
                f"http://{idna_label}/x.jpg", srv.url("/to-long")]
        out: list[FetchResult] = []
        Downloader(FetchConfig(retries=0, allow_hosts=frozenset({"127.0.0.1"})),
                   WorkDir.open(tmp_path)).run(urls, out.append)
    got = {r.url: (r.status, r.reason) for r in out}
    assert got[urls[0]] == ("invalid_url", "host name label of 64 characters (DNS allows 63): "
                                           "aaaaaaaaaaaaaaaaaaaa...")
    assert got[urls[1]] == ("invalid_url", "host name is 312 characters long (DNS allows 253)")
    assert got[urls[2]][0] == "invalid_url" and got[urls[3]][0] == "invalid_url"
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"
    assert host_problem("example.org") is None and host_problem("::1") is None
    assert host_problem("a" * 63 + ".org") is None


def test_allow_host_admits_exactly_what_was_named(tmp_path):
    """``--allow-host 127.0.0.1`` does not admit ``localhost`` (a name that resolves there),
    and ``--allow-host localhost`` does not admit the address."""
    def fetch(allow: set[str], urls: list[str]) -> list[tuple[str, str]]:
        out: list[FetchResult] = []
        Downloader(FetchConfig(retries=0, allow_hosts=frozenset(allow)),
                   WorkDir.open(tmp_path / "-".join(sorted(allow)))).run(urls, out.append)
        order = {u: i for i, u in enumerate(urls)}
        return [(r.status, r.reason) for r in sorted(out, key=lambda r: order[r.url])]

    with ImageServer() as srv:
        srv.add("/to-localhost", b"", status=302,
                headers={"Location": srv.url("/img/a.jpg", "localhost")})
        by_name, by_addr = srv.url("/img/a.jpg", "localhost"), srv.url("/img/b.png")
        ip_only = fetch({"127.0.0.1"}, [by_addr, by_name, srv.url("/to-localhost")])
        assert ip_only[0][0] == "ok"
        assert ip_only[1][0] == "blocked_host" and "localhost resolves to" in ip_only[1][1]
        assert ip_only[2][0] == "blocked_host"  # nor through a redirect
        name_only = fetch({"LOCALHOST."}, [by_name, by_addr])
        assert [s for s, _ in name_only] == ["ok", "blocked_host"]
        assert fetch({"[::ffff:127.0.0.1]"}, [by_addr])[0][0] == "blocked_host"


def test_a_16000_square_png_is_refused_from_its_header_and_never_decoded(tmp_path,
                                                                         monkeypatch):
    decoded: list[object] = []
    real_load = ImageFile.ImageFile.load

    def load(self):
        decoded.append(self.size)
        return real_load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    bomb = bomb_png(16000)
    assert len(bomb) < 64_000  # 31 KB on disk, 256 Mpx (4 GB as RGBA) decoded
    status, reason, _ = inspect_image(bomb, 89_478_485)
    assert status == "decompression_bomb" and "256000000 pixels" in reason
    # under the cap of Pillow's own error level too: our cap, from the header
    mid = image_bytes("PNG", (400, 300))
    assert inspect_image(mid, 100_000) == (
        "decompression_bomb", "400x300 = 120000 pixels exceeds the cap 100000", {})
    assert decoded == []
    with ImageServer() as srv:
        srv.add("/bomb16k.png", bomb, "image/png")
        out: list[FetchResult] = []
        Downloader(FetchConfig(retries=0, allow_hosts=frozenset({"127.0.0.1"})),
                   WorkDir.open(tmp_path)).run([srv.url("/bomb16k.png")], out.append)
    assert out[0].status == "decompression_bomb" and decoded == []
    assert inspect_image(image_bytes("PNG", (40, 30)), 100_000)[0] == "ok"
    assert set(decoded) == {(40, 30)}  # load() again on a loaded image decodes nothing
