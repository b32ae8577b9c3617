"""Catalog schema migrations: a module ``mNNNN_<name>.py`` each, with a ``VERSION``, ``SQL`` and
optionally ``apply(con)``; never edit a released one. :func:`apply_missing` applies those above
``PRAGMA user_version`` in one transaction, foreign keys off."""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

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
        mod = importlib.import_module(f"{__name__}.{info.name}")
        mig = Migration(int(mod.VERSION), info.name, str(mod.SQL), getattr(mod, "apply", None))
        if mig.version in found:
            raise RuntimeError(f"duplicate catalog migration version {mig.version}: "
                               f"{found[mig.version].name} and {mig.name}")
        found[mig.version] = mig
    return [found[v] for v in sorted(found)]


def latest() -> int:
    return all_migrations()[-1].version


def version(con: sqlite3.Connection) -> int:
    return int(con.execute("PRAGMA user_version").fetchone()[0])


def statements(script: str) -> list[str]:
    """The statements of a migration script, split where sqlite says one is complete."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out + ([buf.strip()] if buf.strip() else [])


def apply_missing(con: sqlite3.Connection) -> list[Migration]:
    """Apply every migration above the catalog's version; returns what was applied."""
    if version(con) >= latest():
        return []
    foreign_keys = int(con.execute("PRAGMA foreign_keys").fetchone()[0])
    con.execute("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction: set it before
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            todo = [m for m in all_migrations() if m.version > version(con)]  # under the lock
            for mig in todo:
                log.debug("catalog migration %s (v%d)", mig.name, mig.version)
                for stmt in statements(mig.sql):
                    con.execute(stmt)
                if mig.run is not None:
                    mig.run(con)
                con.execute(f"PRAGMA user_version = {int(mig.version)}")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        if foreign_keys:
            con.execute("PRAGMA foreign_keys=ON")
    return todo
