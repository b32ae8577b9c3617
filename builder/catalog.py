"""The catalog, ``catalog.sqlite`` in the work dir: the single source of truth of a build, in
short transactions (a kill leaves a catalog the next run resumes from)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builder import liveness, migrations
from builder.statuses import RunStatus
from builder.workdir import WorkDir
from core import __version__
from core.files import sha256_text
from core.provenance import utcnow

log = logging.getLogger(__name__)


def brief(text: str, n: int = 300) -> str:
    """``text`` on one line, cut to ``n`` characters ending ``...``."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def fingerprint(*parts: Any) -> str:
    """sha256 over the canonical JSON of ``parts`` (parameters, input fingerprints)."""
    return sha256_text(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str))


def stale_reason(pid: Any, host: Any) -> str:
    """The summary line of a run whose process is gone."""
    return (f"interrupted: its process (PID {pid} on {host}) is gone without recording the end "
            "(killed, or the machine stopped)")


class CatalogError(ValueError):
    """The catalog file cannot be used (not a database, damaged, empty, too new): one line."""


#: sqlite's words for a file that is not (or no longer) a readable database.
CORRUPT = ("file is not a database", "database disk image is malformed", "unable to open")


def corrupt_reason(exc: BaseException) -> str | None:
    """sqlite's message when ``exc`` says the database file is unusable, else None."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    msg = str(exc)
    return msg if any(m in msg for m in CORRUPT) else None


def connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.row_factory = sqlite3.Row
    return con


def create_catalog(path: Path) -> None:
    """Build a migrated catalog under a temporary name and link it to ``path`` (first wins)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    try:
        # private like the images (0600; SQLite gives its -wal and -shm files the same mode):
        # the catalog is the build's working state; what a user shares goes through exports
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        con = connect(tmp)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            migrations.apply_missing(con)
        finally:
            con.close()  # the last connection: the WAL is checkpointed into the file
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # a concurrent first run won: use its catalog
        except OSError:  # a file system without hard links: rename unless one appeared
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)


def check_catalog_file(path: Path) -> None:
    """Refuse a catalog path that cannot be a catalog before sqlite touches it."""
    if path.is_dir():
        raise CatalogError(f"{path} is a folder, not a catalog file")
    wal = path.with_name(path.name + "-wal")
    if path.is_file() and path.stat().st_size == 0 and not (wal.is_file() and wal.stat().st_size):
        raise CatalogError(
            f"{path} is empty (0 bytes), not a catalog: a new build never leaves it empty. "
            "Restore it from a backup, or delete it to start the build anew")


#: sqlite's words for a catalog it may not write (a read-only disk or file).
READONLY = ("attempt to write a readonly database", "readonly database")


def cannot_write(path: Path, exc: BaseException) -> bool:
    """True when ``exc`` says the catalog or its folder cannot be written (not damaged)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    msg = str(exc)
    if any(m in msg for m in READONLY):
        return True
    if "unable to open" not in msg:
        return False
    folder = path.parent
    try:
        read_only_fs = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only_fs = False
    return read_only_fs or not os.access(folder, os.W_OK) or (
        path.exists() and not os.access(path, os.W_OK))


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only; on a read-only disk (no WAL index possible) as immutable."""
    uri = path.resolve().as_uri()
    try:
        con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=60, isolation_level=None)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        con = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None)
    con.row_factory = sqlite3.Row
    return con


class Catalog:
    """One work dir's catalog, created or migrated on open; ``readonly`` writes nothing."""

    def __init__(self, workdir: WorkDir, readonly: bool = False):
        self.workdir = workdir
        self.path: Path = workdir.catalog_path
        self.readonly = readonly
        check_catalog_file(self.path)
        if readonly and not self.path.exists():
            raise CatalogError(f"no catalog at {self.path}: nothing was built in this work dir")
        try:
            if not self.path.exists():
                create_catalog(self.path)
            self.con = connect_readonly(self.path) if readonly else connect(self.path)
            try:
                self._setup()
            except BaseException:
                self.con.close()
                raise
        except sqlite3.DatabaseError as exc:
            if not readonly and cannot_write(self.path, exc):
                raise CatalogError(
                    f"cannot write {self.path} ({exc}: a read-only disk or no write "
                    "permission); fix that and run the same command again (python -m pipeline "
                    "status only reads it)") from None
            why = corrupt_reason(exc)
            if why is None:
                raise
            raise CatalogError(f"{self.path} is not a usable catalog ({why}): restore it from a "
                               "backup, or move it away to start the build anew") from None

    def _setup(self) -> None:
        if not self.readonly:
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
                self.con.execute(f"PRAGMA {pragma}")
        self.con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        if self.readonly:
            self._refuse_newer()
        else:
            self.migrate()

    @classmethod
    def open(cls, workdir: str | Path | WorkDir | None = None) -> Catalog:
        return cls(workdir if isinstance(workdir, WorkDir) else WorkDir.open(workdir))

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return migrations.version(self.con)

    def _refuse_newer(self) -> None:
        if self.schema_version > migrations.latest():
            raise CatalogError(
                f"{self.path} has catalog schema v{self.schema_version}, newer than this "
                f"package knows (v{migrations.latest()}): upgrade the package (pip install -e .)")

    def migrate(self) -> None:
        """Apply the migrations the catalog lacks; a catalog of a newer package is refused."""
        self._refuse_newer()
        try:
            migrations.apply_missing(self.con)
        except migrations.MigrationError as exc:  # rolled back: the catalog is as it was
            raise CatalogError(f"{self.path}: {exc}") from None

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

    def one(self, sql: str, params: tuple | dict = ()) -> Any:
        """The first column of the first row (a ``COUNT(*)``)."""
        return self.con.execute(sql, params).fetchone()[0]

    def pairs(self, sql: str, params: tuple | dict = ()) -> dict[Any, Any]:
        """``{first column: second column}`` of every row (a ``GROUP BY`` count)."""
        return {r[0]: r[1] for r in self.con.execute(sql, params)}

    def views(self) -> list[str]:
        return [r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type='view' "
                                         "ORDER BY name")]

    def tables(self) -> list[str]:
        return [r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type='table' AND "
                                         "name NOT LIKE 'sqlite_%' ORDER BY name")]

    def start_run(self, stage: str, params: dict[str, Any], inputs: Any = None) -> int:
        """Record a run's start with this process's PID, host and start time (first marking
        the runs of gone processes ``interrupted``); returns its ``run_id``. No secrets."""
        fp = fingerprint(stage, params, inputs)
        pid = os.getpid()
        host, proc_start = liveness.host_name(), liveness.start_time(pid)
        with self.tx() as con:
            self.mark_stale_runs(con)
            cur = con.execute(
                "INSERT INTO stage_runs (stage, params_json, fingerprint, status, package_version,"
                " started_at, pid, host, proc_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (stage, json.dumps(params, sort_keys=True, default=str), fp, RunStatus.RUNNING,
                 __version__, utcnow(), pid, host, proc_start))
            return int(cur.lastrowid)

    def stale_runs(self) -> list[int]:
        """The ``running`` runs whose process is gone (:func:`builder.liveness.gone`)."""
        rows = self.query("SELECT run_id, pid, host, proc_start FROM stage_runs "
                          "WHERE status=?", (RunStatus.RUNNING,))
        return [r["run_id"] for r in rows if liveness.gone(r["pid"], r["host"], r["proc_start"])]

    def mark_stale_runs(self, con: sqlite3.Connection) -> list[int]:
        """Record every ``running`` run whose process is gone ``interrupted``; returns their ids."""
        stale = self.stale_runs()
        for run_id in stale:
            row = con.execute("SELECT pid, host, summary FROM stage_runs WHERE run_id=?",
                              (run_id,)).fetchone()
            why = stale_reason(row["pid"], row["host"])
            summary = why + (f"\n{row['summary']}" if row["summary"] else "")
            con.execute("UPDATE stage_runs SET status=?, summary=?, ended_at=? "
                        "WHERE run_id=? AND status=?", (RunStatus.INTERRUPTED, summary,
                                                        utcnow(), run_id, RunStatus.RUNNING))
            log.warning("run %d was left running by process %s on %s, which is gone: recorded "
                        "interrupted", run_id, row["pid"], row["host"])
        return stale

    def finish_run(self, run_id: int, status: RunStatus | str, counts: dict[str, Any] | None = None,
                   summary: str | None = None, usage: dict[str, Any] | None = None) -> None:
        with self.tx() as con:
            con.execute(
                "UPDATE stage_runs SET status=?, counts_json=?, summary=?, usage_json=?, ended_at=?"
                " WHERE run_id=?", (status, json.dumps(counts or {}, sort_keys=True, default=str),
                                    summary, json.dumps(usage or {}, sort_keys=True, default=str),
                                    utcnow(), run_id))

    def last_run(self, stage: str) -> sqlite3.Row | None:
        rows = self.query("SELECT * FROM stage_runs WHERE stage=? ORDER BY run_id DESC LIMIT 1",
                          (stage,))
        return rows[0] if rows else None


#: At most this many bytes of an invalid model answer are kept per record.
RAW_CAP = 16 * 1024


def clip_raw(text: str | None, cap: int = RAW_CAP) -> str | None:
    """``text``, or its first ``cap`` UTF-8 bytes and a line saying it was truncated."""
    if text is None:
        return None
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    head = data[:cap].decode("utf-8", "ignore")
    return f"{head}\n[truncated from {len(data)} bytes; the first {cap} kept]"


def record_llm_request(con: sqlite3.Connection, stage: str, item: str, res: Any, llm: str,
                       prompt_sha: str, run_id: int) -> None:
    """Upsert the ``llm_requests`` row of one LLM work item (raw text clipped, only when the
    answer was not ok)."""
    con.execute(
        "INSERT OR REPLACE INTO llm_requests (stage, item, status, reason, raw, cache_key, llm,"
        " prompt_sha, attempts, run_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (stage, item, res.status, res.error, None if res.ok else clip_raw(res.raw), res.key,
         llm, prompt_sha, res.attempts, run_id))
