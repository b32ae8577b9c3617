"""The catalog: ``catalog.sqlite`` in the work dir, the single source of truth of a build.

SQLite in WAL mode, schema versioned by ``builder.migrations`` (``PRAGMA user_version``).
Stages record each run in ``stage_runs`` (parameters, fingerprint, counts, summary, usage,
package version, start/end) through :meth:`Catalog.start_run` / :meth:`Catalog.finish_run`.
Writes go through short transactions (``with catalog.tx() as con``) so a kill at any moment
leaves a consistent catalog that the next run resumes from.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmark.files import sha256_text
from builder import __version__
from builder.migrations import all_migrations
from builder.workdir import WorkDir

log = logging.getLogger(__name__)


def utcnow() -> str:
    """ISO-8601 UTC timestamp with seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def fingerprint(*parts: Any) -> str:
    """sha256 over the canonical JSON of ``parts`` (parameters, input fingerprints)."""
    return sha256_text(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str))


class Catalog:
    """Connection to one work dir's catalog; migrates on open."""

    def __init__(self, workdir: WorkDir):
        self.workdir = workdir
        self.path: Path = workdir.catalog_path
        self.con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.con.row_factory = sqlite3.Row
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=NORMAL")
        self.con.execute("PRAGMA foreign_keys=ON")
        self.migrate()

    @classmethod
    def open(cls, workdir: str | Path | WorkDir | None = None) -> Catalog:
        wd = workdir if isinstance(workdir, WorkDir) else WorkDir.open(workdir)
        return cls(wd)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ---------------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return int(self.con.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self) -> None:
        """Apply every migration newer than ``PRAGMA user_version``, each in one transaction."""
        current = self.schema_version
        for mig in all_migrations():
            if mig.version <= current:
                continue
            log.debug("catalog migration %s (v%d)", mig.name, mig.version)
            with self.tx() as con:
                for stmt in _split_sql(mig.sql):
                    con.execute(stmt)
                con.execute(f"PRAGMA user_version = {int(mig.version)}")

    # -- transactions ---------------------------------------------------------------------
    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rollback on error)."""
        self.con.execute("BEGIN IMMEDIATE")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        return self.con.execute(sql, params).fetchall()

    def views(self) -> list[str]:
        rows = self.query("SELECT name FROM sqlite_master WHERE type='view' ORDER BY name")
        return [r["name"] for r in rows]

    def tables(self) -> list[str]:
        rows = self.query(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
        return [r["name"] for r in rows]

    # -- stage runs -----------------------------------------------------------------------
    def start_run(self, stage: str, params: dict[str, Any], inputs: Any = None) -> int:
        """Record the start of a stage run; returns its ``run_id``. Params must hold no secrets."""
        fp = fingerprint(stage, params, inputs)
        with self.tx() as con:
            cur = con.execute(
                "INSERT INTO stage_runs (stage, params_json, fingerprint, status, package_version,"
                " started_at) VALUES (?, ?, ?, 'running', ?, ?)",
                (stage, json.dumps(params, sort_keys=True, default=str), fp, __version__, utcnow()),
            )
            return int(cur.lastrowid)

    def finish_run(
        self,
        run_id: int,
        status: str,
        counts: dict[str, Any] | None = None,
        summary: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        with self.tx() as con:
            con.execute(
                "UPDATE stage_runs SET status=?, counts_json=?, summary=?, usage_json=?, ended_at=?"
                " WHERE run_id=?",
                (
                    status,
                    json.dumps(counts or {}, sort_keys=True, default=str),
                    summary,
                    json.dumps(usage or {}, sort_keys=True, default=str),
                    utcnow(),
                    run_id,
                ),
            )

    def last_run(self, stage: str) -> sqlite3.Row | None:
        rows = self.query(
            "SELECT * FROM stage_runs WHERE stage=? ORDER BY run_id DESC LIMIT 1", (stage,)
        )
        return rows[0] if rows else None


def record_llm_request(
    con: sqlite3.Connection, stage: str, item: str, res: Any, llm: str, prompt_sha: str,
    run_id: int,
) -> None:
    """Upsert the ``llm_requests`` row of one LLM work item (``res``: a ``builder.llm``
    ``LLMResult``; its raw text is kept only when the answer was not ok)."""
    con.execute(
        "INSERT OR REPLACE INTO llm_requests (stage, item, status, reason, raw, cache_key, llm,"
        " prompt_sha, attempts, run_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (stage, item, res.status, res.error, None if res.ok else res.raw, res.key, llm,
         prompt_sha, res.attempts, run_id),
    )


def _split_sql(script: str) -> list[str]:
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
