"""Catalog schema migrations, applied in ascending ``VERSION`` order.

Each module ``mNNNN_<name>.py`` defines ``VERSION: int`` and ``SQL: str`` (a script run inside
one transaction) and may define ``apply(con)``, run after the script in the same transaction,
for what SQL alone cannot do (``m0500`` rebuilds tables to add CHECK constraints; it raises
:class:`MigrationError` for a catalog it cannot migrate). Migrations run with foreign keys
off, as SQLite's manual asks for table rebuilds. Never edit a migration that has landed; add a new one. Ranges keep parallel
work apart: 1-99 base, 100-199 concepts/queries/LLM, 200-299 crawl/dedup, 300-399 annotation,
400-499 tagging/triplets, 500-599 constraints over all tables.

Because ranges land out of order (102 after 400), what a catalog has is the SET of applied
versions in ``schema_migrations``, not a high-water mark: :func:`apply_missing` applies every
known migration that is not recorded, in version order. ``PRAGMA user_version`` still holds
the highest applied version (a catalog newer than the package is refused by it). A catalog
made before ``schema_migrations`` existed is back-filled once: a migration up to its
``user_version`` counts as applied when every table it creates and every column it adds is
there (so 102 and 301, which landed below 400, are applied to such catalogs, not skipped).
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

log = logging.getLogger(__name__)


class MigrationError(ValueError):
    """A catalog whose data a migration cannot carry over (one line: what and where)."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    run: Callable[[sqlite3.Connection], None] | None = None


@functools.cache
def all_migrations() -> list[Migration]:
    """Every migration module in this package, sorted by version; duplicates are an error."""
    found: dict[int, Migration] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("m"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        mig = Migration(int(mod.VERSION), info.name, str(mod.SQL), getattr(mod, "apply", None))
        if mig.version in found:
            raise RuntimeError(
                f"duplicate catalog migration version {mig.version}: "
                f"{found[mig.version].name} and {mig.name}"
            )
        found[mig.version] = mig
    return [found[v] for v in sorted(found)]


_CREATE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
_ADD = re.compile(r"ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", re.I)
_INDEX = re.compile(r"CREATE\s+INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
TRACK = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


def split_sql(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside our literals)."""
    stmts, buf = [], []
    for line in script.splitlines():
        stripped = line.split("--", 1)[0]
        buf.append(stripped)
        if stripped.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if stmt.strip(";").strip():
                stmts.append(stmt)
            buf = []
    tail = "\n".join(buf).strip()
    if tail:
        stmts.append(tail)
    return stmts


def _has_schema_of(con: sqlite3.Connection, mig: Migration) -> bool:
    """True when every table and index ``mig`` creates and every column it adds exists."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if any(t not in tables for t in _CREATE.findall(mig.sql)):
        return False
    indexes = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    if any(i not in indexes for i in _INDEX.findall(mig.sql)):
        return False
    for table, column in _ADD.findall(mig.sql):
        cols = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        if column not in cols:
            return False
    return True


def applied_versions(con: sqlite3.Connection) -> set[int] | None:
    """The recorded versions; None for a catalog without ``schema_migrations``."""
    row = con.execute("SELECT 1 FROM sqlite_master WHERE type='table' "
                      "AND name='schema_migrations'").fetchone()
    if row is None:
        return None
    return {int(r[0]) for r in con.execute("SELECT version FROM schema_migrations")}


def _record(con: sqlite3.Connection, mig: Migration, when: str) -> None:
    con.execute("INSERT OR IGNORE INTO schema_migrations VALUES (?, ?, ?)",
                (mig.version, mig.name, when))


def pending(con: sqlite3.Connection) -> list[Migration]:
    """The known migrations this catalog lacks (back-filling the record of an old one is
    done by :func:`apply_missing`, which calls this again under the write lock)."""
    done = applied_versions(con)
    known = all_migrations()
    if done is None:
        return known  # decided under the lock: nothing is written outside a transaction
    return [m for m in known if m.version not in done]


def apply_missing(con: sqlite3.Connection) -> list[Migration]:
    """Apply every known migration the catalog lacks, in version order, in one
    ``BEGIN IMMEDIATE`` transaction (re-read under the lock, so of several processes each
    migration is applied by exactly one). Returns what was applied."""
    if not pending(con):
        return []
    foreign_keys = int(con.execute("PRAGMA foreign_keys").fetchone()[0])
    con.execute("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction: set it before
    try:
        return _apply_locked(con)
    finally:
        if foreign_keys:
            con.execute("PRAGMA foreign_keys=ON")


def _apply_locked(con: sqlite3.Connection) -> list[Migration]:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    con.execute("BEGIN IMMEDIATE")
    try:
        if applied_versions(con) is None:
            high = int(con.execute("PRAGMA user_version").fetchone()[0])
            con.execute(TRACK)
            for mig in all_migrations():
                if mig.version <= high and _has_schema_of(con, mig):
                    _record(con, mig, "before schema_migrations")
        todo = pending(con)
        for mig in todo:
            log.debug("catalog migration %s (v%d)", mig.name, mig.version)
            for stmt in split_sql(mig.sql):
                con.execute(stmt)
            if mig.run is not None:
                mig.run(con)
            _record(con, mig, now)
        high = max(applied_versions(con) or {0})
        con.execute(f"PRAGMA user_version = {int(high)}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return todo
