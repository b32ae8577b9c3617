"""Catalog writes of downloads, for the crawl and the img2dataset ingest: one URL's outcome,
what is left to fetch or fetched again, and the byte-level dedup across URLs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from builder.catalog import Catalog
from builder.crawl.download import OURS, TRANSIENT, FetchResult
from builder.crawl.netguard import url_refusal
from builder.statuses import DownloadStatus, ItemStatus
from core.files import atomic_path
from core.provenance import utcnow


def record_image(con: sqlite3.Connection, sha256: str, ext: str, fmt: str, width: int,
                 height: int, nbytes: int, first_seen: str | None = None,
                 phash: str | None = None) -> None:
    """The ``images`` row of a stored image (kept as first seen when it is already there)."""
    con.execute(
        "INSERT OR IGNORE INTO images (sha256, ext, format, width, height, bytes, phash,"
        " first_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (sha256, ext, fmt, width, height, nbytes, phash, first_seen or utcnow()))


def record_download(con: sqlite3.Connection, res: FetchResult, run_id: int | None) -> None:
    """Write one URL's outcome (image row, download row, its items) inside a transaction."""
    if res.status == DownloadStatus.OK and res.sha256:
        record_image(con, res.sha256, res.ext, res.format, res.width, res.height, res.nbytes,
                     res.fetched_at)
    con.execute(
        "INSERT OR REPLACE INTO downloads (url, status, reason, http_status, final_url, sha256, "
        "bytes, content_type, attempts, fetched_at, run_id, x_robots_tag) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (res.url, res.status, res.reason, res.http_status, res.final_url, res.sha256, res.nbytes,
         res.content_type, res.attempts, res.fetched_at or utcnow(), run_id, res.x_robots_tag))
    ok = res.status in (DownloadStatus.OK, DownloadStatus.DUPLICATE)
    con.execute(
        "UPDATE items SET sha256=?, status=?, reason=?, updated_at=? WHERE url=? "
        "AND status IN (?, ?)",
        (res.sha256 if ok else None, ItemStatus.OK if ok else ItemStatus.FAILED,
         res.reason if ok else f"{res.status}: {res.reason}", utcnow(), res.url,
         ItemStatus.PENDING, ItemStatus.FAILED))


def link_items(catalog: Catalog) -> int:
    """Give pending items whose URL was already fetched (by another query) that outcome."""
    with catalog.tx() as con:
        got = "d.status IN (:ok, :duplicate)"
        cur = con.execute(
            f"UPDATE items SET sha256 = CASE WHEN {got} THEN d.sha256 END,"
            f" status = CASE WHEN {got} THEN :item_ok ELSE :failed END,"
            f" reason = CASE WHEN {got} THEN d.reason ELSE d.status || ': ' || d.reason END,"
            " updated_at = :now FROM downloads d WHERE d.url = items.url"
            " AND items.status = :pending",
            {"ok": DownloadStatus.OK, "duplicate": DownloadStatus.DUPLICATE, "now": utcnow(),
             "item_ok": ItemStatus.OK, "failed": ItemStatus.FAILED,
             "pending": ItemStatus.PENDING})
        return cur.rowcount


def reset_transient(catalog: Catalog, transient: bool = True) -> int:
    """Forget download outcomes so those URLs are fetched again: our own failures always, with
    ``transient`` (``--retry-failed``) the transient ones (timeouts, 429, 5xx...) too."""
    statuses = TRANSIENT if transient else OURS
    marks = ",".join("?" * len(statuses))
    cond = f"status IN ({marks}) AND (status != ? OR http_status = 429 OR http_status >= 500)"
    params = (*statuses, DownloadStatus.HTTP_ERROR)
    with catalog.tx() as con:
        con.execute(
            f"UPDATE items SET status=?, reason=NULL WHERE status=? AND url IN "
            f"(SELECT url FROM downloads WHERE {cond})",
            (ItemStatus.PENDING, ItemStatus.FAILED, *params))
        return con.execute(f"DELETE FROM downloads WHERE {cond}", params).rowcount


def pending_urls(catalog: Catalog) -> list[str]:
    """Distinct item URLs with no download outcome yet, in item order."""
    rows = catalog.query(
        "SELECT url, MIN(item_id) AS first FROM items WHERE status=? AND url NOT IN "
        "(SELECT url FROM downloads) GROUP BY url ORDER BY first", (ItemStatus.PENDING,))
    return [r["url"] for r in rows]


def finalize_duplicates(catalog: Catalog) -> int:
    """Same bytes under several URLs: the earliest item's URL is ``ok``, the others
    ``duplicate`` (deterministic: resumed and uninterrupted runs agree)."""
    rows = catalog.query(
        "SELECT d.url, d.sha256, d.status, MIN(i.item_id) AS first, im.format, im.width, "
        "im.height FROM downloads d LEFT JOIN items i ON i.url = d.url "
        "LEFT JOIN images im ON im.sha256 = d.sha256 WHERE d.status IN (?, ?) "
        "GROUP BY d.url ORDER BY d.sha256, first IS NULL, first, d.url",
        (DownloadStatus.OK, DownloadStatus.DUPLICATE))
    canon: dict[str, str] = {}
    changes = []
    for r in rows:
        first = canon.setdefault(r["sha256"], r["url"])
        if first != r["url"]:
            changes.append((DownloadStatus.DUPLICATE, f"same bytes as {first}", r["url"]))
        elif r["status"] != DownloadStatus.OK:
            changes.append((DownloadStatus.OK, f"{r['format']} {r['width']}x{r['height']}",
                            r["url"]))
    if changes:
        with catalog.tx() as con:
            con.executemany("UPDATE downloads SET status=?, reason=? WHERE url=?", changes)
    return sum(1 for c in changes if c[0] == DownloadStatus.DUPLICATE)


def export_urls(catalog: Catalog, out: Path, include_done: bool = False,
                allow_hosts: frozenset[str] = frozenset()) -> int:
    """Write the URLs to fetch (all with ``include_done``) as img2dataset's input parquet, less
    those the downloader would refuse from the URL alone; returns the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    where = "" if include_done else "WHERE i.status=? AND i.url NOT IN (SELECT url FROM downloads)"
    rows = catalog.query(
        "SELECT i.url, i.item_id, i.concept, i.country, i.language, i.rank, i.search_query, "
        "s.backend, s.region, r.page_url, r.title FROM items i "
        "JOIN searches s ON s.search_id = i.search_id "
        "LEFT JOIN search_results r ON r.search_id = i.search_id AND r.rank = i.rank "
        f"{where} ORDER BY i.item_id", () if include_done else (ItemStatus.PENDING,))
    seen: set[str] = set()
    cols: dict[str, list[Any]] = {k: [] for k in (
        "url", "item_id", "concept", "country", "language", "rank", "search_query", "backend",
        "region", "page_url", "title")}
    for r in rows:
        if r["url"] in seen or not r["url"].startswith(("http://", "https://")) or url_refusal(
                r["url"], allow_hosts):
            continue
        seen.add(r["url"])
        for k in cols:
            cols[k].append(r[k])
    with atomic_path(out, suffix=".parquet") as tmp:
        pq.write_table(pa.table(cols), tmp)
    return len(seen)
