"""Raw annotator decisions: parse a Label Studio export, store it in ``reviews`` with history.

One review row per (annotation, image): the task, the image (sha256 and its first item), the
annotator (e-mail), the decision and the annotation's time. A row is identified by its
annotation; ``result_sha`` (sha256 of the result and the cancelled flag) tells whether the
annotation changed since the last pull. A changed annotation gets new rows (``current = 1``)
and its old rows stay with ``current = 0``: the history keeps both. An annotation deleted in
Label Studio keeps its rows too, with ``current = 0``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmark.files import sha256_text
from builder.catalog import Catalog, utcnow

log = logging.getLogger(__name__)

DUP_CHOICES = ("keep", "remove")


@dataclass(frozen=True)
class ReviewRow:
    task_id: int
    annotation_id: int
    annotator: str
    item_id: int | None
    sha256: str | None
    decision: str
    annotated_at: str | None
    result_sha: str


def _annotator(ann: Mapping[str, Any], users: Mapping[int, str]) -> str:
    who = ann.get("completed_by")
    if isinstance(who, dict):
        return str(who.get("email") or who.get("username") or who.get("id"))
    if who is None:
        return "unknown"
    return users.get(int(who), f"user:{who}")


def _result_sha(ann: Mapping[str, Any]) -> str:
    blob = {"result": ann.get("result") or [], "was_cancelled": bool(ann.get("was_cancelled"))}
    return sha256_text(json.dumps(blob, sort_keys=True))


def _choices(ann: Mapping[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in ann.get("result") or []:
        if isinstance(r, dict) and r.get("type") == "choices":
            vals = (r.get("value") or {}).get("choices") or []
            out[str(r.get("from_name"))] = [str(v) for v in vals]
    return out


def duplicate_decisions(ann: Mapping[str, Any], n_images: int) -> list[str]:
    """Per-image decisions of one annotation of a duplicates task.

    ``keep`` / ``remove`` where the annotator chose one; ``none_duplicates`` where they ticked
    "none of these are duplicates" and made no per-image choice (counts as keep); ``skipped``
    for a skipped task; ``unanswered`` otherwise; ``invalid`` for an unknown value.
    """
    if ann.get("was_cancelled"):
        return ["skipped"] * n_images
    ch = _choices(ann)
    none = "none_duplicates" in ch.get("group", [])
    out = []
    for i in range(n_images):
        vals = ch.get(f"decision_{i}") or []
        if len(vals) == 1 and vals[0] in DUP_CHOICES:
            out.append(vals[0])
        elif vals:
            out.append("invalid")
        else:
            out.append("none_duplicates" if none else "unanswered")
    return out


def parse_export(
    kind: str,
    tasks: Iterable[Mapping[str, Any]],
    task_map: Mapping[int, Mapping[str, Any]],
    users: Mapping[int, str],
) -> tuple[list[ReviewRow], Counter]:
    """Review rows of every annotation of the pushed tasks in a JSON export."""
    rows: list[ReviewRow] = []
    counts: Counter = Counter()
    for t in tasks:
        pushed = task_map.get(int(t["id"]))
        if pushed is None:
            counts["tasks not pushed from this work dir"] += 1
            continue
        data = json.loads(pushed["data_json"])
        for ann in t.get("annotations") or []:
            counts["annotations"] += 1
            base = dict(
                task_id=int(t["id"]), annotation_id=int(ann["id"]),
                annotator=_annotator(ann, users),
                annotated_at=ann.get("updated_at") or ann.get("created_at"),
                result_sha=_result_sha(ann),
            )
            if kind == "duplicates":
                images = data["images"]
                for img, dec in zip(images, duplicate_decisions(ann, len(images)), strict=True):
                    rows.append(ReviewRow(item_id=img["item_ids"][0], sha256=img["sha256"],
                                          decision=dec, **base))
            else:
                if ann.get("was_cancelled"):
                    dec = "skipped"
                else:
                    dec = json.dumps(sorted(set(_choices(ann).get("concepts", []))),
                                     ensure_ascii=False)
                rows.append(ReviewRow(item_id=None, sha256=data["sha256"], decision=dec, **base))
    return rows, counts


def store_reviews(
    cat: Catalog, kind: str, project_id: int, rows: list[ReviewRow], run_id: int | None
) -> Counter:
    """Store new and changed annotations; retire deleted ones. Unchanged ones are untouched."""
    by_ann: dict[int, list[ReviewRow]] = {}
    for r in rows:
        by_ann.setdefault(r.annotation_id, []).append(r)
    counts: Counter = Counter()
    now = utcnow()
    with cat.tx() as con:
        current = {
            int(r["annotation_id"]): r["result_sha"]
            for r in con.execute(
                "SELECT DISTINCT annotation_id, result_sha FROM reviews WHERE kind=? AND"
                " project_id=? AND current=1", (kind, project_id)
            )
        }
        for ann_id, ann_rows in by_ann.items():
            old = current.get(ann_id)
            if old == ann_rows[0].result_sha:
                counts["unchanged"] += 1
                continue
            if old is not None:
                con.execute(
                    "UPDATE reviews SET current=0 WHERE kind=? AND project_id=? AND"
                    " annotation_id=? AND current=1", (kind, project_id, ann_id)
                )
                counts["changed"] += 1
            else:
                counts["new"] += 1
            con.executemany(
                "INSERT INTO reviews (kind, project_id, task_id, annotation_id, annotator, item_id,"
                " sha256, decision, annotated_at, pulled_at, current, result_sha, run_id)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,1,?,?)",
                [(kind, project_id, r.task_id, r.annotation_id, r.annotator, r.item_id, r.sha256,
                  r.decision, r.annotated_at, now, r.result_sha, run_id) for r in ann_rows],
            )
        for ann_id in set(current) - set(by_ann):
            con.execute(
                "UPDATE reviews SET current=0 WHERE kind=? AND project_id=? AND annotation_id=?"
                " AND current=1", (kind, project_id, ann_id)
            )
            counts["deleted in Label Studio"] += 1
    return counts


def current_rows(cat: Catalog, kind: str, project_id: int) -> list[ReviewRow]:
    """The current review rows of a project, oldest annotation first."""
    rows = cat.query(
        "SELECT * FROM reviews WHERE kind=? AND project_id=? AND current=1"
        " ORDER BY annotated_at, annotation_id, review_id", (kind, project_id)
    )
    return [
        ReviewRow(task_id=r["task_id"], annotation_id=r["annotation_id"], annotator=r["annotator"],
                  item_id=r["item_id"], sha256=r["sha256"], decision=r["decision"],
                  annotated_at=r["annotated_at"], result_sha=r["result_sha"])
        for r in rows
    ]
