"""Pull annotations back (``python -m annotation pull``): store, decide, apply, measure.

Duplicates: every annotation of every annotator is stored (:mod:`annotation.reviews`); each
image of a group is decided by strict majority of the current votes (``keep`` and "none of
these are duplicates" count as keep); a tie or fewer votes than ``--min-annotators`` leave it
``needs_review``. Decisions go to ``items.status`` of the items the task showed (``kept`` /
``removed`` / ``needs_review``, reason ``review: ...``) and their group becomes ``reviewed``
(which ``image_dedup`` then leaves alone) once every shown image is decided. Images nobody
has voted on yet are left as they are; an image whose annotations were all withdrawn goes back
to ``needs_review``. Only rows whose status or reason changes are
written, so pulling again with no new annotations changes nothing. Agreement: Krippendorff's
alpha and Fleiss' kappa over the images with exactly ``--min-annotators`` votes.

Tags: the people's answer per image is the set of concepts a strict majority of its
annotators ticked (images with fewer than ``--min-annotators`` answers wait); Gemini's tags
are scored against it (micro precision / recall), overall and per annotator.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from annotation.agreement import KEEP, NEEDS_REVIEW, REMOVE, agreement, majority
from annotation.agreement import tag_precision_recall as score_tags
from annotation.client import Connection, export_tasks, user_names
from annotation.projects import known_tasks, require_project
from annotation.reviews import ReviewRow, current_rows, parse_export, store_reviews
from benchmark.files import atomic_write_text
from builder.catalog import Catalog, utcnow
from builder.stagekit import stage_run

log = logging.getLogger(__name__)

VOTE = {"keep": KEEP, "none_duplicates": KEEP, "remove": REMOVE}
ITEM_STATUS = {KEEP: "kept", REMOVE: "removed", NEEDS_REVIEW: "needs_review"}


def duplicate_votes(rows: Iterable[ReviewRow]) -> dict[tuple[int, str], dict[str, str]]:
    """``{(task_id, sha256): {annotator: keep|remove}}``; an annotator's latest answer counts."""
    votes: dict[tuple[int, str], dict[str, str]] = {}
    for r in rows:
        v = VOTE.get(r.decision)
        if v is not None and r.sha256:
            votes.setdefault((r.task_id, r.sha256), {})[r.annotator] = v
    return votes


def annotator_counts(rows: Iterable[ReviewRow]) -> dict[str, dict[str, int]]:
    """Per annotator: the number of annotations and of decisions by value."""
    out: dict[str, Counter] = {}
    anns: dict[str, set[int]] = {}
    for r in rows:
        c = out.setdefault(r.annotator, Counter())
        c["answered" if r.decision.startswith("[") else r.decision] += 1
        anns.setdefault(r.annotator, set()).add(r.annotation_id)
    return {a: {"annotations": len(anns[a]), **dict(sorted(c.items()))} for a, c in sorted(out.items())}


def duplicate_summary(rows: list[ReviewRow], required: int) -> dict[str, Any]:
    """Decision tallies, agreement and per-annotator counts of the current rows."""
    votes = duplicate_votes(rows)
    tally = Counter()
    for v in votes.values():
        n_keep = sum(1 for x in v.values() if x == KEEP)
        tally[majority(n_keep, len(v) - n_keep, required).outcome] += 1
    return {
        "images_with_votes": len(votes),
        "decisions": dict(sorted(tally.items())),
        "agreement": agreement(votes, required, [KEEP, REMOVE]),
        "annotators": annotator_counts(rows),
    }


def _set_group(con: Any, gid: int, outcomes: list[str | None]) -> tuple[str, int]:
    """``reviewed`` (and a kept item that survived) once every shown image is decided."""
    if any(o in (None, NEEDS_REVIEW) for o in outcomes):
        cur = con.execute("UPDATE dedup_groups SET status='needs_review' WHERE group_id=? AND"
                          " status IS NOT 'needs_review'", (gid,))
        return "groups set needs_review", cur.rowcount
    kept_ids = [r[0] for r in con.execute(
        "SELECT item_id FROM items WHERE group_id=? AND status='kept' ORDER BY item_id", (gid,))]
    old = con.execute("SELECT kept_item_id FROM dedup_groups WHERE group_id=?", (gid,)).fetchone()
    kept = old[0] if old and old[0] in kept_ids else (kept_ids[0] if kept_ids else None)
    cur = con.execute(
        "UPDATE dedup_groups SET status='reviewed', kept_item_id=? WHERE group_id=? AND"
        " (status IS NOT 'reviewed' OR kept_item_id IS NOT ?)", (kept, gid, kept))
    return "groups set reviewed", cur.rowcount


def apply_duplicate_decisions(
    cat: Catalog, task_rows: Iterable[dict[str, Any]], votes: dict, required: int
) -> Counter:
    """Write the decisions of the voted images to ``items`` and ``dedup_groups``.

    The items are those the task showed (by item id, so a later re-run of ``image_dedup`` that
    renumbered the group does not matter); the group is the one those items belong to now.
    An image whose annotations were all withdrawn goes back to ``needs_review``.
    """
    counts: Counter = Counter()
    now = utcnow()
    with cat.tx() as con:
        for t in task_rows:
            images = json.loads(t["data_json"])["images"]
            outcomes: list[str | None] = []
            for img in images:
                v = votes.get((t["task_id"], img["sha256"])) or {}
                n_keep = sum(1 for x in v.values() if x == KEEP)
                d = majority(n_keep, len(v) - n_keep, required)
                status, reason = ITEM_STATUS[d.outcome], f"review: {d.reason}"
                ids = json.dumps([int(i) for i in img["item_ids"]])
                # no vote now: only an earlier review decision (all annotations withdrawn) is
                # taken back; images nobody ever voted on are not touched
                only_reviewed = "" if v else " AND reason LIKE 'review:%'"
                cur = con.execute(
                    "UPDATE items SET status=?, reason=?, updated_at=? WHERE item_id IN"
                    " (SELECT value FROM json_each(?)) AND (status IS NOT ? OR reason IS NOT ?)"
                    + only_reviewed, (status, reason, now, ids, status, reason))
                counts[f"items set {status}"] += cur.rowcount
                outcomes.append(d.outcome if v or cur.rowcount else None)
            if all(o is None for o in outcomes):
                continue
            counts["groups with votes"] += 1
            all_ids = json.dumps([int(i) for img in images for i in img["item_ids"]])
            gids = [r[0] for r in con.execute(
                "SELECT DISTINCT group_id FROM items WHERE item_id IN (SELECT value FROM"
                " json_each(?)) AND group_id IS NOT NULL", (all_ids,))]
            for gid in gids:
                key, n = _set_group(con, gid, outcomes)
                counts[key] += n
    return counts


def tag_votes(rows: Iterable[ReviewRow]) -> dict[str, dict[str, list[str]]]:
    """``{sha256: {annotator: [concepts]}}`` of the answered (not skipped) tag checks."""
    out: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        if r.decision.startswith("[") and r.sha256:
            out.setdefault(r.sha256, {})[r.annotator] = json.loads(r.decision)
    return out


def tag_summary(cat: Catalog, rows: list[ReviewRow], required: int) -> dict[str, Any]:
    """Gemini tags scored against the people's majority sets, overall and per annotator."""
    votes = tag_votes(rows)
    gemini: dict[str, list[str]] = {}
    for sha in votes:
        row = cat.query("SELECT tags_json FROM tags WHERE sha256=?", (sha,))
        gemini[sha] = json.loads(row[0]["tags_json"] or "[]") if row else []
    people: dict[str, list[str]] = {}
    for sha, answers in votes.items():
        if len(answers) < required:
            continue
        count = Counter(c for cs in answers.values() for c in set(cs))
        people[sha] = sorted(c for c, n in count.items() if 2 * n > len(answers))
    per_annotator: dict[str, Any] = {}
    for a in sorted({a for v in votes.values() for a in v}):
        mine = {sha: v[a] for sha, v in votes.items() if a in v}
        per_annotator[a] = score_tags(gemini, mine)
    unanimous = sum(1 for sha in people if len({tuple(sorted(x)) for x in votes[sha].values()}) == 1)
    return {
        "images_with_answers": len(votes),
        "images_decided": len(people),
        "gemini_vs_people": score_tags(gemini, people),
        "unanimous_share": unanimous / len(people) if people else None,
        "per_annotator": per_annotator,
        "annotators": annotator_counts(rows),
    }


def pull(cat: Catalog, conn: Connection, kind: str, min_annotators: int = 3) -> dict[str, Any]:
    """Export every annotation of the ``kind`` project, store, decide, apply; return a report."""
    pid = require_project(cat, kind, conn.server)
    params = {"action": "pull", "kind": kind, "project_id": pid, "server": conn.server,
              "min_annotators": min_annotators}
    with stage_run(cat, "review", params) as rec:
        tasks = export_tasks(conn.client, pid)
        task_rows = known_tasks(cat, kind, conn.server, pid).values()
        task_map = {int(t["task_id"]): t for t in task_rows}
        rows, parse_counts = parse_export(kind, tasks, task_map, user_names(conn.client))
        stored = store_reviews(cat, kind, pid, rows, rec.run_id)
        current = current_rows(cat, kind, pid)
        report: dict[str, Any] = {
            "kind": kind, "project_id": pid, "server": conn.server,
            "min_annotators": min_annotators, "tasks_pushed": len(task_map),
            "export": dict(parse_counts), "stored": dict(stored),
        }
        if kind == "duplicates":
            applied = apply_duplicate_decisions(
                cat, task_rows, duplicate_votes(current), min_annotators)
            report["applied"] = dict(sorted(applied.items()))
            report.update(duplicate_summary(current, min_annotators))
        else:
            report.update(tag_summary(cat, current, min_annotators))
        rec.counts, rec.summary = report, format_report(report)
    out = cat.workdir.exports_dir / "annotation" / f"{kind}_pull.json"
    atomic_write_text(out, json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False,
                                      allow_nan=False) + "\n")
    return report


def fmt_num(x: Any) -> str:
    """A statistic for people: three decimals, or n/a when undefined."""
    return "n/a" if x is None else f"{x:.3f}"


def format_report(report: dict[str, Any]) -> str:
    """One screen of text for the CLI and the stage-run record."""
    lines = [f"{report['kind']} project {report['project_id']} ({report['server']}): "
             f"{report['tasks_pushed']} tasks pushed"]
    if "stored" in report:
        lines.append("annotations: " + ", ".join(f"{k} {v}" for k, v in sorted(
            report["stored"].items())) if report["stored"] else "annotations: none")
    if "agreement" in report:
        ag = report["agreement"]
        lines.append("decisions per image: " + ", ".join(
            f"{k} {v}" for k, v in report["decisions"].items()))
        lines.append(f"agreement over {ag['n_units']} images with {ag['n_raters']} votes: "
                     f"Krippendorff alpha {fmt_num(ag['krippendorff_alpha'])}, "
                     f"Fleiss kappa {fmt_num(ag['fleiss_kappa'])}")
    if "gemini_vs_people" in report:
        s = report["gemini_vs_people"]
        lines.append(f"Gemini tags vs people on {s['n_units']} images: precision "
                     f"{fmt_num(s['precision'])}, recall {fmt_num(s['recall'])}, F1 {fmt_num(s['f1'])}")
    for a, c in report.get("annotators", {}).items():
        lines.append(f"  {a}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    return "\n".join(lines)
