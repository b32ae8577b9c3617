"""Status columns are checked (migration m0500): a migrated catalog refuses an unknown
status, an old catalog (built at m0400 by the migration runner) migrates with its rows
intact, and one holding an unknown status is refused with one line, unchanged."""

from __future__ import annotations

import re
import sqlite3

import pytest

from builder import migrations
from builder.catalog import Catalog, CatalogError, connect
from builder.migrations import m0500_status_checks
from builder.statuses import COLUMNS, ItemStatus

# One row per table, every status column holding a valid value (and the view's inputs).
# Raw SQL: these rows go into an m0400 catalog, the old schema itself, not through writers.
ROWS = [
    "INSERT INTO stage_runs (run_id, stage, params_json, fingerprint, status, package_version,"
    " started_at, ended_at) VALUES (7, 'crawl', '{}', 'fp', 'done', '0.1', 't0', 't1')",
    "INSERT INTO concepts (name, source, status, run_id) VALUES ('food', 'curated', 'kept', 7)",
    "INSERT INTO llm_requests (stage, item, status, llm, attempts) VALUES"
    " ('queries', 'food;THA', 'refused', 'offline', 2)",
    "INSERT INTO queries (concept, country, kind, language, text, source, status) VALUES"
    " ('food', 'THA', 'native', 'th', 'อาหาร', 'table', 'ok')",
    "INSERT INTO searches (search_id, concept, country, language, kind, query_text, backend,"
    " status, n_results) VALUES (3, 'food', 'THA', 'th', 'native', 'อาหาร', 'folder', 'ok', 2)",
    "INSERT INTO search_results (search_id, rank, image_url, raw_json) VALUES"
    " (3, 1, 'file:///a.jpg', '{}'), (3, 2, 'file:///b.jpg', '{}')",
    "INSERT INTO downloads (url, status, sha256, bytes, x_robots_tag) VALUES"
    " ('file:///a.jpg', 'ok', 'aa', 10, NULL), ('file:///b.jpg', 'too_large', NULL, NULL, NULL)",
    "INSERT INTO images (sha256, ext, format, width, height, bytes, first_seen) VALUES"
    " ('aa', 'jpg', 'JPEG', 4, 3, 10, 't0')",
    "INSERT INTO items (item_id, search_id, rank, concept, country, language, query_text, url,"
    " sha256, status, group_id, dedup_json) VALUES"
    " (41, 3, 1, 'food', 'THA', 'th', 'อาหาร', 'file:///a.jpg', 'aa', 'kept', 5, '{}'),"
    " (42, 3, 2, 'food', 'THA', 'th', 'อาหาร', 'file:///b.jpg', NULL, 'failed', NULL, NULL)",
    "INSERT INTO dedup_groups (group_id, concept, kept_item_id, status, evidence_json) VALUES"
    " (5, 'food', 41, 'reviewed', '[]')",
    "INSERT INTO tags (sha256, tags_json, status, attempts) VALUES ('aa', '[\"food\"]', 'ok', 1)",
    "INSERT INTO term_reviews (project_id, task_id, concept, country, locale, proposed,"
    " outcome, votes_json, reason) VALUES (1, 2, 'food', 'THA', 'th-TH', 'อาหาร', 'accepted',"
    " '{}', 'review: majority of 1')",
]
SNAPSHOT = ["stage_runs", "concepts", "llm_requests", "queries", "searches", "search_results",
            "downloads", "images", "items", "dedup_groups", "tags", "term_reviews"]


def _build_at_400(tmp_path, monkeypatch, extra: list[str] = ()) -> sqlite3.Connection:
    """A catalog at m0400 made by the migration runner itself, with ROWS (and ``extra``)."""
    every = migrations.all_migrations()
    monkeypatch.setattr(migrations, "all_migrations",
                        lambda: [m for m in every if m.version <= 400])
    path = tmp_path / "catalog.sqlite"
    con = connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    migrations.apply_missing(con)
    assert int(con.execute("PRAGMA user_version").fetchone()[0]) == 400
    for sql in [*ROWS, *extra]:
        con.execute(sql)
    con.execute("DELETE FROM sqlite_sequence WHERE name='items'")
    # raw: sqlite's own AUTOINCREMENT counter (rows 43..90 deleted)
    con.execute("INSERT INTO sqlite_sequence VALUES ('items', 90)")
    monkeypatch.setattr(migrations, "all_migrations", lambda: every)
    return con


def _snapshot(con: sqlite3.Connection) -> dict[str, list[tuple]]:
    return {t: [tuple(r) for r in con.execute(f"SELECT * FROM {t} ORDER BY 1, 2")]
            for t in SNAPSHOT}



def test_old_catalog_migrates_with_rows_intact(tmp_path, monkeypatch):
    con = _build_at_400(tmp_path, monkeypatch)
    before = _snapshot(con)
    export_before = [tuple(r) for r in con.execute("SELECT * FROM downloads_export")]
    con.close()
    with Catalog.open(tmp_path) as cat:
        assert 500 in migrations.applied_versions(cat.con)
        assert _snapshot(cat.con) == before
        assert [tuple(r) for r in cat.con.execute("SELECT * FROM downloads_export")] \
            == export_before
        assert sorted(r[0] for r in cat.con.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='items'"
            " AND sql IS NOT NULL")) == ["items_cc", "items_group", "items_sha", "items_url"]
        assert cat.con.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert cat.con.execute("PRAGMA foreign_key_check").fetchall() == []
        assert cat.con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # the AUTOINCREMENT counter survived: a new item is 91, not 43
        with cat.tx() as c:  # raw: the rebuilt table's own AUTOINCREMENT, not a writer's
            cur = c.execute(
                "INSERT INTO items (search_id, rank, concept, country, language, query_text,"
                " url, status) VALUES (3, 3, 'food', 'THA', 'th', 'x', 'u', ?)",
                (ItemStatus.PENDING,))
        assert cur.lastrowid == 91
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed: items_status"):
            cat.con.execute("UPDATE items SET status='bogus' WHERE item_id=41")


def test_every_status_column_is_checked(tmp_path):
    with Catalog.open(tmp_path) as cat:
        for (table, column), enum in COLUMNS.items():
            sql = cat.con.execute("SELECT sql FROM sqlite_master WHERE name=?",
                                  (table,)).fetchone()[0]
            found = re.search(rf"CONSTRAINT {table}_{column} CHECK \({column} IN \(([^)]*)\)\)",
                              sql)
            assert found, (table, column)
            allowed = re.findall(r"'([^']*)'", found.group(1))
            assert allowed == [m.value for m in enum], (table, column)


@pytest.mark.parametrize(("table", "column", "sql"), [
    ("items", "status", "UPDATE items SET status='keep' WHERE item_id=41"),
    ("downloads", "status", "UPDATE downloads SET status='OK' WHERE url='file:///a.jpg'"),
    ("stage_runs", "status", "UPDATE stage_runs SET status='finished'"),
    ("term_reviews", "outcome", "UPDATE term_reviews SET outcome='agreed'"),
])
def test_a_migrated_catalog_refuses_an_unknown_status(tmp_path, monkeypatch, table, column,
                                                      sql):
    _build_at_400(tmp_path, monkeypatch).close()
    with Catalog.open(tmp_path) as cat:
        with pytest.raises(sqlite3.IntegrityError,
                           match=f"CHECK constraint failed: {table}_{column}"):
            cat.con.execute(sql)


def test_an_unknown_status_stops_the_migration_with_one_line(tmp_path, monkeypatch):
    con = _build_at_400(tmp_path, monkeypatch, extra=[
        "UPDATE items SET status='keep'", "UPDATE tags SET status='weird'"])
    before = _snapshot(con)
    con.close()
    with pytest.raises(CatalogError) as err:
        Catalog.open(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg == (
        f"{tmp_path / 'catalog.sqlite'}: catalog migration m0500_status_checks: items.status "
        "holds 'keep' in 2 row(s), not one of pending, ok, failed, duplicate, near_duplicate, "
        "needs_review, kept, removed; correct or delete those rows, then run again")
    con = connect(tmp_path / "catalog.sqlite")
    assert _snapshot(con) == before  # rolled back: nothing changed
    assert 500 not in migrations.applied_versions(con)
    assert "CHECK" not in con.execute("SELECT sql FROM sqlite_master WHERE name='items'"
                                      ).fetchone()[0]


def test_the_migration_keeps_columns_added_before_it():
    sql = ("CREATE TABLE t (\n    a TEXT NOT NULL,  -- a comment\n    status TEXT NOT NULL"
           "  -- last\n, extra TEXT)")
    out = m0500_status_checks.with_checks(sql, "t", "t__new", [("status", ("x", "y"))])
    con = sqlite3.connect(":memory:")
    con.execute(out)
    cols = [r[1] for r in con.execute("PRAGMA table_info(t__new)")]
    assert cols == ["a", "status", "extra"]
    con.execute("INSERT INTO t__new VALUES ('a', 'x', NULL)")  # raw: the CHECK of a bare table
    with pytest.raises(sqlite3.IntegrityError, match="t_status"):
        con.execute("INSERT INTO t__new VALUES ('a', 'z', NULL)")
