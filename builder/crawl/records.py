"""Catalog writes of the crawl's search side (searches, results, items, input errors): each
takes the caller's connection and is idempotent (``INSERT OR IGNORE`` on the table's key)."""

from __future__ import annotations

import sqlite3

from builder.crawl.search import Hit, InputError, Search
from builder.statuses import ItemStatus, SearchStatus
from core.provenance import utcnow


def add_search(con: sqlite3.Connection, s: Search, run_id: int | None = None,
               status: SearchStatus | str = SearchStatus.PENDING,
               n_results: int | None = None) -> int:
    """The ``searches`` row of ``s`` (kept as it is when there already); returns its id."""
    cur = con.execute(
        "INSERT OR IGNORE INTO searches (concept, country, language, kind, search_query, backend,"
        " region, status, n_results, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (s.concept, s.country, s.language, s.kind, s.search_query, s.backend, s.region, status,
         n_results, run_id))
    if cur.rowcount:
        return int(cur.lastrowid)
    row = con.execute("SELECT search_id FROM searches WHERE concept=? AND country=? AND kind=?"
                      " AND backend=?", (s.concept, s.country, s.kind, s.backend)).fetchone()
    return int(row[0])


def add_result(con: sqlite3.Connection, search_id: int, hit: Hit) -> None:
    """The ``search_results`` row of one hit at its raw rank (every field the backend gave)."""
    con.execute(
        "INSERT OR IGNORE INTO search_results (search_id, rank, image_url, page_url, title,"
        " width, height, raw_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (search_id, hit.rank, hit.image_url, hit.page_url, hit.title, hit.width, hit.height,
         hit.raw_json))


def add_item(con: sqlite3.Connection, search_id: int, rank: int, s: Search, url: str, *,
             status: ItemStatus | str = ItemStatus.PENDING, sha256: str | None = None,
             group_id: int | None = None, reason: str | None = None) -> int:
    """The ``items`` row of the hit at ``rank`` of a search (kept when there); returns its id."""
    cur = con.execute(
        "INSERT OR IGNORE INTO items (search_id, rank, concept, country, language, search_query,"
        " url, sha256, status, reason, group_id, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (search_id, rank, s.concept, s.country, s.language, s.search_query, url, sha256, status,
         reason, group_id, utcnow()))
    if cur.rowcount:
        return int(cur.lastrowid)
    row = con.execute("SELECT item_id FROM items WHERE search_id=? AND rank=?",
                      (search_id, rank)).fetchone()
    return int(row[0])


def add_input_error(con: sqlite3.Connection, e: InputError, run_id: int | None = None) -> None:
    """The ``crawl_input_errors`` row of one rejected input line (once per source and line)."""
    con.execute(
        "INSERT OR IGNORE INTO crawl_input_errors (source, line, reason, raw, run_id) "
        "VALUES (?, ?, ?, ?, ?)", (e.source, e.line, e.reason, e.raw, run_id))
