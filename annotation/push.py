"""Push review tasks from the catalog to Label Studio (``python -m annotation push``).

* ``duplicates``: one task per dedup group (default: groups with status ``needs_review``) with
  the group's images that wait for review (distinct images, side by side), and the automatic
  stage's proposal (keep the group's kept item, remove the others) as a prediction of the
  project's model version; each image's label names its proposal, so pre-filled marks read as
  the machine's proposal (``pull`` records one submitted unchanged as a confirmed proposal).
* ``tags``: a seeded sample of images with Gemini tags; the tags are the prediction.
* ``queries``: :mod:`annotation.query_review` (one project per locale), through :func:`push_drafts`.

A push reconciles the project with the catalog first (:mod:`annotation.reconcile`: tasks
unchanged, changed in place, retired when their subject is gone, reopened when it returns),
then imports what is missing (a tag project with tasks adds a sample only with
``add_tasks``). Idempotent: each task carries a key (``group:<hash of concept and images>`` /
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
    """What a push did: tasks created, and what it found of the tasks already there
    (:mod:`annotation.reconcile`)."""

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
        if self.nothing:  # no project made: nothing to put in it
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


def _image_rows(cat: Catalog, where: str, params: tuple) -> list[Any]:
    return cat.query(
        "SELECT i.item_id, i.sha256, i.status, i.reason, i.country, i.rank, i.language, im.ext,"
        " im.width,"
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
    ``needs_review``; the copies it linked automatically already carry their decision) and
    those a pull has decided since (reason ``review: ...``), so a pull does not change what a
    group's task is about; when fewer than two, (a group pushed for an audit) every image of
    the group.
    """
    members: dict[str, list[Any]] = {}
    for row in _image_rows(cat, "i.group_id = ? AND i.sha256 IS NOT NULL", (group_id,)):
        members.setdefault(row["sha256"], []).append(row)
    waiting = {s: rows for s, rows in members.items()
               if any(r["status"] == "needs_review" or (r["reason"] or "").startswith("review:")
                      for r in rows)}
    return waiting if len(waiting) >= 2 else members


def duplicate_drafts(
    cat: Catalog, links: ImageLinks, statuses: tuple[str, ...] | None,
    order: Mapping[str, list[str]] | None = None,
) -> tuple[list[TaskDraft], Counter]:
    """One draft per dedup group with the given statuses (None: every group not yet
    ``reviewed``) and at least two images to compare. ``order``: ``{task key: [sha256]}``,
    the order in which an existing task shows its images (kept, so its answers keep their
    meaning)."""
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
    """A seeded sample of ``sample`` images with ``ok`` Gemini tags (same seed, same sample;
    None: every such image)."""
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
    """Create or reuse the project of ``kind`` (``duplicates`` or ``tags``; the query-term
    review is :func:`annotation.query_review.push_queries`), reconcile its tasks with the catalog
    and import the tasks it does not hold yet.

    Duplicates: the subjects are the groups not yet ``reviewed`` (tasks of reviewed groups
    stay as they are); new groups with ``statuses`` are created. Tags: the subjects are the
    images with ``ok`` tags; the seeded sample is created in a project without tasks, and
    added to one that has tasks only with ``add_tasks`` (another ``--seed`` or a larger
    ``--sample`` never adds tasks silently). ``title`` and ``annotators`` (annotations per
    task) default to the existing project's, else to the kind's default title and 3.
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
    """Why no duplicates task was made, and the next step."""
    by = {r[0]: r[1] for r in cat.query(
        "SELECT status, COUNT(*) FROM dedup_groups GROUP BY status ORDER BY 1")}
    if not by:
        return ("the catalog has no dedup groups: run python -m builder.image_dedup first "
                "(no near-duplicates found is fine too: go on with python -m builder.tagging)")
    have = ", ".join(f"{k} {v}" for k, v in by.items())
    return (f"no group with status {', '.join(statuses)} (groups: {have}); push others with "
            "--group-status STATUS, or go on with python -m builder.tagging")


def reviewed_group_keys(cat: Catalog, known: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Keys of recorded duplicates tasks whose images all lie in one group that is
    ``reviewed`` now (decided; ``image_dedup`` leaves such groups alone)."""
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
    """Ensure the project of ``spec``, reconcile its recorded tasks with ``subjects``
    (default: the drafts; :func:`annotation.reconcile.reconcile`), then import the drafts
    whose key it does not hold yet (with ``add_tasks``, or into a project without tasks).

    The project's tasks are read back before and after the import and every key is recorded
    (``ls_tasks``), so an interrupted or repeated push never creates a second task per key.
    """
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
        report = PushReport(spec.kind, pid, unchanged=found["unchanged"],
                            changed=found["changed"], retired=found["retired"],
                            reopened=found["reopened"], gone=found["gone from the server"],
                            counts=skipped, notes=notes or Counter())
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
