"""Status columns are checked: the schema's CHECK lists are the enums of ``builder.statuses``
and a catalog refuses an unknown status; migrations after the base apply once, in order, and a
failing one leaves the catalog as it was."""

from __future__ import annotations

import re
import sqlite3

import pytest

from builder import migrations
from builder.catalog import Catalog, CatalogError, connect
from builder.migrations import Migration, MigrationError
from builder.statuses import COLUMNS, ItemStatus

# One row per table, every status column holding a valid value (and the view's inputs).
# Raw SQL: rows of every table, not through the writers (what the schema itself accepts).
ROWS = [
    "INSERT INTO stage_runs (run_id, stage, params_json, fingerprint, status, package_version,"
    " started_at, ended_at) VALUES (7, 'crawl', '{}', 'fp', 'done', '0.1', 't0', 't1')",
    "INSERT INTO concepts (name, source, status, run_id) VALUES ('food', 'curated', 'kept', 7)",
    "INSERT INTO llm_requests (stage, item, status, llm, attempts) VALUES"
    " ('queries', 'food;THA', 'refused', 'offline', 2)",
    "INSERT INTO queries (concept, country, kind, language, text, source, status) VALUES"
    " ('food', 'THA', 'native', 'th', 'อาหาร', 'table', 'ok')",
    "INSERT INTO searches (search_id, concept, country, language, kind, search_query, backend,"
    " status, n_results) VALUES (3, 'food', 'THA', 'th', 'native', 'อาหาร', 'folder', 'ok', 2)",
    "INSERT INTO search_results (search_id, rank, image_url, raw_json) VALUES"
    " (3, 1, 'file:///a.jpg', '{}'), (3, 2, 'file:///b.jpg', '{}')",
    "INSERT INTO downloads (url, status, sha256, bytes, x_robots_tag) VALUES"
    " ('file:///a.jpg', 'ok', 'aa', 10, NULL), ('file:///b.jpg', 'too_large', NULL, NULL, NULL)",
    "INSERT INTO images (sha256, ext, format, width, height, bytes, first_seen) VALUES"
    " ('aa', 'jpg', 'JPEG', 4, 3, 10, 't0')",
    "INSERT INTO items (item_id, search_id, rank, concept, country, language, search_query, url,"
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


def _built(tmp_path, extra: list[str] = ()) -> sqlite3.Connection:
    """A new catalog with ROWS (and ``extra``)."""
    Catalog.open(tmp_path).close()
    con = connect(tmp_path / "catalog.sqlite")
    for sql in [*ROWS, *extra]:
        con.execute(sql)
    return con


def _snapshot(con: sqlite3.Connection) -> dict[str, list[tuple]]:
    return {t: [tuple(r) for r in con.execute(f"SELECT * FROM {t} ORDER BY 1, 2")]
            for t in SNAPSHOT}



def test_the_base_schema_holds_every_table_and_the_export_view(tmp_path):
    _built(tmp_path).close()
    with Catalog.open(tmp_path) as cat:
        assert migrations.version(cat.con) == migrations.latest()
        assert len(_snapshot(cat.con)["items"]) == 2
        [row] = cat.con.execute("SELECT status, search_query FROM downloads_export "
                                "WHERE item_id=41").fetchall()
        assert tuple(row) == ("ok", "อาหาร")
        assert sorted(r[0] for r in cat.con.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='items'"
            " AND sql IS NOT NULL")) == ["items_cc", "items_group", "items_sha", "items_url"]
        assert cat.con.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert cat.con.execute("PRAGMA foreign_key_check").fetchall() == []
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed: items_status"):
            cat.con.execute("UPDATE items SET status='bogus' WHERE item_id=41")
        with cat.tx() as c:  # raw: a valid status goes in
            c.execute("UPDATE items SET status=? WHERE item_id=41", (ItemStatus.REMOVED,))


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
def test_a_catalog_refuses_an_unknown_status(tmp_path, table, column, sql):
    _built(tmp_path).close()
    with Catalog.open(tmp_path) as cat:
        with pytest.raises(sqlite3.IntegrityError,
                           match=f"CHECK constraint failed: {table}_{column}"):
            cat.con.execute(sql)


LATER = Migration(2, "m0002_later", "ALTER TABLE items ADD COLUMN later TEXT;\n"
                  "CREATE INDEX items_later ON items(later);")


def test_a_later_migration_is_applied_once_on_top_of_the_base(tmp_path, monkeypatch):
    _built(tmp_path).close()
    monkeypatch.setattr(migrations, "all_migrations", lambda: [*_BASE, LATER])
    with Catalog.open(tmp_path) as cat:
        assert cat.schema_version == 2
        assert "later" in {r[1] for r in cat.con.execute("PRAGMA table_info(items)")}
        assert len(_snapshot(cat.con)["items"]) == 2  # rows kept
        assert migrations.apply_missing(cat.con) == []  # a second time: nothing
    with Catalog.open(tmp_path) as cat:  # nor on the next open
        assert cat.schema_version == 2


def _refuse(con: sqlite3.Connection) -> None:
    raise MigrationError("items.status holds 'keep' in 2 row(s)")


def test_a_failing_migration_is_one_line_and_changes_nothing(tmp_path, monkeypatch):
    con = _built(tmp_path)
    before = _snapshot(con)
    con.close()
    failing = Migration(2, "m0002_refuses", "ALTER TABLE items ADD COLUMN later TEXT;", _refuse)
    monkeypatch.setattr(migrations, "all_migrations", lambda: [*_BASE, failing])
    with pytest.raises(CatalogError) as err:
        Catalog.open(tmp_path)
    assert str(err.value) == (f"{tmp_path / 'catalog.sqlite'}: items.status holds 'keep' in "
                              "2 row(s)")
    con = connect(tmp_path / "catalog.sqlite")
    assert _snapshot(con) == before and migrations.version(con) == 1  # rolled back
    assert "later" not in {r[1] for r in con.execute("PRAGMA table_info(items)")}


def test_migration_scripts_split_where_sqlite_says_a_statement_ends():
    script = ("CREATE TABLE t (a TEXT DEFAULT 'x;y'); -- a comment; with a semicolon\n"
              "CREATE INDEX t_a ON t(a);\nINSERT INTO t VALUES ('1;2')")
    assert migrations.statements(script) == [
        "CREATE TABLE t (a TEXT DEFAULT 'x;y'); -- a comment; with a semicolon",
        "CREATE INDEX t_a ON t(a);", "INSERT INTO t VALUES ('1;2')"]


_BASE = migrations.all_migrations()
