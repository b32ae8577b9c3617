"""Which Label Studio projects and tasks belong to a work dir (``ls_projects``, ``ls_tasks``,
``ls_reviewers``), shared by push, pull and status.

A work dir never adopts a project it did not create: task keys only mean something within
one catalog. Reviewers are assigned per locale because Label Studio's community edition lets
every user open every project, so ``pull`` enforces the assignment.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from annotation.client import AnnotationError, Connection
from annotation.configs import ProjectSpec
from builder.catalog import Catalog
from builder.statuses import ConceptStatus
from core.provenance import utcnow

log = logging.getLogger(__name__)


def _project_row(cat: Catalog, kind: str, server: str) -> Any:
    rows = cat.query("SELECT * FROM ls_projects WHERE kind = ? AND server = ?", (kind, server))
    return rows[0] if rows else None


def recorded_project(cat: Catalog, kind: str, server: str) -> int | None:
    """The project id the catalog holds for ``kind`` on ``server``, if any."""
    row = _project_row(cat, kind, server)
    return int(row["project_id"]) if row else None


def recorded_title(cat: Catalog, kind: str, server: str) -> str | None:
    """The title of the recorded project (a push without ``--project-title`` keeps it)."""
    row = _project_row(cat, kind, server)
    return str(row["title"]) if row else None


def recorded_annotators(cat: Catalog, conn: Connection, kind: str) -> int | None:
    """``maximum_annotations`` of the recorded project on the server (None if none/gone)."""
    pid = recorded_project(cat, kind, conn.server)
    if pid is None or not _exists(conn.client, pid):
        return None
    value = conn.client.projects.get(pid).maximum_annotations
    return int(value) if value else None


def require_project(cat: Catalog, kind: str, server: str) -> int:
    """The recorded project of ``kind``, or an error telling to push first."""
    pid = recorded_project(cat, kind, server)
    if pid is None:
        raise AnnotationError(
            f"no {kind} project of {server} in this work dir: run "
            f"`python -m annotation push --kind {kind}` first"
        )
    return pid


def _exists(client: Any, pid: int) -> bool:
    from label_studio_sdk.core.api_error import ApiError

    try:
        client.projects.get(pid)
    except ApiError as exc:
        if exc.status_code == 404:
            return False
        raise
    return True


def _settings(spec: ProjectSpec) -> dict[str, Any]:
    return {
        "title": spec.title,
        "label_config": spec.label_config,
        "expert_instruction": spec.instruction_html,
        "show_instruction": True,
        "model_version": spec.model_version,
        "show_collab_predictions": True,
        "maximum_annotations": spec.annotators,
        "overlap_cohort_percentage": 100,
        "show_skip_button": True,
        # blind review: the labeling stream shows a person their own answer only (Label
        # Studio 1.23 serves the next task with the requester's annotations alone); the
        # annotation history panel would show how others answered, so it is off. The
        # predictions are the automatic stage's proposals, not other people's answers.
        "show_annotation_history": False,
        "reveal_preannotations_interactively": False,
        "show_overlap_first": False,
    }


def settings_sha(spec: ProjectSpec) -> str:
    """sha256 of every setting a push gives the project (``ls_projects.config_sha``)."""
    from core.files import sha256_text

    return sha256_text(spec.config_sha + json.dumps(_settings(spec), sort_keys=True))


def ensure_project(cat: Catalog, conn: Connection, spec: ProjectSpec) -> int:
    """Reuse the project the catalog records (updating changed settings) or create one."""
    client = conn.client
    pid = recorded_project(cat, spec.kind, conn.server)
    if pid is not None and not _exists(client, pid):
        log.warning("project %d of %s is gone from the server; creating a new one", pid, spec.kind)
        pid = None
    if pid is None:
        pid = int(client.projects.create(**_settings(spec)).id)
        log.info("created project %d %r", pid, spec.title)
    else:
        if _project_row(cat, spec.kind, conn.server)["config_sha"] != settings_sha(spec):
            log.info("updating the settings of project %d", pid)
            client.projects.update(pid, **_settings(spec))
            with cat.tx() as con:  # Label Studio may reset task overlaps: set them again
                con.execute("UPDATE ls_tasks SET overlap=NULL WHERE kind=? AND server=? AND"
                            " project_id=?", (spec.kind, conn.server, pid))
    with cat.tx() as con:
        record_project(con, spec.kind, conn.server, pid, spec.title, spec.model_version,
                       settings_sha(spec), spec.choices)
    return pid


def record_project(con: sqlite3.Connection, kind: str, server: str, project_id: int, title: str,
                   model_version: str, config_sha: str, choices: Sequence[str] | None = None,
                   created_at: str | None = None) -> None:
    """Record (or update, keeping its creation time) the ``kind`` project on ``server``."""
    con.execute(
        "INSERT INTO ls_projects (kind, server, project_id, title, model_version, config_sha,"
        " created_at, choices_json) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (kind, server) DO"
        " UPDATE SET project_id=excluded.project_id, title=excluded.title,"
        " model_version=excluded.model_version, config_sha=excluded.config_sha,"
        " choices_json=excluded.choices_json",
        (kind, server, project_id, title, model_version, config_sha, created_at or utcnow(),
         json.dumps(list(choices), ensure_ascii=False) if choices else None),
    )


def tag_concepts(cat: Catalog) -> list[str]:
    """The concepts offered in the tag check: the catalog's kept concepts, else the table."""
    rows = cat.query("SELECT name FROM concepts WHERE status = ? ORDER BY name",
                     (ConceptStatus.KEPT,))
    if rows:
        return [r["name"] for r in rows]
    from core import datatables

    return datatables.concepts()


def tag_choices(cat: Catalog, kind: str, server: str) -> list[str]:
    """The concepts a tag answer may name: those the project was pushed with, else the catalog's."""
    row = _project_row(cat, kind, server)
    if row is None or not row["choices_json"]:
        return tag_concepts(cat)
    return list(json.loads(row["choices_json"]))


def recorded_keys(cat: Catalog, kind: str, server: str) -> list[str]:
    """The project keys of ``kind`` recorded for ``server`` (``queries`` has one per locale)."""
    rows = cat.query("SELECT kind FROM ls_projects WHERE server = ? AND (kind = ? OR kind LIKE ?)"
                     " ORDER BY kind", (server, kind, f"{kind}:%"))
    return [r["kind"] for r in rows]


def known_reviewers(emails: list[str], users: dict[int, str], server: str) -> list[str]:
    """The server's spelling of each reviewer's e-mail, or an error naming one with no account."""
    by_fold = {u.casefold(): u for u in users.values()}
    out = []
    for email in emails:
        if email.casefold() not in by_fold:
            raise AnnotationError(
                f"no Label Studio account {email!r} on {server}: invite the reviewer first "
                "(Organization > Add People), then assign the e-mail they signed up with")
        out.append(by_fold[email.casefold()])
    return out


def assign_reviewers(cat: Catalog, locale: str, emails: list[str], remove: bool = False) -> int:
    """Assign (or with ``remove`` unassign) reviewers to a locale, e-mails compared without
    case; returns the rows changed."""
    changed = 0
    with cat.tx() as con:
        for email in emails:
            if remove:
                cur = con.execute("DELETE FROM ls_reviewers WHERE locale=? AND"
                                  " lower(annotator)=lower(?)", (locale, email))
            elif con.execute("SELECT 1 FROM ls_reviewers WHERE locale=? AND"
                             " lower(annotator)=lower(?)", (locale, email)).fetchone():
                continue
            else:
                cur = con.execute("INSERT OR IGNORE INTO ls_reviewers (locale, annotator,"
                                  " assigned_at) VALUES (?,?,?)", (locale, email, utcnow()))
            changed += cur.rowcount
    return changed


def assigned_reviewers(cat: Catalog, locale: str | None = None) -> dict[str, list[str]]:
    """``{locale: [e-mails]}`` of the assigned reviewers (of one locale, or all)."""
    rows = cat.query("SELECT locale, annotator FROM ls_reviewers" +
                     (" WHERE locale = ?" if locale else "") + " ORDER BY locale, annotator",
                     (locale,) if locale else ())
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["locale"], []).append(r["annotator"])
    return out


def record_tasks(cat: Catalog, kind: str, server: str, pid: int, tasks: list[dict]) -> int:
    """Record every task of the project that carries a key and is not yet in ``ls_tasks``."""
    new = 0
    with cat.tx() as con:
        for t in tasks:
            key = (t.get("meta") or {}).get("task_key")
            if not key:
                continue
            data = t.get("data") or {}
            cur = con.execute(
                "INSERT OR IGNORE INTO ls_tasks (kind, server, project_id, task_key, task_id,"
                " group_id, sha256, data_json, pushed_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (kind, server, pid, key, int(t["id"]), data.get("group_id"),
                 data.get("sha256"), json.dumps(data, sort_keys=True), utcnow()),
            )
            new += cur.rowcount
    return new


def known_tasks(cat: Catalog, kind: str, server: str, pid: int) -> dict[str, dict[str, Any]]:
    """``{task_key: row}`` of the tasks recorded for the project."""
    rows = cat.query(
        "SELECT * FROM ls_tasks WHERE kind=? AND server=? AND project_id=?", (kind, server, pid)
    )
    return {r["task_key"]: dict(r) for r in rows}
