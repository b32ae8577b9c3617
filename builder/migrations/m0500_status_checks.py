"""CHECK constraints on every status column (issue 24): a row can only hold a known status.

SQLite cannot add a constraint to a table, so each table is rebuilt the way SQLite's manual
describes (``lang_altertable.html``, "making other kinds of table schema changes"): its own
``CREATE TABLE`` text (with every column later migrations added) gains
``CONSTRAINT <table>_<column> CHECK (<column> IN (...))``, the rows are copied in column order,
the old table is dropped, the new one renamed, and its indexes, the views and the
AUTOINCREMENT counter are put back. The runner runs this with foreign keys off, in the one
migration transaction.

A catalog holding a status outside the lists stops the migration before anything is changed,
with one line naming the table, the column and the value. The values are frozen here (a
migration never changes once landed); ``builder.statuses`` holds the same lists as enums and
a later value needs a new migration.
"""

from __future__ import annotations

import re
import sqlite3

from builder.migrations import MigrationError

VERSION = 500

SQL = ""

#: (table, column) -> the allowed values, as of this migration.
CHECKS: dict[tuple[str, str], tuple[str, ...]] = {
    ("stage_runs", "status"): ("running", "done", "failed", "interrupted"),
    ("concepts", "status"): ("candidate", "kept", "merged", "dropped"),
    ("llm_requests", "status"): ("ok", "failed", "refused", "error"),
    ("queries", "status"): ("ok", "failed", "refused", "error", "stale"),
    ("searches", "status"): ("pending", "ok", "empty", "failed", "skipped"),
    ("downloads", "status"): (
        "ok", "duplicate", "http_error", "timeout", "connection_error", "too_large",
        "not_an_image", "corrupt_image", "unsupported_format", "decompression_bomb",
        "blocked_host", "opted_out", "redirect_loop", "too_many_redirects",
        "unsupported_scheme", "invalid_url", "dns_error", "missing_file", "fetch_error",
        "internal_error"),
    ("items", "status"): ("pending", "ok", "failed", "duplicate", "near_duplicate",
                          "needs_review", "kept", "removed"),
    ("dedup_groups", "status"): ("auto", "needs_review", "reviewed"),
    ("tags", "status"): ("ok", "retry", "failed", "refused", "transient"),
    ("term_reviews", "outcome"): ("accepted", "corrected", "unclear", "pending",
                                  "needs_review", "stale"),
}

NAME = "m0500_status_checks"
_HEAD = re.compile(r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\"[^\"]+\"|`[^`]+`|\w+)",
                   re.I)


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def _has_table(con: sqlite3.Connection, table: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                       (table,)).fetchone() is not None


def check_values(con: sqlite3.Connection) -> None:
    """Refuse (:class:`MigrationError`) a catalog holding a value outside ``CHECKS``."""
    for (table, column), values in CHECKS.items():
        if not _has_table(con, table):
            continue
        row = con.execute(
            f"SELECT {column}, COUNT(*) FROM {table} WHERE {column} IS NULL OR {column} NOT IN"
            f" ({_quoted(values)}) GROUP BY {column} ORDER BY COUNT(*) DESC, {column} LIMIT 1"
        ).fetchone()
        if row is not None:
            raise MigrationError(
                f"catalog migration {NAME}: {table}.{column} holds {row[0]!r} in {row[1]} "
                f"row(s), not one of {', '.join(values)}; correct or delete those rows, "
                "then run again")


def with_checks(create_sql: str, table: str, new_name: str,
                checks: list[tuple[str, tuple[str, ...]]]) -> str:
    """``create_sql`` (a table's text in ``sqlite_master``) renamed to ``new_name`` with a
    named CHECK constraint per ``(column, values)`` added after the last column."""
    head = _HEAD.match(create_sql)
    if head is None or head.group(1).strip('"`') != table:
        raise RuntimeError(f"{NAME}: cannot read the definition of table {table}")
    body = create_sql[head.end():]
    close = body.rstrip().rfind(")")
    added = "".join(f",\n    CONSTRAINT {table}_{col} CHECK ({col} IN ({_quoted(vals)}))"
                    for col, vals in checks)
    return f'CREATE TABLE "{new_name}"{body[:close]}\n{added}\n{body[close:]}'


def rebuild(con: sqlite3.Connection, table: str,
            checks: list[tuple[str, tuple[str, ...]]], seq: int | None) -> None:
    """Rebuild ``table`` with ``checks``; rows, indexes and the AUTOINCREMENT counter
    (``seq``, read before) kept."""
    create_sql = con.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name=?",
                             (table,)).fetchone()[0]
    indexes = [r[0] for r in con.execute(
        "SELECT sql FROM sqlite_master WHERE type='index' AND tbl_name=? AND sql IS NOT NULL"
        " ORDER BY name", (table,))]
    new = f"{table}__m0500"
    con.execute(with_checks(create_sql, table, new, checks))
    con.execute(f'INSERT INTO "{new}" SELECT * FROM "{table}"')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE "{new}" RENAME TO "{table}"')
    for sql in indexes:
        con.execute(sql)
    if seq is not None:
        con.execute("DELETE FROM sqlite_sequence WHERE name=?", (table,))
        con.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table, seq))


def apply(con: sqlite3.Connection) -> None:
    """Check every value, then rebuild each table with its constraints (views dropped and
    put back around the rebuild, since they name the tables)."""
    check_values(con)
    views = con.execute("SELECT name, sql FROM sqlite_master WHERE type='view' ORDER BY name"
                        ).fetchall()
    for name, _ in views:
        con.execute(f'DROP VIEW "{name}"')
    per_table: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for (table, column), values in CHECKS.items():
        per_table.setdefault(table, []).append((column, values))
    seqs: dict[str, int] = {}
    if _has_table(con, "sqlite_sequence"):
        seqs = dict(con.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    for table, checks in per_table.items():
        if _has_table(con, table):
            rebuild(con, table, checks, seqs.get(table))
    for _, sql in views:
        con.execute(sql)
