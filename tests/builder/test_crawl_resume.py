"""Kill -9 mid-download, resume, and compare with an uninterrupted run (by catalog content and
by the server's hit counts: no completed image is fetched again)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.crawl.stage import main
from tests.builder.test_crawl import write_urls
from tests.fakes.image_server import ImageServer, image_bytes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
N = 60


def snapshot(workdir: Path) -> dict[str, list]:
    """Catalog content that must not depend on interruptions (no times, run ids, attempts)."""
    con = sqlite3.connect(workdir / "catalog.sqlite")
    q = {
        "searches": "SELECT search_id, concept, country, language, kind, search_query, region, "
                    "status, reason, n_results FROM searches ORDER BY search_id",
        "results": "SELECT * FROM search_results ORDER BY search_id, rank",
        "items": "SELECT item_id, search_id, rank, concept, country, language, search_query, "
                 "replace(url, ':{port}', ':PORT'), sha256, status, reason FROM items ORDER BY item_id",
        "downloads": "SELECT replace(url, ':{port}', ':PORT'), status, "
                     "replace(reason, ':{port}', ':PORT'), http_status, sha256, bytes, "
                     "content_type FROM downloads ORDER BY 1",
        "images": "SELECT sha256, ext, format, width, height, bytes FROM images ORDER BY sha256",
    }
    port = con.execute("SELECT url FROM items LIMIT 1").fetchone()[0].split(":")[2].split("/")[0]
    out = {k: [tuple(r) for r in con.execute(v.replace("{port}", port))] for k, v in q.items()}
    out["results"] = [(*r[:2], r[2].replace(port, "PORT"), *r[3:7]) for r in out["results"]]
    out["files"] = sorted(str(p.relative_to(workdir)) for p in (workdir / "images").rglob("*"))
    con.close()
    return out


def count_downloads(workdir: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{workdir / 'catalog.sqlite'}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM downloads").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_kill_and_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    with ImageServer(delay=0.04) as srv:
        paths = [srv.add(f"/k/{i}.jpg", image_bytes("JPEG", (48, 32), seed=100 + i))
                 for i in range(N)]
        paths += ["/gone.jpg", "/same/one.jpg", "/same/two.jpg", "/truncated.jpg", "/noai.jpg"]
        rows = [("food" if i % 2 else "house", ("THA", "JPN", "DEU")[i % 3], "xx", i // 6 + 1,
                 srv.url(p), f"https://page/{i}", f"title {i}") for i, p in enumerate(paths)]
        urls = write_urls(tmp_path / "urls.csv", rows)
        args = ["--search", f"urls:{urls}", "--allow-host", "127.0.0.1", "--concurrency", "4",
                "--retries", "0"]

        killed = tmp_path / "killed"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "builder.crawl.stage", *args,
                                 "--workdir", str(killed)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while count_downloads(killed) < 15 and time.monotonic() < deadline:
            assert proc.poll() is None, "the crawl finished before it could be killed"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_at_kill = count_downloads(killed)
        assert 15 <= done_at_kill < len(paths)
        con = sqlite3.connect(killed / "catalog.sqlite")
        completed = [r[0].split(str(srv.port), 1)[1] for r in con.execute("SELECT url FROM downloads")]
        assert con.execute("SELECT status FROM stage_runs").fetchone()[0] == "running"
        con.close()
        hits_at_kill = dict(srv.hits)

        assert main([*args, "--workdir", str(killed)]) == 0  # the same command, resumed
        for p in completed:
            assert srv.hits[p] == hits_at_kill[p], f"{p} was fetched again after it completed"
        assert all(srv.hits[p] <= 2 for p in paths)

        clean = tmp_path / "clean"
        assert main([*args, "--workdir", str(clean)]) == 0

    a, b = snapshot(killed), snapshot(clean)
    for key in a:
        assert a[key] == b[key], key
    assert len(a["downloads"]) == len(paths) and len(a["images"]) == N + 1
    statuses = sorted({r[1] for r in a["downloads"]})
    assert statuses == ["corrupt_image", "duplicate", "http_error", "ok", "opted_out"]
