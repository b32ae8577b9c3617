"""img2dataset interop on hand-built outputs: --export-urls, every layout, the status mapping,
the URL guard. The round trip through the real package is tests/builder/test_img2dataset.py."""

from __future__ import annotations

import errno
import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builder.catalog import Catalog
from builder.crawl.stage import CrawlConfig, crawl
from builder.ingest import failure_status, ingest_img2dataset, main
from builder.workdir import WorkDir
from tests.builder.test_crawl import write_urls
from tests.fakes.image_server import bomb_png, image_bytes

URLS = [f"https://img.example/{n}" for n in
        ("a.jpg", "b.png", "c.jpg", "d.jpg", "e.jpg", "f.jpg", "g.jpg", "h.jpg")]


def exported(tmp_path: Path) -> tuple[Path, list[dict]]:
    rows = [("food", "THA", "th", i, u, "", "") for i, u in enumerate(URLS, start=1)]
    f = write_urls(tmp_path / "u.csv", rows)
    out = tmp_path / "urls.parquet"
    wd = tmp_path / "w"
    with Catalog.open(wd) as cat:
        crawl(cat, CrawlConfig(search=f"urls:{f}", export_urls=str(out)))
    return wd, pq.read_table(out).to_pylist()


SAMPLES = [  # (status, error, bytes) per exported URL, in order
    ("success", None, image_bytes("JPEG", (40, 30), seed=1)),
    ("success", None, image_bytes("PNG", (20, 10), seed=2)),
    ("success", None, b"<html>not an image</html>"),
    ("failed_to_download", "HTTP Error 404: Not Found", None),
    ("failed_to_download", "<urlopen error timed out>", None),
    ("failed_to_download", "Use of image disallowed by X-Robots-Tag directives", None),
    ("success", None, bomb_png()),
    ("success", None, image_bytes("JPEG", (40, 30), seed=1)),  # same bytes as the first
]
EXPECTED = [("ok", None), ("ok", None), ("not_an_image", None), ("http_error", 404),
            ("timeout", None), ("opted_out", None), ("decompression_bomb", None),
            ("duplicate", None)]


def meta(key: str, row: dict, status: str, error: str | None) -> dict:
    return {"key": key, "url": row["url"], "status": status, "error_message": error,
            "width": 40, "height": 30, "original_width": 40, "original_height": 30,
            "item_id": row["item_id"], "concept": row["concept"]}


def files_layout(root: Path, rows: list[dict]) -> None:
    """img2dataset --output_format files: NNNNN/<key>.jpg + .json, and NNNNN.parquet."""
    shard = root / "00000"
    shard.mkdir(parents=True)
    recs = []
    for i, (row, (status, err, data)) in enumerate(zip(rows, SAMPLES, strict=True)):
        key = f"{i:09d}"
        rec = meta(key, row, status, err)
        if data is not None:
            (shard / f"{key}.jpg").write_bytes(data)
            (shard / f"{key}.json").write_text(json.dumps(rec))
        recs.append(rec)
    recs.append({**recs[0], "key": "000000099", "url": "https://elsewhere/x.jpg"})
    pq.write_table(pa.Table.from_pylist(recs), root / "00000.parquet")


def test_export_then_ingest_files_layout(tmp_path: Path) -> None:
    wd, rows = exported(tmp_path)
    assert [r["url"] for r in rows] == URLS
    out = tmp_path / "i2d"
    files_layout(out, rows)
    with Catalog.open(wd) as cat:
        counts = ingest_img2dataset(cat, out)
        got = [(r["status"], r["http_status"]) for r in cat.query(
            "SELECT status, http_status FROM downloads_export ORDER BY item_id")]
        reasons = {r["url"]: r["reason"] for r in cat.query("SELECT url, reason FROM downloads")}
        items = [r["status"] for r in cat.query("SELECT status FROM items ORDER BY item_id")]
        errors = cat.query("SELECT line, reason FROM crawl_input_errors")
        again = ingest_img2dataset(cat, out)
        n_images = cat.query("SELECT COUNT(*) FROM images")[0][0]
    assert got == EXPECTED
    assert items == ["ok", "ok", "failed", "failed", "failed", "failed", "failed", "ok"]
    assert reasons[URLS[0]] == "JPEG 40x30 via img2dataset"
    assert reasons[URLS[3]] == "img2dataset: HTTP Error 404: Not Found"
    assert counts == {"ok": 3, "not_an_image": 1, "http_error": 1, "timeout": 1,
                      "opted_out": 1, "decompression_bomb": 1, "unknown_url": 1}
    assert [tuple(e) for e in errors] == [("00000/000000099", "URL is not an item of this catalog")]
    assert again == {"already_done": 8, "unknown_url": 1} and n_images == 2


def test_ingest_parquet_and_webdataset_layouts(tmp_path: Path) -> None:
    wd, rows = exported(tmp_path)
    pq_dir, tar_dir = tmp_path / "pq", tmp_path / "wds"
    pq_dir.mkdir()
    tar_dir.mkdir()
    recs = [{**meta(f"{i:09d}", r, s, e), "jpg": d} for i, (r, (s, e, d)) in
            enumerate(zip(rows[:4], SAMPLES[:4], strict=True))]
    pq.write_table(pa.Table.from_pylist(recs), pq_dir / "00000.parquet")
    tar_recs = []
    with tarfile.open(tar_dir / "00000.tar", "w") as tar:
        for i, (r, (s, e, d)) in enumerate(zip(rows[4:], SAMPLES[4:], strict=True), start=4):
            key = f"{i:09d}"
            tar_recs.append(meta(key, r, s, e))
            if d is not None:
                info = tarfile.TarInfo(f"{key}.jpg")
                info.size = len(d)
                tar.addfile(info, io.BytesIO(d))
    pq.write_table(pa.Table.from_pylist(tar_recs), tar_dir / "00000.parquet")
    with Catalog.open(wd) as cat:
        ingest_img2dataset(cat, pq_dir)
        ingest_img2dataset(cat, tar_dir)
        got = [(r["status"], r["http_status"]) for r in cat.query(
            "SELECT status, http_status FROM downloads_export ORDER BY item_id")]
    assert got == EXPECTED


def test_failure_mapping_and_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert failure_status("HTTP Error 503: Service Unavailable", "failed_to_download") == (
        "http_error", 503)
    assert failure_status("cannot identify image file", "failed_to_resize") == ("not_an_image", None)
    # the built-in downloader's status for the same failure (so --retry-failed treats them alike)
    assert failure_status("[Errno 104] Connection reset by peer", "failed_to_download") == (
        "connection_error", None)
    assert failure_status("<urlopen error [Errno 111] Connection refused>", "failed_to_download") == (
        "connection_error", None)
    assert failure_status("<urlopen error [Errno -2] Name or service not known>", None) == (
        "dns_error", None)
    assert failure_status("HTTP Error 302: The HTTP server returned a redirect error that would "
                          "lead to an infinite loop.", "failed_to_download") == ("redirect_loop", None)
    assert failure_status("HTTP Error 302: redirection to url 'ftp://x/y' is not allowed", None) == (
        "unsupported_scheme", None)
    assert failure_status("hash mismatch", "failed_to_download") == ("fetch_error", None)
    assert main(["--img2dataset", str(tmp_path / "nope"), "--workdir", str(tmp_path / "w")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_ingest_refuses_what_the_downloader_would_refuse_from_the_url(tmp_path: Path) -> None:
    """img2dataset has no address guard: a non-public address literal (or localhost) it fetched
    is blocked_host unless allowed exactly; an over-long host name is invalid_url; the export
    leaves those URLs out so img2dataset never contacts them."""
    urls = ["http://127.0.0.1:8000/a.jpg", "http://169.254.169.254/latest/meta-data/x.jpg",
            "http://localhost:8000/b.jpg", f"http://{'a' * 70}.example/c.jpg",
            "https://img.example/d.jpg"]
    f = write_urls(tmp_path / "u.csv", [("food", "THA", "th", i, u, "", "")
                                        for i, u in enumerate(urls, start=1)])
    wd, out = tmp_path / "w", tmp_path / "urls.parquet"
    with Catalog.open(wd) as cat:
        crawl(cat, CrawlConfig(search=f"urls:{f}", export_urls=str(out)))
    assert [r["url"] for r in pq.read_table(out).to_pylist()] == [urls[4]]
    root = tmp_path / "i2d"
    (root / "00000").mkdir(parents=True)
    data = image_bytes("JPEG", (40, 30), seed=3)
    recs = []
    for i, u in enumerate(urls):
        key = f"{i:09d}"
        (root / "00000" / f"{key}.jpg").write_bytes(data if i < 4 else image_bytes(seed=4))
        recs.append({"key": key, "url": u, "status": "success", "error_message": None,
                     "sha256": None})
    recs[4]["sha256"] = "0" * 64  # img2dataset's hash of the served bytes: not what it stored
    pq.write_table(pa.Table.from_pylist(recs), root / "00000.parquet")
    assert main(["--img2dataset", str(root), "--workdir", str(wd),
                 "--allow-host", "127.0.0.1"]) == 0
    with Catalog.open(wd) as cat:
        got = {r["url"]: (r["status"], r["reason"]) for r in cat.query("SELECT * FROM downloads")}
    assert got[urls[0]][0] == "ok"
    assert got[urls[1]] == ("blocked_host", "169.254.169.254 is link-local (fetched by "
                                            "img2dataset, not stored)")
    assert got[urls[2]][0] == "blocked_host" and "localhost is loopback" in got[urls[2]][1]
    assert got[urls[3]][0] == "invalid_url" and "DNS allows 63" in got[urls[3]][1]
    assert got[urls[4]] == ("ok", f"JPEG 64x48 (re-encoded by img2dataset; the served bytes had "
                                  f"sha256 {'0' * 64}) via img2dataset")


def test_unfinished_shards_are_skipped_until_img2dataset_finishes_them(tmp_path: Path) -> None:
    """img2dataset marks a finished shard with NNNNN_stats.json: a shard without one (still
    written, or interrupted: its parquet may not even be readable) is skipped and counted, and
    the next ingest takes it once it is finished."""
    wd, rows = exported(tmp_path)
    out = tmp_path / "i2d"
    files_layout(out, rows)
    (out / "00000_stats.json").write_text("{}")
    (out / "00001.parquet").write_bytes(b"PAR1 half-written")
    with Catalog.open(wd) as cat:
        first = ingest_img2dataset(cat, out)
        (out / "00001.parquet").unlink()  # img2dataset rewrites the shard ...
        pq.write_table(pa.Table.from_pylist([]), out / "00001.parquet")
        (out / "00001_stats.json").write_text("{}")  # ... and marks it done
        second = ingest_img2dataset(cat, out)
    assert first["incomplete_shard"] == 1 and first["ok"] == 3
    assert "incomplete_shard" not in second and second["already_done"] == 8


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_full_disk_stops_the_ingest_and_nothing_is_blamed_on_the_url(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        code: int) -> None:
    """Our own failure while storing (issue 15) is not the sample's: one line, exit 2, the run
    ``failed``, no status for what was not stored, and the same command finishes the job."""
    wd, rows = exported(tmp_path)
    out = tmp_path / "i2d"
    files_layout(out, rows)
    real = WorkDir.store_image_bytes

    def full(self, data, ext):
        raise OSError(code, "disk trouble", str(self.images_dir / "ab" / "x.tmp"))

    monkeypatch.setattr(WorkDir, "store_image_bytes", full)
    argv = ["--img2dataset", str(out), "--workdir", str(wd)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("error: cannot write (") and "Traceback" not in err
    with Catalog.open(wd) as cat:
        run = cat.last_run("ingest")
        stored = cat.query("SELECT COUNT(*) FROM downloads WHERE status IN ('ok', 'duplicate', "
                           "'not_an_image', 'decompression_bomb')")[0][0]
    assert run["status"] == "failed" and f"[Errno {code}] disk trouble" in run["summary"]
    assert stored == 0  # no sample got a status that blames its bytes
    monkeypatch.setattr(WorkDir, "store_image_bytes", real)
    assert main(argv) == 0
    with Catalog.open(wd) as cat:
        got = [r[0] for r in cat.query("SELECT status FROM downloads_export ORDER BY item_id")]
    assert got == [s for s, _ in EXPECTED]


def test_a_sample_above_the_byte_cap_is_refused_from_its_size_unread(tmp_path: Path,
                                                                     monkeypatch) -> None:
    """A 2 GB sparse sample file (issue 22) and a tar member above the cap: too_large from
    their declared size, neither read."""
    from builder import ingest
    from builder.crawl.download import FetchConfig

    stem = tmp_path / "00000"
    stem.mkdir()
    with open(stem / "000000001.jpg", "wb") as f:
        f.truncate(2 * 1024**3)
    with tarfile.open(tmp_path / "00001.tar", "w") as tar:
        info = tarfile.TarInfo("000000002.jpg")
        data = b"x" * 5000
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"read {self}"))
    cfg = FetchConfig(max_bytes=4096)
    res = ingest._prepare("https://img.example/a.jpg", stem, {"status": "success",
                                                               "key": "000000001"}, {}, cfg)
    assert (res.status, res.reason) == ("too_large", f"{2 * 1024**3} bytes exceeds 4096")
    tars: dict = {}
    res = ingest._prepare("https://img.example/b.jpg", tmp_path / "00001",
                          {"status": "success", "key": "000000002"}, tars, cfg)
    assert (res.status, res.reason) == ("too_large", "5000 bytes exceeds 4096")
    for t in tars.values():
        t.close()
