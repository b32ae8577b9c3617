"""A push reconciles the project in Label Studio with what the catalog asks now.

Every recorded task of the project (``ls_tasks``) is compared with the catalog's current
*subjects* (``{task key: draft}``: the dedup groups, tagged images or query terms that exist
now, whether or not this push would create them):

* key still a subject, data the same: **unchanged**;
* key still a subject, data different (a renumbered group with the same images, new image
  URLs, a changed proposal): **changed**: the task's data and prediction are replaced in
  place, with the images in the order the task had, so its answers keep their meaning;
* key no longer a subject (``image_dedup`` ran again with another threshold and the group's
  membership changed, the image lost its tags, the term changed): **retired**. The task stays
  in Label Studio with its answers (the history; ``pull`` still stores them) but is never
  counted for any subject, and it is taken out of the labeling stream: its ``overlap`` is set
  to 0, so Label Studio counts it as fully labeled (``is_labeled``) and the stream, which
  serves only tasks that are not, never hands it out again (deleting it is not an option: it
  would delete the answers). A retired task whose subject comes back is **reopened**.

Label Studio 1.23 recomputes ``is_labeled`` from ``overlap`` whenever an annotation is saved
(with overlap 0 it stays labeled), and may reset task overlaps when the project's
``maximum_annotations`` changes: a push that updates the settings forgets the recorded
overlaps, sets retired tasks to 0 again, and the next pull sets the live ones
(:mod:`annotation.quorum`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from annotation.configs import ProjectSpec
from annotation.links import TaskDraft
from builder.catalog import Catalog, utcnow

log = logging.getLogger(__name__)


def same_data(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two task data dicts are the same (as stored: JSON with sorted keys)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def image_order(row: Mapping[str, Any]) -> list[str]:
    """The sha256 order of the images a recorded duplicates task shows (empty otherwise)."""
    return [img["sha256"] for img in json.loads(row["data_json"]).get("images") or []
            if isinstance(img, dict) and "sha256" in img]


def retire(cat: Catalog, client: Any, row: Mapping[str, Any], reason: str) -> None:
    """Take a task out of the labeling stream (overlap 0: Label Studio counts it as done),
    keeping its answers; record why."""
    client.tasks.update(str(row["task_id"]), overlap=0, is_labeled=True,
                        meta={"task_key": row["task_key"], "retired": reason})
    with cat.tx() as con:
        con.execute("UPDATE ls_tasks SET retired_at=COALESCE(retired_at, ?), retired_reason=?,"
                    " overlap=0 WHERE kind=? AND server=? AND project_id=? AND task_key=?",
                    (utcnow(), reason, row["kind"], row["server"], row["project_id"],
                     row["task_key"]))


def reopen(cat: Catalog, client: Any, row: Mapping[str, Any], overlap: int) -> None:
    """Give a retired task back to the labeling stream (its subject exists again)."""
    client.tasks.update(str(row["task_id"]), overlap=overlap, meta={"task_key": row["task_key"]})
    with cat.tx() as con:
        con.execute("UPDATE ls_tasks SET retired_at=NULL, retired_reason=NULL, overlap=NULL"
                    " WHERE kind=? AND"
                    " server=? AND project_id=? AND task_key=?",
                    (row["kind"], row["server"], row["project_id"], row["task_key"]))


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
    with cat.tx() as con:
        con.execute("UPDATE ls_tasks SET data_json=?, group_id=?, sha256=? WHERE kind=? AND"
                    " server=? AND project_id=? AND task_key=?",
                    (json.dumps(draft.data, sort_keys=True), draft.data.get("group_id"),
                     draft.data.get("sha256"), row["kind"], row["server"], row["project_id"],
                     row["task_key"]))


def reconcile(cat: Catalog, client: Any, spec: ProjectSpec, known: Mapping[str, Mapping[str, Any]],
              on_server: set[int], subjects: Mapping[str, TaskDraft], kept: set[str],
              why_gone: str, overlaps: Mapping[int, tuple[int | None, bool | None]] | None = None,
              ) -> dict[str, int]:
    """Compare every recorded task with the subjects; retire, reopen, replace; return counts.

    ``kept``: keys to leave as they are although they are not subjects (duplicates: tasks of
    groups already ``reviewed``, which ``image_dedup`` never touches). ``on_server``: the
    task ids in the project's export (a recorded task deleted on the server is only
    counted). ``why_gone``: the reason recorded for a retired task. ``overlaps``: the
    server's ``{task id: (overlap, is_labeled)}``; a retired task found handed out again
    (someone changed the project's settings) is retired again.
    """
    overlaps = overlaps or {}
    counts = {"unchanged": 0, "changed": 0, "retired": 0, "reopened": 0,
              "gone from the server": 0}
    for key, row in sorted(known.items()):
        if int(row["task_id"]) not in on_server:
            counts["gone from the server"] += 1
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


def live_task_ids(known: Mapping[str, Mapping[str, Any]]) -> set[int]:
    """The task ids of the recorded tasks that are not retired."""
    return {int(r["task_id"]) for r in known.values() if not r.get("retired_at")}
