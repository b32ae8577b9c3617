"""A push reconciles the project in Label Studio with what the catalog asks now.

Each recorded task (``ls_tasks``) against the current subjects (``{task key: draft}``):
unchanged; changed (data and prediction replaced in place, image order kept); retired (no
longer a subject: overlap 0, so Label Studio never hands it out again, answers kept); or
reopened (its subject came back). Details: docs/annotation.md, "Re-push".
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from annotation.configs import ProjectSpec
from annotation.links import TaskDraft
from builder.catalog import Catalog
from core.provenance import utcnow

log = logging.getLogger(__name__)


def same_data(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two task data dicts are the same as stored (sorted-key JSON)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def image_order(row: Mapping[str, Any]) -> list[str]:
    """The sha256 order of the images a recorded duplicates task shows (empty otherwise)."""
    return [img["sha256"] for img in json.loads(row["data_json"]).get("images") or []
            if isinstance(img, dict) and "sha256" in img]


def _update(cat: Catalog, row: Mapping[str, Any], assignments: str, *values: Any) -> None:
    """``UPDATE ls_tasks SET <assignments>`` of the recorded task ``row``."""
    with cat.tx() as con:
        con.execute(f"UPDATE ls_tasks SET {assignments} WHERE kind=? AND server=? AND project_id=?"
                    " AND task_key=?", (*values, row["kind"], row["server"], row["project_id"],
                                        row["task_key"]))


def retire(cat: Catalog, client: Any, row: Mapping[str, Any], reason: str) -> None:
    """Take a task out of the labeling stream (overlap 0), keeping its answers; record why."""
    client.tasks.update(str(row["task_id"]), overlap=0, is_labeled=True,
                        meta={"task_key": row["task_key"], "retired": reason})
    _update(cat, row, "retired_at=COALESCE(retired_at, ?), retired_reason=?, overlap=0",
            utcnow(), reason)


def reopen(cat: Catalog, client: Any, row: Mapping[str, Any], overlap: int) -> None:
    """Give a retired task back to the labeling stream (its subject exists again)."""
    client.tasks.update(str(row["task_id"]), overlap=overlap, meta={"task_key": row["task_key"]})
    _update(cat, row, "retired_at=NULL, retired_reason=NULL, overlap=NULL")


def replace_data(cat: Catalog, client: Any, spec: ProjectSpec, row: Mapping[str, Any],
                 draft: TaskDraft) -> None:
    """Replace a task's data and its prediction of the project's model version."""
    tid = int(row["task_id"])
    client.tasks.update(str(tid), data=draft.data)
    for p in client.predictions.list(task=tid):
        if p.model_version == spec.model_version:
            client.predictions.delete(id=p.id)
    if draft.prediction:
        client.predictions.create(task=tid, result=draft.prediction, score=1.0,
                                  model_version=spec.model_version)
    _update(cat, row, "data_json=?, group_id=?, sha256=?", json.dumps(draft.data, sort_keys=True),
            draft.data.get("group_id"), draft.data.get("sha256"))


def reconcile(cat: Catalog, client: Any, spec: ProjectSpec, known: Mapping[str, Mapping[str, Any]],
              on_server: set[int], subjects: Mapping[str, TaskDraft], kept: set[str],
              why_gone: str, overlaps: Mapping[int, tuple[int | None, bool | None]] | None = None,
              ) -> Counter:
    """Compare every recorded task with the subjects; retire, reopen, replace; return counts.

    ``kept``: keys left as they are (tasks of ``reviewed`` groups). ``on_server``: the task ids
    of the export (others are only counted). ``overlaps``: the server's ``{task id: (overlap,
    is_labeled)}``; a retired task found handed out again is retired again.
    """
    overlaps = overlaps or {}
    counts: Counter = Counter()  # named as PushReport's fields
    for key, row in sorted(known.items()):
        if int(row["task_id"]) not in on_server:
            counts["gone"] += 1
            continue
        draft = subjects.get(key)
        if draft is None:
            if row.get("retired_at"):
                live = overlaps.get(int(row["task_id"]), (None, None))
                if row.get("overlap") != 0 or live[0] not in (None, 0) or live[1] is False:
                    retire(cat, client, row, row.get("retired_reason") or why_gone)
                counts["retired"] += 1  # retired before: stays so
            elif key in kept:
                counts["unchanged"] += 1
            else:
                retire(cat, client, row, why_gone)
                log.info("retired task %s (%s): %s", row["task_id"], key, why_gone)
                counts["retired"] += 1
            continue
        if row.get("retired_at"):
            reopen(cat, client, row, spec.annotators)
            counts["reopened"] += 1
        if same_data(json.loads(row["data_json"]), draft.data):
            counts["unchanged"] += 1
        else:
            replace_data(cat, client, spec, row, draft)
            counts["changed"] += 1
    return counts

