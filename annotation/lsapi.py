"""Label Studio project bookkeeping shared by push, pull and status.

The catalog's ``ls_projects`` row (kind, server) names the project of a review kind. A work
dir never adopts a project it did not create (task keys such as ``group:1`` only mean something
within one catalog), so a work dir without a record gets a new project.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from annotation.client import AnnotationError, Connection
from annotation.configs import ProjectSpec
from builder.catalog import Catalog, utcnow

log = logging.getLogger(__name__)


def recorded_project(cat: Catalog, kind: str, server: str) -> int | None:
    """The project id the catalog holds for ``kind`` on ``server``, if any."""
    rows = cat.query(
        "SELECT project_id FROM ls_projects WHERE kind = ? AND server = ?", (kind, server)
    )
    return int(rows[0]["project_id"]) if rows else None


def recorded_title(cat: Catalog, kind: str, server: str) -> str | None:
    """The title of the recorded project (a push without ``--project-title`` keeps it)."""
    rows = cat.query("SELECT title FROM ls_projects WHERE kind = ? AND server = ?", (kind, server))
    return str(rows[0]["title"]) if rows else None


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
        "show_annotation_history": True,
    }


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
        row = cat.query(
            "SELECT config_sha FROM ls_projects WHERE kind=? AND server=?", (spec.kind, conn.server)
        )[0]
        if row["config_sha"] != spec.config_sha:
            log.info("updating the settings of project %d", pid)
            client.projects.update(pid, **_settings(spec))
    with cat.tx() as con:
        con.execute(
            "INSERT INTO ls_projects (kind, server, project_id, title, model_version, config_sha,"
            " created_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT (kind, server) DO UPDATE SET"
            " project_id=excluded.project_id, title=excluded.title,"
            " model_version=excluded.model_version, config_sha=excluded.config_sha",
            (spec.kind, conn.server, pid, spec.title, spec.model_version, spec.config_sha,
             utcnow()),
        )
    return pid


def export_tasks(client: Any, pid: int, all_tasks: bool = False) -> list[dict[str, Any]]:
    """The project's tasks with every annotation (all annotators), as Label Studio's JSON."""
    blob = b"".join(
        client.projects.exports.download_sync(
            pid, export_type="JSON", download_all_tasks=all_tasks
        )
    )
    data = json.loads(blob or b"[]")
    if not isinstance(data, list):
        raise AnnotationError(f"unexpected export of project {pid}: not a JSON list")
    return data


def known_tasks(cat: Catalog, kind: str, server: str, pid: int) -> dict[str, dict[str, Any]]:
    """``{task_key: row}`` of the tasks recorded for the project."""
    rows = cat.query(
        "SELECT * FROM ls_tasks WHERE kind=? AND server=? AND project_id=?", (kind, server, pid)
    )
    return {r["task_key"]: dict(r) for r in rows}
