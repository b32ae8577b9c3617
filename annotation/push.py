"""Push review tasks from the catalog to Label Studio (``python -m annotation push``).

Kinds ``duplicates`` (one task per dedup group, the automatic proposal as a prediction) and
``tags`` (a seeded sample, the Gemini tags as the prediction); ``queries`` goes through
:func:`push_drafts`. A push reconciles the project first (:mod:`annotation.reconcile`), then
imports what is missing; each task's key is recorded in ``ls_tasks``, so a repeated or
interrupted push never makes a second task per key (docs/annotation.md).
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Mapping
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
    recorded_project,
    recorded_title,
    tag_concepts,
)
from annotation.quorum import server_overlaps
from annotation.reconcile import image_order, reconcile
from builder.catalog import Catalog
from builder.stagekit import stage_run
from builder.statuses import DedupStatus, TagStatus
from core.files import sha256_text

log = logging.getLogger(__name__)

REMOVED_STATUSES = ("near_duplicate", "duplicate", "removed")


@dataclass
class PushReport:
    """What a push did: tasks created, and what it found of the tasks already there."""

    kind: str
    project_id: int
    created: int = 0
    unchanged: int = 0
    changed: int = 0
    retired: int = 0
    reopened: int = 0
    not_added: int = 0  # tags: sampled images not added (no --add-tasks)
    gone: int = 0  # recorded tasks deleted on the server
    counts: Counter = field(default_factory=Counter)  # drafts not pushed, by reason
    notes: Counter = field(default_factory=Counter)  # pushed drafts worth a word
    nothing: str = ""  # why there was nothing to push (no project made), and the next step

    def summary(self) -> str:
        extra = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        if self.nothing:
            return f"push {self.kind}: nothing to push: {self.nothing}" + (
                f" (skipped: {extra})" if extra else "")
        notes = ", ".join(f"{k} {v}" for k, v in sorted(self.notes.items()))
        more = [f"{self.reopened} reopened"] if self.reopened else []
        if self.gone:
            more.append(f"{self.gone} recorded tasks gone from the server")
        if self.not_added:
            more.append(f"{self.not_added} sampled images not added (the project holds its "
                        "sample; --add-tasks adds them)")
        return (
            f"push {self.kind}: project {self.project_id}: {self.created} created, "
            f"{self.unchanged} unchanged, {self.changed} changed, {self.retired} retired"
            + "".join(f", {m}" for m in more)
            + (f"; skipped: {extra}" if extra else "") + (f"; {notes}" if notes else "")
        )


def group_key(concept: str, shas: list[str]) -> str:
    """Task key of a group: its concept and images (``image_dedup`` renumbers groups)."""
    blob = "\n".join([concept, *sorted(shas)])
    return f"group:{sha256_text(blob)[:32]}"


def _shown_images(cat: Catalog, group_id: int) -> dict[str, list[Any]]:
    """``{sha256: item rows}`` a group's task shows: those waiting for (or decided by) review,
    else, when fewer than two (an audit), every image of the group."""
    members: dict[str, list[Any]] = {}
    for row in cat.query(
            "SELECT i.item_id, i.sha256, i.status, i.reason, im.ext, im.width, im.height FROM items"
            " i JOIN images im ON im.sha256 = i.sha256 WHERE i.group_id = ? AND i.sha256 IS NOT"
            " NULL ORDER BY i.item_id", (group_id,)):
        members.setdefault(row["sha256"], []).append(row)
    waiting = {s: rows for s, rows in members.items()
               if any(r["status"] == "needs_review" or (r["reason"] or "").startswith("review:")
                      for r in rows)}
    return waiting if len(waiting) >= 2 else members


def duplicate_drafts(
    cat: Catalog, links: ImageLinks, statuses: tuple[str, ...] | None,
    order: Mapping[str, list[str]] | None = None,
) -> tuple[list[TaskDraft], Counter]:
    """One draft per dedup group with ``statuses`` (None: all not ``reviewed``); ``order`` keeps
    existing tasks' image order, so their answers keep their meaning."""
    skipped: Counter = Counter()
    if statuses is None:
        groups = cat.query("SELECT * FROM dedup_groups WHERE status IS NOT ? ORDER BY group_id",
                           (DedupStatus.REVIEWED,))
    else:
        marks = ",".join("?" * len(statuses))
        groups = cat.query(
            f"SELECT * FROM dedup_groups WHERE status IN ({marks}) ORDER BY group_id", statuses
        )
    drafts = []
    for g in groups:
        members = _shown_images(cat, g["group_id"])
        key = group_key(g["concept"], list(members))
        if order and order.get(key) and set(order[key]) == set(members):
            members = {s: members[s] for s in order[key]}
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
        drafts.append(TaskDraft(key, data, prediction, group_id=int(g["group_id"])))
    return drafts, skipped


def tag_drafts(
    cat: Catalog, links: ImageLinks, concepts: list[str], sample: int | None, seed: int
) -> tuple[list[TaskDraft], Counter]:
    """A seeded sample of ``sample`` images with ``ok`` tags (None: every such image)."""
    skipped: Counter = Counter()
    rows = cat.query(
        "SELECT t.sha256, t.tags_json, t.model, im.ext FROM tags t JOIN images im"
        " ON im.sha256 = t.sha256 WHERE t.status = ? ORDER BY t.sha256", (TagStatus.OK,)
    )
    chosen = (list(rows) if sample is None
              else random.Random(seed).sample(list(rows), min(sample, len(rows))))
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
    add_tasks: bool = False,
) -> PushReport:
    """Create or reuse the project of ``kind`` (``duplicates`` or ``tags``), reconcile its
    tasks with the catalog and import the missing ones. A tag project that has tasks gets a
    new sample only with ``add_tasks``; ``title`` and ``annotators`` default to the project's.
    """
    links = ImageLinks(cat.workdir.images_dir, images, document_root)
    concepts = tag_concepts(cat) if kind == "tags" else []
    title = title or recorded_title(cat, kind, conn.server)
    annotators = annotators or recorded_annotators(cat, conn, kind) or 3
    spec = project_spec(kind, title, concepts, annotators)
    pid = recorded_project(cat, kind, conn.server)
    known = known_tasks(cat, kind, conn.server, pid) if pid is not None else {}
    if kind == "duplicates":
        order = {k: image_order(r) for k, r in known.items()}
        drafts, skipped = duplicate_drafts(cat, links, statuses, order)
        subjects, _ = duplicate_drafts(cat, links, None, order)
        kept = reviewed_group_keys(cat, known)
        why = "its dedup group no longer exists with these images (image_dedup ran again)"
    else:
        drafts, skipped = tag_drafts(cat, links, concepts, sample, seed)
        subjects, _ = tag_drafts(cat, links, concepts, None, seed)
        kept, why = set(), "the image has no ok Gemini tags any more"
    params = {"images": images, "statuses": list(statuses), "sample": sample, "seed": seed,
              "add_tasks": add_tasks}
    if kind == "duplicates" and not drafts and not subjects and pid is None:
        return PushReport(kind, 0, counts=skipped, nothing=_no_groups(cat, statuses))
    return push_drafts(cat, conn, spec, links, drafts, skipped, params, batch_size,
                       subjects={d.key: d for d in [*subjects, *drafts]}, kept=kept,
                       why_gone=why, add_tasks=add_tasks or kind != "tags")


def _no_groups(cat: Catalog, statuses: tuple[str, ...]) -> str:
    by = {r[0]: r[1] for r in cat.query(
        "SELECT status, COUNT(*) FROM dedup_groups GROUP BY status ORDER BY 1")}
    if not by:
        return ("the catalog has no dedup groups: run python -m builder.image_dedup first "
                "(no near-duplicates found is fine too: go on with python -m builder.tagging)")
    have = ", ".join(f"{k} {v}" for k, v in by.items())
    return (f"no group with status {', '.join(statuses)} (groups: {have}); push others with "
            "--group-status STATUS, or go on with python -m builder.tagging")


def reviewed_group_keys(cat: Catalog, known: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Keys of recorded duplicates tasks whose images all lie in one ``reviewed`` group."""
    out = set()
    for key, row in known.items():
        shas = image_order(row)
        if not shas:
            continue
        gids = cat.query(
            "SELECT DISTINCT i.group_id, g.status FROM items i LEFT JOIN dedup_groups g ON"
            " g.group_id = i.group_id WHERE i.sha256 IN (SELECT value FROM json_each(?))",
            (json.dumps(shas),))
        if len(gids) == 1 and gids[0]["status"] == "reviewed":
            out.add(key)
    return out


def push_drafts(
    cat: Catalog, conn: Connection, spec: ProjectSpec, links: ImageLinks,
    drafts: list[TaskDraft], skipped: Counter, params: dict[str, Any], batch_size: int = 100,
    notes: Counter | None = None, *, subjects: Mapping[str, TaskDraft] | None = None,
    kept: set[str] | None = None, why_gone: str = "the catalog no longer asks for it",
    add_tasks: bool = True,
) -> PushReport:
    """Ensure ``spec``'s project, reconcile its tasks with ``subjects`` (default: the drafts),
    then import the drafts whose key it lacks (with ``add_tasks``, or into an empty project).
    Keys are recorded before and after the import (idempotent)."""
    pid = ensure_project(cat, conn, spec)
    params = {"action": "push", "kind": spec.kind, "project_id": pid, "server": conn.server,
              "annotators": spec.annotators, **params}
    with stage_run(cat, "review", params) as rec:
        links.ensure_storage(conn.client, pid)
        on_server = export_tasks(conn.client, pid, all_tasks=True)
        record_tasks(cat, spec.kind, conn.server, pid, on_server)
        have = known_tasks(cat, spec.kind, conn.server, pid)
        found = reconcile(cat, conn.client, spec, have, {int(t["id"]) for t in on_server},
                          subjects if subjects is not None else {d.key: d for d in drafts},
                          kept or set(), why_gone, server_overlaps(conn.client, pid))
        todo = [d for d in drafts if d.key not in have]
        report = PushReport(spec.kind, pid, **found, counts=skipped, notes=notes or Counter())
        if todo and have and not add_tasks:
            report.not_added = len(todo)
            todo = []
        _import(conn, spec, pid, todo, batch_size, report)
        record_tasks(cat, spec.kind, conn.server, pid,
                     export_tasks(conn.client, pid, all_tasks=True))
        rec.counts = {"created": report.created, "unchanged": report.unchanged,
                      "changed": report.changed, "retired": report.retired,
                      "reopened": report.reopened, "not_added": report.not_added,
                      "gone": report.gone, "skipped": dict(report.counts),
                      "notes": dict(report.notes)}
        rec.summary = report.summary()
    return report


def _import(conn: Connection, spec: ProjectSpec, pid: int, todo: list[TaskDraft],
            batch_size: int, report: PushReport) -> None:
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
