"""Which answers count, and which use up a task's quorum (pull and status alike).

Each annotation gets a state: ``counted`` (complete, consistent, saved by its author and, for
query terms, an assigned reviewer) or why not (saved by another account, half answer, invalid,
contradiction, incomplete, not assigned, skipped). A pull sets each live task's ``overlap`` to
the quorum plus the accounts whose answer does not count there, so Label Studio hands it out
until enough answers count (docs/annotation.md, "Which answers count").
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from annotation.reviews import ReviewRow
from builder.catalog import Catalog

log = logging.getLogger(__name__)

COUNTED = "counted"
EDITED = "saved by another account"
HALF = "half answer (an image with neither keep nor remove)"
#: states whose rows the decisions see (a contradiction blocks its unit: needs_review)
DECIDING = (COUNTED, "contradiction", "incomplete", "invalid answer")


@dataclass(frozen=True)
class AnswerState:
    task_id: int
    annotation_id: int
    annotator: str
    state: str
    editor: str | None = None


def answer_state(kind: str, rows: list[ReviewRow], assigned: Collection[str] | None) -> str:
    """The worth of one annotation (its rows) under the module's rules."""
    first = rows[0]
    decisions = {r.decision for r in rows}
    if first.editor is not None:
        return EDITED
    if decisions == {"skipped"}:
        return "skipped"
    if kind == "queries" and assigned is not None and first.annotator.casefold() not in {
            a.casefold() for a in assigned}:
        return "not assigned"
    if "contradiction" in decisions:
        return "contradiction"
    if kind == "duplicates" and decisions & {"unanswered", "invalid"}:
        return HALF
    if kind == "queries" and decisions & {"incomplete", "unanswered"}:
        return "incomplete"
    if "invalid" in decisions:
        return "invalid answer"
    return COUNTED


def answer_states(kind: str, rows: Iterable[ReviewRow],
                  assigned: Collection[str] | None = None) -> list[AnswerState]:
    """One :class:`AnswerState` per annotation of ``rows`` (task, then annotation order)."""
    by_ann: dict[int, list[ReviewRow]] = {}
    for r in rows:
        by_ann.setdefault(r.annotation_id, []).append(r)
    out = [AnswerState(rs[0].task_id, ann, rs[0].annotator, answer_state(kind, rs, assigned),
                       rs[0].editor) for ann, rs in by_ann.items()]
    return sorted(out, key=lambda s: (s.task_id, s.annotation_id))


def deciding_rows(kind: str, rows: list[ReviewRow]) -> list[ReviewRow]:
    """The rows the decisions see: not those saved by another account, not half answers."""
    keep = {s.annotation_id for s in answer_states(kind, rows) if s.state in DECIDING
            or s.state in ("skipped", "not assigned")}
    return [r for r in rows if r.annotation_id in keep]


def not_counted(states: Iterable[AnswerState]) -> list[dict[str, Any]]:
    """The answers that do not count, named: task, author, why (and the editor)."""
    return [{"task": s.task_id, "author": s.annotator, "why": s.state,
             **({"editor": s.editor} if s.editor else {})}
            for s in states if s.state not in (COUNTED, "skipped")]


def task_counts(states: Iterable[AnswerState]) -> dict[int, tuple[set[str], set[str]]]:
    """``{task id: (accounts Label Studio counts (all but skips), accounts counted here)}``."""
    out: dict[int, tuple[set[str], set[str]]] = {}
    for s in states:
        ls, ours = out.setdefault(s.task_id, (set(), set()))
        if s.state != "skipped":
            ls.add(s.annotator)
        if s.state == COUNTED:
            ours.add(s.annotator)
    return out


def target_overlaps(live: Collection[int], states: Iterable[AnswerState], quorum: int
                    ) -> dict[int, int]:
    """``{task id: overlap}``: the quorum plus the accounts whose answer there does not count."""
    counts = task_counts(states)
    return {tid: quorum + len(counts.get(tid, (set(), set()))[0] - counts.get(
        tid, (set(), set()))[1]) for tid in live}


def server_overlaps(client: Any, pid: int) -> dict[int, tuple[int | None, bool | None]]:
    """``{task id: (overlap, is_labeled)}`` as the server holds them now (the export lacks both)."""
    return {int(t.id): (getattr(t, "overlap", None), getattr(t, "is_labeled", None))
            for t in client.tasks.list(project=pid, fields="task_only", page_size=500)}


def sync_overlaps(cat: Catalog, client: Any, key: str, server: str, pid: int,
                  targets: Mapping[int, int], quorum: int,
                  states: Iterable[AnswerState] = ()) -> int:
    """Set each task's overlap where it differs from ``targets``, with ``is_labeled`` as Label
    Studio would compute it (it does not when only the overlap changes); returns how many."""
    answered = {t: len(ls) for t, (ls, _) in task_counts(states).items()}
    recorded = {int(r["task_id"]): r["overlap"] for r in cat.query(
        "SELECT task_id, overlap FROM ls_tasks WHERE kind=? AND server=? AND project_id=?",
        (key, server, pid))}
    live = server_overlaps(client, pid)
    changed = 0
    for tid, want in sorted(targets.items()):
        have, labeled = live.get(tid, (None, None))
        if have is None:
            have = recorded.get(tid)
            have = have if have is not None else quorum
        if have == want and labeled in (None, answered.get(tid, 0) >= want):
            continue
        client.tasks.update(str(tid), overlap=want, is_labeled=answered.get(tid, 0) >= want)
        with cat.tx() as con:
            con.execute("UPDATE ls_tasks SET overlap=? WHERE kind=? AND server=? AND"
                        " project_id=? AND task_id=?",
                        (None if want == quorum else want, key, server, pid, tid))
        log.info("task %d: overlap %d (answers that do not count leave it open)", tid, want)
        changed += 1
    return changed


def progress(live: Collection[int], states: list[AnswerState], quorum: int,
             overlaps: Mapping[int, int | None], people: Iterable[str]) -> dict[str, Any]:
    """Per annotator done / remaining, and the stuck tasks with why, over the live tasks."""
    counts = task_counts(s for s in states if s.task_id in live)
    open_tasks = {t for t in live if len(counts.get(t, (set(), set()))[1]) < quorum}
    answered: dict[str, set[int]] = {}
    for s in states:
        if s.task_id in live and s.state != "skipped":
            answered.setdefault(s.annotator, set()).add(s.task_id)
    per: dict[str, dict[str, int]] = {}
    for who in sorted(set(people) | set(answered)):
        done = sum(1 for t in live if who in counts.get(t, (set(), set()))[1])
        per[who] = {"done": done, "remaining": len(open_tasks - answered.get(who, set()))}
    stuck = []
    for t in sorted(open_tasks):
        ls, ours = counts.get(t, (set(), set()))
        overlap = overlaps.get(t)
        if len(ls) >= (overlap if overlap is not None else quorum):
            why = sorted(f"{s.annotator}: {s.state}" + (f" by {s.editor}" if s.editor else "")
                         for s in states if s.task_id == t and s.state not in (COUNTED, "skipped"))
            stuck.append({"task": t, "counted": len(ours), "answered": len(ls), "why": why})
    return {"per_annotator": per, "stuck": stuck, "open_tasks": len(open_tasks)}
