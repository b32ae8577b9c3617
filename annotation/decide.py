"""Decisions of the duplicate review and the tag check from the stored answers.

Duplicates: each shown image by strict majority of its annotators' latest votes (confirmed
proposals count and are named); a tie, too few votes or a self-contradicting answer leave it
``needs_review``; a group whose shown images are all decided becomes ``reviewed``. Only rows
that change are written. Tags: the strict-majority concept set per image, Gemini scored
against it (docs/annotation.md, "pull").
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from annotation.agreement import KEEP, NEEDS_REVIEW, REMOVE, Decision, agreement, majority
from annotation.agreement import tag_precision_recall as score_tags
from annotation.reviews import ReviewRow
from builder.catalog import Catalog
from builder.statuses import DedupStatus, ItemStatus
from core.provenance import utcnow

VOTE = {"keep": KEEP, "none_duplicates": KEEP, "confirmed_keep": KEEP,
        "remove": REMOVE, "confirmed_remove": REMOVE}
ITEM_STATUS = {KEEP: ItemStatus.KEPT, REMOVE: ItemStatus.REMOVED,
               NEEDS_REVIEW: ItemStatus.NEEDS_REVIEW}
CONTRADICTION = "contradiction"


def latest_decisions(rows: Iterable[ReviewRow]) -> dict[tuple[int, str], dict[str, str]]:
    """``{(task_id, sha256): {annotator: decision}}``, the latest of each (rows oldest first)."""
    out: dict[tuple[int, str], dict[str, str]] = {}
    for r in rows:
        if r.sha256:
            out.setdefault((r.task_id, r.sha256), {})[r.annotator] = r.decision
    return out


def image_decision(decisions: Mapping[str, str], required: int) -> Decision:
    """One image's outcome from its annotators' latest decisions."""
    votes = [VOTE[d] for d in decisions.values() if d in VOTE]
    n_keep = votes.count(KEEP)
    d = majority(n_keep, len(votes) - n_keep, required)
    tally = f"keep {d.n_keep}, remove {d.n_remove}"
    contradicted = sorted(a for a, x in decisions.items() if x == CONTRADICTION)
    if contradicted:
        return Decision(NEEDS_REVIEW, d.n_keep, d.n_remove,
                        f"contradictory answer by {', '.join(contradicted)} ('None of these are"
                        f" duplicates' ticked while an image is marked remove; {tally})")
    confirmed = sum(1 for x in decisions.values() if x.startswith("confirmed_"))
    if confirmed:
        return Decision(d.outcome, d.n_keep, d.n_remove,
                        d.reason[:-1] + f"; {confirmed} confirmed the proposal unchanged)")
    return d


def answered(decisions: Mapping[str, str]) -> bool:
    """Whether an image has an answer that decides or blocks it (a vote or a contradiction)."""
    return any(d in VOTE or d == CONTRADICTION for d in decisions.values())


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
    latest = latest_decisions(rows)
    voted = [per for per in latest.values() if answered(per)]
    tally = Counter(image_decision(per, required).outcome for per in voted)
    votes = {key: {a: VOTE[d] for a, d in per.items() if d in VOTE} for key, per in latest.items()}
    return {
        "images_with_votes": len(voted),
        "decisions": dict(sorted(tally.items())),
        "agreement": agreement({k: v for k, v in votes.items() if v}, required, [KEEP, REMOVE]),
        "annotators": annotator_counts(rows),
    }


def _set_group(con: Any, gid: int, outcomes: list[str | None]) -> tuple[str, int]:
    """``reviewed`` (and a kept item that survived) once every shown image is decided."""
    if any(o in (None, NEEDS_REVIEW) for o in outcomes):
        cur = con.execute("UPDATE dedup_groups SET status=:s WHERE group_id=:g AND status IS NOT"
                          " :s", {"s": DedupStatus.NEEDS_REVIEW, "g": gid})
        return "groups set needs_review", cur.rowcount
    kept_ids = [r[0] for r in con.execute(
        "SELECT item_id FROM items WHERE group_id=? AND status=? ORDER BY item_id",
        (gid, ItemStatus.KEPT))]
    old = con.execute("SELECT kept_item_id FROM dedup_groups WHERE group_id=?", (gid,)).fetchone()
    kept = old[0] if old and old[0] in kept_ids else (kept_ids[0] if kept_ids else None)
    cur = con.execute(
        "UPDATE dedup_groups SET status=:s, kept_item_id=:k WHERE group_id=:g AND"
        " (status IS NOT :s OR kept_item_id IS NOT :k)",
        {"s": DedupStatus.REVIEWED, "k": kept, "g": gid})
    return "groups set reviewed", cur.rowcount


def image_votes(rows: Iterable[ReviewRow]) -> dict[str, dict[str, str]]:
    """``{sha256: {annotator: decision}}`` over every task that showed an image: the latest (time,
    then annotation id) answer that decides or blocks, else the latest other one."""
    best: dict[tuple[str, str], tuple[tuple[bool, str, int], str]] = {}
    for r in rows:
        if not r.sha256:
            continue
        rank = (r.decision in VOTE or r.decision == CONTRADICTION, r.annotated_at or "",
                r.annotation_id)
        key = (r.sha256, r.annotator)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, r.decision)
    out: dict[str, dict[str, str]] = {}
    for (sha, annotator), (_, decision) in sorted(best.items()):
        out.setdefault(sha, {})[annotator] = decision
    return out


def apply_duplicate_decisions(
    cat: Catalog, task_rows: Iterable[dict[str, Any]],
    votes: Mapping[str, Mapping[str, str]], required: int,
) -> Counter:
    """Write the decisions of the voted images (``votes``: :func:`image_votes`) to the items
    the tasks showed (by item id) and to the groups those items belong to now. An image whose
    answers were all withdrawn goes back to ``needs_review``."""
    shown: dict[str, set[int]] = {}
    for t in task_rows:
        for img in json.loads(t["data_json"])["images"]:
            shown.setdefault(img["sha256"], set()).update(int(i) for i in img["item_ids"])
    counts: Counter = Counter()
    now = utcnow()
    by_group: dict[int, list[str | None]] = {}
    with cat.tx() as con:
        for sha in sorted(shown):
            per = votes.get(sha) or {}
            v = answered(per)
            d = image_decision(per, required)
            status, reason = ITEM_STATUS[d.outcome], f"review: {d.reason}"
            ids = json.dumps(sorted(shown[sha]))
            # no vote now: only an earlier review decision is taken back
            only_reviewed = "" if v else " AND reason LIKE 'review:%'"
            cur = con.execute(
                "UPDATE items SET status=?, reason=?, updated_at=? WHERE item_id IN"
                " (SELECT value FROM json_each(?)) AND (status IS NOT ? OR reason IS NOT ?)"
                + only_reviewed, (status, reason, now, ids, status, reason))
            counts[f"items set {status}"] += cur.rowcount
            outcome = d.outcome if v or cur.rowcount else None
            gids = [r[0] for r in con.execute(
                "SELECT DISTINCT group_id FROM items WHERE item_id IN (SELECT value FROM"
                " json_each(?)) AND group_id IS NOT NULL", (ids,))]
            for gid in gids:
                by_group.setdefault(int(gid), []).append(outcome)
        for gid, outcomes in sorted(by_group.items()):
            if all(o is None for o in outcomes):
                continue
            counts["groups with votes"] += 1
            key, n = _set_group(con, gid, outcomes)
            counts[key] += n
    return counts


def tag_votes(rows: Iterable[ReviewRow]) -> dict[str, dict[str, list[str]]]:
    """``{sha256: {annotator: [concepts]}}`` of the answered (not skipped) tag checks."""
    out: dict[str, dict[str, list[str]]] = {}
    for r in sorted(rows, key=lambda r: (r.annotated_at or "", r.annotation_id)):
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


