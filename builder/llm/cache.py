"""The LLM response cache ``cache/llm.sqlite``, keyed by :func:`cache_key`: a re-run makes no
API call. Invalid answers are cached ``failed``, transport errors never; nothing secret."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.catalog import CatalogError, corrupt_reason
from core.files import sha256_text
from core.provenance import utcnow

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key          TEXT PRIMARY KEY,
    provider     TEXT NOT NULL,
    model        TEXT NOT NULL,
    template_sha TEXT NOT NULL,
    params_json  TEXT NOT NULL,
    input_sha    TEXT NOT NULL,
    status       TEXT NOT NULL,   -- ok / failed
    text         TEXT,            -- raw model text of the last answer
    error        TEXT,            -- why it failed validation (status = failed)
    attempts     INTEGER NOT NULL,
    usage_json   TEXT NOT NULL,
    created_at   TEXT NOT NULL
)
"""


def cache_key(provider: str, model: str, template_sha: str, params: dict[str, Any],
              input_sha: str) -> str:
    """sha256 of the canonical JSON of the five parts."""
    return sha256_text(json.dumps([provider, model, template_sha, params, input_sha],
                                  sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                  default=str))


@dataclass(frozen=True)
class CachedResponse:
    key: str
    status: str
    text: str | None
    error: str | None
    attempts: int
    usage: dict[str, int]


class LLMCache:
    """Thread-safe sqlite store of LLM responses (WAL, one short transaction per write)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # private (0600), like the catalog and the images
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                    check_same_thread=False)
        try:
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute(SCHEMA)
        except sqlite3.DatabaseError as exc:
            why = corrupt_reason(exc)
            if why is None:
                raise
            self._con.close()
            raise CatalogError(f"{self.path} is not a usable LLM cache ({why}): move it away "
                               "(answers are asked again)") from None

    def close(self) -> None:
        self._con.close()

    def get(self, key: str) -> CachedResponse | None:
        with self._lock:
            row = self._con.execute("SELECT key, status, text, error, attempts, usage_json FROM "
                                    "responses WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        return CachedResponse(row[0], row[1], row[2], row[3], int(row[4]), json.loads(row[5]))

    def put(self, key: str, *, provider: str, model: str, template_sha: str,
            params: dict[str, Any], input_sha: str, status: str, text: str | None,
            error: str | None, attempts: int, usage: dict[str, int]) -> None:
        """Insert or replace one response (atomic: a single statement)."""
        with self._lock:
            self._con.execute(
                "INSERT OR REPLACE INTO responses (key, provider, model, template_sha, params_json,"
                " input_sha, status, text, error, attempts, usage_json, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, provider, model, template_sha,
                 json.dumps(params, sort_keys=True, default=str), input_sha, status, text, error,
                 attempts, json.dumps(usage, sort_keys=True), utcnow()))

    def count(self) -> int:
        with self._lock:
            return int(self._con.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
