"""Push review tasks from the catalog to Label Studio (``python -m annotation push``).

* ``duplicates``: one task per dedup group (default: groups with status ``needs_review``) with
  the group's images that wait for review (distinct images, side by side), and the automatic
  stage's proposal (keep the group's kept item, remove the others) as a prediction of the
  project's model version; each image's label names its proposal, so pre-filled marks read as
  the machine's proposal (``pull`` records one submitted unchanged as a confirmed proposal).
* ``tags``: a seeded sample of images with Gemini tags; the tags are the prediction.
* ``queries``: :mod:`annotation.queries` (one project per locale), through :func:`push_drafts`.

Idempotent: each task carries a key (``group:<hash of concept and images>`` /
``image:<sha256>`` / ``term:...``) in its ``meta``; before and after importing, the project's
tasks are read back and every key is recorded in ``ls_tasks``, so a push interrupted between
import and record, or run twice, never creates a second task for the same key. Images reach
Label Studio through its local-files storage or ``serve-images`` (:mod:`annotation.links`).
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from annotation.client import Connection
from annotation.configs import ProjectSpec, image_label, project_spec
from annotation.exports import export_tasks
from annotation.links import ImageLinks, TaskDraft
from annotation.projects import (
    ensure_project,
    known_tasks,
    record_tasks,
    recorded_annotators,
    recorded_title,
    tag_concepts,
)
from benchmark.files import sha256_text
from builder.catalog import Catalog
from builder.stagekit import stage_run

log = logging.getLogger(__name__)

REMOVED_STATUSES = ("near_duplicate", "duplicate", "removed")


@dataclass
class PushReport:
    kind: str
    project_id: int
    created: int = 0
    already: int = 0
    counts: Counter = field(default_factory=Counter)  # drafts not pushed, by reason
    notes: Counter = field(default_factory=Counter)  # pushed drafts worth a word

    def summary(self) -> str:
        extra = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        notes = ", ".join(f"{k} {v}" for k, v in sorted(self.notes.items()))
        return (
            f"push {self.kind}: project {self.project_id}: {self.created} tasks created, "
            f"{self.already} already there" + (f"; skipped: {extra}" if extra else "")
            + (f"; {notes}" if notes else "")
        )


def _image_rows(cat: Catalog, where: str, params: tuple) -> list[Any]:
    return cat.query(
        "SELECT i.item_id, i.sha256, i.status, i.country, i.rank, i.language, im.ext, im.width,"
        f" im.height FROM items i JOIN images im ON im.sha256 = i.sha256 WHERE {where}"
        " ORDER BY i.item_id",
        params,
    )


def group_key(concept: str, shas: list[str]) -> str:
    """Task key of a candidate group: its concept and the set of images shown.

    Content-based, not the group id: ``image_dedup`` renumbers the groups it has not seen
    reviewed when it runs again, and the same group must not become a second task.
    """
    blob = "\n".join([concept, *sorted(shas)])
    return f"group:{sha256_text(blob)[:32]}"


def _shown_images(cat: Catalog, group_id: int) -> dict[str, list[Any]]:
    """``{sha256: item rows}`` of the images a group's task shows.

    The images waiting for review (``image_dedup`` marks a group's representatives
    ``needs_review``; the copies it linked automatically already carry their decision); when
    fewer than two wait (a group pushed for an audit), every image of the group.
    """
    members: dict[str, list[Any]] = {}
    for row in _image_rows(cat, "i.group_id = ? AND i.sha256 IS NOT NULL", (group_id,)):
        members.setdefault(row["sha256"], []).append(row)
    waiting = {s: rows for s, rows in members.items()
               if any(r["status"] == "needs_review" for r in rows)}
    return waiting if len(waiting) >= 2 else members


def duplicate_drafts(
    cat: Catalog, links: ImageLinks, statuses: tuple[str, ...]
) -> tuple[list[TaskDraft], Counter]:
    """One draft per dedup group with the given statuses and at least two images to compare."""
    skipped: Counter = Counter()
    marks = ",".join("?" * len(statuses))
    groups = cat.query(
        f"SELECT * FROM dedup_groups WHERE status IN ({marks}) ORDER BY group_id", statuses
    )
    drafts = []
    for g in groups:
        members = _shown_images(cat, g["group_id"])
        missing = [s for s, rows in members.items()
                   if not cat.workdir.image_path(s, rows[0]["ext"]).is_file()]
        if missing:
            log.warning("group %d: %d image files missing, not pushed", g["group_id"], len(missing))
            skipped["image file missing"] += 1
            continue
        if len(members) < 2:
            skipped["fewer than 2 distinct images"] += 1
            continue
        images, prediction = [], []
        for idx, (sha, rows) in enumerate(members.items()):
            first = rows[0]
            if g["kept_item_id"] is not None:
                keep = any(r["item_id"] == g["kept_item_id"] for r in rows)
            else:
                keep = any(r["status"] not in REMOVED_STATUSES for r in rows)
            proposal = "keep" if keep else "remove"
            images.append({
                "url": links.url(sha, first["ext"]),
                "sha256": sha,
                "item_ids": [r["item_id"] for r in rows],
                "proposal": proposal,
                "label": image_label(idx + 1, len(members), first["width"], first["height"],
                                     proposal),
            })
            prediction.append({
                "from_name": f"decision_{idx}", "to_name": f"image_{idx}", "type": "choices",
                "value": {"choices": [proposal]},
            })
        data = {
            "title": f"Concept: {g['concept']}",
            "info": f"Group {g['group_id']}: {len(images)} images side by side. Remove copies of "
                    "the same scene or object without meaningful change.",
            "group_id": g["group_id"],
            "concept": g["concept"],
            "images": images,
        }
        key = group_key(g["concept"], list(members))
        drafts.append(TaskDraft(key, data, prediction, group_id=int(g["group_id"])))
    return drafts, skipped


def tag_drafts(
    cat: Catalog, links: ImageLinks, concepts: list[str], sample: int, seed: int
) -> tuple[list[TaskDraft], Counter]:
    """A seeded sample of ``sample`` images with ``ok`` Gemini tags (same seed, same sample)."""
    skipped: Counter = Counter()
    rows = cat.query(
        "SELECT t.sha256, t.tags_json, t.model, im.ext FROM tags t JOIN images im"
        " ON im.sha256 = t.sha256 WHERE t.status = 'ok' ORDER BY t.sha256"
    )
    chosen = random.Random(seed).sample(list(rows), min(sample, len(rows)))
    known = set(concepts)
    drafts = []
    for r in sorted(chosen, key=lambda x: x["sha256"]):
        try:
            tags = [t for t in json.loads(r["tags_json"] or "[]") if isinstance(t, str)]
        except json.JSONDecodeError:
            skipped["unreadable tags_json"] += 1
            continue
        if not cat.workdir.image_path(r["sha256"], r["ext"]).is_file():
            skipped["image file missing"] += 1
            continue
        unknown = [t for t in tags if t not in known]
        if unknown:
            skipped["tags outside the concept list (dropped from the prediction)"] += len(unknown)
        data = {
            "image": links.url(r["sha256"], r["ext"]),
            "sha256": r["sha256"],
            "gemini": "Automatic tags: " + (", ".join(tags) if tags else "(none)"),
        }
        pred = [{"from_name": "concepts", "to_name": "image", "type": "choices",
                 "value": {"choices": [t for t in tags if t in known]}}]
        drafts.append(TaskDraft(f"image:{r['sha256']}", data, pred, sha256=r["sha256"]))
    return drafts, skipped


def push(
    cat: Catalog,
    conn: Connection,
    kind: str,
    *,
    title: str | None = None,
    images: str = "local-files",
    document_root: str | None = None,
    statuses: tuple[str, ...] = ("needs_review",),
    sample: int = 200,
    seed: int = 0,
    annotators: int | None = None,
    batch_size: int = 100,
) -> PushReport:
    """Create or reuse the project of ``kind`` (``duplicates`` or ``tags``; the query-term
    review is :func:`annotation.queries.push_queries`) and import the tasks it does not hold yet.

    ``title`` and ``annotators`` (annotations per task) default to the existing project's,
    else to the kind's default title and 3.
    """
    links = ImageLinks(cat.workdir.images_dir, images, document_root)
    concepts = tag_concepts(cat) if kind == "tags" else []
    title = title or recorded_title(cat, kind, conn.server)
    annotators = annotators or recorded_annotators(cat, conn, kind) or 3
    spec = project_spec(kind, title, concepts, annotators)
    if kind == "duplicates":
        drafts, skipped = duplicate_drafts(cat, links, statuses)
    else:
        drafts, skipped = tag_drafts(cat, links, concepts, sample, seed)
    params = {"images": images, "statuses": list(statuses), "sample": sample, "seed": seed}
    return push_drafts(cat, conn, spec, links, drafts, skipped, params, batch_size)


def push_drafts(
    cat: Catalog, conn: Connection, spec: ProjectSpec, links: ImageLinks,
    drafts: list[TaskDraft], skipped: Counter, params: dict[str, Any], batch_size: int = 100,
    notes: Counter | None = None,
) -> PushReport:
    """Ensure the project of ``spec``, then import the drafts whose key it does not hold yet.

    The project's tasks are read back before and after the import and every key is recorded
    (``ls_tasks``), so an interrupted or repeated push never creates a second task per key.
    """
    pid = ensure_project(cat, conn, spec)
    params = {"action": "push", "kind": spec.kind, "project_id": pid, "server": conn.server,
              "annotators": spec.annotators, **params}
    with stage_run(cat, "review", params) as rec:
        links.ensure_storage(conn.client, pid)
        record_tasks(cat, spec.kind, conn.server, pid,
                     export_tasks(conn.client, pid, all_tasks=True))
        have = known_tasks(cat, spec.kind, conn.server, pid)
        todo = [d for d in drafts if d.key not in have]
        report = PushReport(spec.kind, pid, already=len(drafts) - len(todo), counts=skipped,
                            notes=notes or Counter())
        _import(conn, spec, pid, todo, batch_size, report)
        record_tasks(cat, spec.kind, conn.server, pid,
                     export_tasks(conn.client, pid, all_tasks=True))
        rec.counts = {"created": report.created, "already": report.already,
                      "skipped": dict(report.counts), "notes": dict(report.notes)}
        rec.summary = report.summary()
    return report


def _import(conn: Connection, spec: ProjectSpec, pid: int, todo: list[TaskDraft],
            batch_size: int, report: PushReport) -> None:
    """Import the drafts in batches, each with its pre-annotation (if any) as a prediction."""
    from tqdm.auto import tqdm

    with tqdm(total=len(todo), desc=f"push {spec.kind}", unit="task") as bar:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            payload = [
                {"data": d.data, "meta": {"task_key": d.key},
                 **({"predictions": [{"model_version": spec.model_version, "score": 1.0,
                                      "result": d.prediction}]} if d.prediction else {})}
                for d in batch
            ]
            conn.client.projects.import_tasks(pid, request=payload, return_task_ids=True)
            report.created += len(batch)
            bar.update(len(batch))
