"""Raw annotator decisions: parse a Label Studio export, store it in ``reviews`` with history.

One row per (annotation, image) of a duplicates task, per annotation otherwise. A changed
annotation (``result_sha``) gets new ``current = 1`` rows and its old rows stay ``current = 0``;
a deleted one keeps its rows, ``current = 0``; only tasks in the export are judged.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from builder.catalog import Catalog
from core.files import sha256_text
from core.provenance import utcnow
from core.text import normalize_term, same_term

log = logging.getLogger(__name__)

DUP_CHOICES = ("keep", "remove")
TERM_VERDICTS = ("correct", "better_term", "unclear")
PROPOSAL = "prediction"  # Label Studio's ``origin`` of a pre-filled result left unchanged


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
    answer: str | None = None
    editor: str | None = None  # the last editor, when not the author (the answer is not counted)


def _annotator(ann: Mapping[str, Any], users: Mapping[int, str]) -> str:
    who = ann.get("completed_by")
    if isinstance(who, dict):
        return str(who.get("email") or who.get("username") or who.get("id"))
    if who is None:
        return "unknown"
    try:
        return users.get(int(who), f"user:{who}")
    except (TypeError, ValueError):
        return f"user:{who}"


def _result_sha(ann: Mapping[str, Any], editor: str | None = None) -> str:
    blob: dict[str, Any] = {"result": ann.get("result") or [],
                            "was_cancelled": bool(ann.get("was_cancelled"))}
    if editor is not None:  # saved by another account: a change even if the result is not
        blob["editor"] = editor
    return sha256_text(json.dumps(blob, sort_keys=True))


def _results(ann: Mapping[str, Any], kind: str) -> dict[str, tuple[list[str], str | None]]:
    """``{from_name: (values, origin)}`` of the annotation's results of type ``kind``."""
    key = "choices" if kind == "choices" else "text"
    out: dict[str, tuple[list[str], str | None]] = {}
    for r in ann.get("result") or []:
        if isinstance(r, dict) and r.get("type") == kind:
            vals = (r.get("value") or {}).get(key) or []
            vals = [vals] if isinstance(vals, str) else vals
            out[str(r.get("from_name"))] = ([str(v) for v in vals], r.get("origin"))
    return out


def _choices(ann: Mapping[str, Any]) -> dict[str, list[str]]:
    return {k: v for k, (v, _) in _results(ann, "choices").items()}


def duplicate_decisions(ann: Mapping[str, Any], n_images: int) -> list[str]:
    """Per-image decisions of one duplicates annotation (values: docs/annotation.md, "pull
    --kind duplicates"); a proposal submitted unchanged is ``confirmed_<choice>``."""
    if ann.get("was_cancelled"):
        return ["skipped"] * n_images
    res = _results(ann, "choices")
    none = "none_duplicates" in res.get("group", ([], None))[0]
    out = []
    for i in range(n_images):
        vals, origin = res.get(f"decision_{i}", ([], None))
        if len(vals) == 1 and vals[0] in DUP_CHOICES:
            out.append(f"confirmed_{vals[0]}" if origin == PROPOSAL else vals[0])
        elif vals:
            out.append("invalid")
        else:
            out.append("none_duplicates" if none else "unanswered")
    if none and any(d.endswith("remove") for d in out):
        return ["contradiction"] * n_images
    return out


def term_decision(ann: Mapping[str, Any], proposed: str) -> tuple[str, str | None]:
    """``(decision, answer)`` of one query-term annotation: a verdict, or ``contradiction`` /
    ``incomplete`` with the answer saying what, ``skipped``, ``unanswered``, ``invalid``."""
    if ann.get("was_cancelled"):
        return "skipped", None
    verdict = _choices(ann).get("verdict", [])
    typed = [normalize_term(t) for t in _results(ann, "textarea").get("better_term", ([], None))[0]]
    typed = [t for t in typed if t]
    first: dict[str, str] = {}
    for t in typed:  # the first spelling of each term
        first.setdefault(t.casefold(), t)
    distinct = list(first.values())
    if not verdict and not distinct:
        return "unanswered", None
    if len(verdict) != 1 or verdict[0] not in TERM_VERDICTS:
        return "invalid", json.dumps(verdict, ensure_ascii=False)
    v = verdict[0]
    if len(distinct) > 1:
        return "contradiction", f"{v} with several terms typed: {' / '.join(distinct)}"
    text = distinct[0] if distinct else None
    if v == "better_term":
        if text is None:
            return "incomplete", "a better term chosen but none typed"
        if same_term(text, proposed):
            return "contradiction", f"a better term chosen but the proposed term typed: {text}"
        return "better_term", text
    if text is not None and not (v == "correct" and same_term(text, proposed)):
        label = "correct" if v == "correct" else "unclear"
        return "contradiction", f"{label} chosen and a different term typed: {text}"
    return v, None


def parse_export(
    kind: str,
    tasks: Iterable[Mapping[str, Any]],
    task_map: Mapping[int, Mapping[str, Any]],
    users: Mapping[int, str],
    choices: Collection[str] | None = None,
) -> tuple[list[ReviewRow], Counter]:
    """Review rows of every annotation of the pushed tasks in a checked export. ``choices``:
    the tag check's concepts; an answer outside them is stored ``invalid``, never a vote."""
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
            annotator = _annotator(ann, users)
            editor = None
            if ann.get("updated_by") is not None:
                editor = _annotator({"completed_by": ann["updated_by"]}, users)
                if editor == annotator:
                    editor = None
            if editor is not None:
                counts["annotations last saved by another account"] += 1
            base = dict(
                task_id=int(t["id"]), annotation_id=int(ann["id"]),
                annotator=annotator,
                annotated_at=ann.get("updated_at") or ann.get("created_at"),
                result_sha=_result_sha(ann, editor), editor=editor,
            )
            if kind == "duplicates":
                images = data["images"]
                for img, dec in zip(images, duplicate_decisions(ann, len(images)), strict=True):
                    rows.append(ReviewRow(item_id=img["item_ids"][0], sha256=img["sha256"],
                                          decision=dec, **base))
            elif kind == "tags":
                dec, answer = _tag_decision(ann, choices)
                if dec == "invalid":
                    counts["tag answers with concepts outside the list (rejected)"] += 1
                rows.append(ReviewRow(item_id=None, sha256=data["sha256"], decision=dec,
                                      answer=answer, **base))
            else:
                dec, answer = term_decision(ann, data["proposed"])
                rows.append(ReviewRow(item_id=None, sha256=None, decision=dec, answer=answer,
                                      **base))
    return rows, counts


def _tag_decision(ann: Mapping[str, Any], choices: Collection[str] | None) -> tuple[str, str | None]:
    """The sorted concept list as JSON, or ``invalid`` with the concepts outside ``choices``."""
    if ann.get("was_cancelled"):
        return "skipped", None
    picked = sorted(set(_choices(ann).get("concepts", [])))
    outside = [c for c in picked if choices is not None and c not in choices]
    if outside:
        return "invalid", json.dumps(outside, ensure_ascii=False)
    return json.dumps(picked, ensure_ascii=False), None


def add_reviews(con: sqlite3.Connection, kind: str, project_id: int | None,
                rows: Iterable[ReviewRow], pulled_at: str | None = None,
                run_id: int | None = None) -> None:
    """The ``reviews`` rows of pulled annotations, each the current one of its annotation."""
    now = pulled_at or utcnow()
    con.executemany(
        "INSERT INTO reviews (kind, project_id, task_id, annotation_id, annotator, item_id,"
        " sha256, decision, annotated_at, pulled_at, current, result_sha, run_id, answer,"
        " editor) VALUES (?,?,?,?,?,?,?,?,?,?,1,?,?,?,?)",
        [(kind, project_id, r.task_id, r.annotation_id, r.annotator, r.item_id, r.sha256,
          r.decision, r.annotated_at, now, r.result_sha, run_id, r.answer, r.editor)
         for r in rows])


def store_reviews(
    cat: Catalog, kind: str, project_id: int, rows: list[ReviewRow], run_id: int | None,
    exported_tasks: Collection[int],
) -> Counter:
    """Store new and changed annotations; retire those gone from a task in ``exported_tasks``."""
    by_ann: dict[int, list[ReviewRow]] = {}
    for r in rows:
        by_ann.setdefault(r.annotation_id, []).append(r)
    exported = set(exported_tasks)
    counts: Counter = Counter()
    now = utcnow()
    with cat.tx() as con:
        current = {
            int(r["annotation_id"]): (r["result_sha"], int(r["task_id"]))
            for r in con.execute(
                "SELECT DISTINCT annotation_id, result_sha, task_id FROM reviews WHERE kind=? AND"
                " project_id=? AND current=1", (kind, project_id)
            )
        }
        retire = ("UPDATE reviews SET current=0 WHERE kind=? AND project_id=? AND annotation_id=?"
                  " AND current=1")
        for ann_id, ann_rows in by_ann.items():
            old = current.get(ann_id)
            if old is not None and old[0] == ann_rows[0].result_sha:
                counts["unchanged"] += 1
                continue
            if old is not None:
                con.execute(retire, (kind, project_id, ann_id))
            counts["new" if old is None else "changed"] += 1
            add_reviews(con, kind, project_id, ann_rows, now, run_id)
        for ann_id, (_, task_id) in current.items():
            if ann_id not in by_ann and task_id in exported:
                con.execute(retire, (kind, project_id, ann_id))
                counts["deleted in Label Studio"] += 1
    return counts


def current_rows(cat: Catalog, kind: str, project_id: int) -> list[ReviewRow]:
    """The current review rows of a project, oldest annotation first."""
    rows = cat.query(
        "SELECT * FROM reviews WHERE kind=? AND project_id=? AND current=1"
        " ORDER BY annotated_at, annotation_id, review_id", (kind, project_id)
    )
    return [ReviewRow(**{f.name: r[f.name] for f in fields(ReviewRow)}) for r in rows]
