"""Which answers count, and which use up a task's quorum (pull and status alike).

Every annotation is stored (:mod:`annotation.reviews`); what it is worth is decided here,
per annotation:

* ``counted``: a complete, consistent answer saved by its author (and, in the query-term
  review, by a reviewer assigned to the locale): it is a vote and uses up one of the task's
  answers;
* ``saved by another account``: its last editor is not its author (Label Studio's community
  edition lets any member change any annotation). Not counted at all; named (task, author,
  editor) in ``pull`` and ``status``. The author re-saving it makes it count again;
* ``half answer`` (duplicates: an image with neither keep nor remove) and ``invalid``:
  not counted at all, named;
* ``contradiction`` / ``incomplete`` (the answer says two things, or a better term with none
  typed): kept as today (the unit goes to ``needs_review``), but it does not use up an answer;
* ``not assigned`` (query terms): stored, not counted (:mod:`annotation.terms`), does not use
  up an answer; ``skipped``: Label Studio does not count a skip either.

Quorum: a task collects the project's ``maximum_annotations`` answers (Label Studio stops
handing it out once that many distinct accounts answered: ``is_labeled``). So that only
counted answers use it up, a pull sets each live task's ``overlap`` to the quorum plus the
number of accounts whose answer does not count there; Label Studio then hands the task out
again until enough answers count (a retired task has overlap 0).
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
    """``{task id: (accounts with an answer Label Studio counts, accounts whose answer
    counts here)}``: Label Studio counts every account's answer that is not a skip."""
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
    """``{task id: overlap}``: the quorum plus the accounts whose answer there does not count
    (so the task is handed out until ``quorum`` answers count)."""
    counts = task_counts(states)
    return {tid: quorum + len(counts.get(tid, (set(), set()))[0] - counts.get(
        tid, (set(), set()))[1]) for tid in live}


def server_overlaps(client: Any, pid: int) -> dict[int, tuple[int | None, bool | None]]:
    """``{task id: (overlap, is_labeled)}`` as the server holds them now (the export leaves
    both out; someone may have changed the project's settings since the last pull)."""
    out: dict[int, tuple[int | None, bool | None]] = {}
    for t in client.tasks.list(project=pid, fields="task_only", page_size=500):
        out[int(t.id)] = (getattr(t, "overlap", None), getattr(t, "is_labeled", None))
    return out


def sync_overlaps(cat: Catalog, client: Any, key: str, server: str, pid: int,
                  targets: Mapping[int, int], quorum: int,
                  states: Iterable[AnswerState] = ()) -> int:
    """Set the overlap of each task whose target differs from what it has (on the server;
    where it does not say, as recorded, else the quorum), with ``is_labeled`` as Label
    Studio would compute it from the answering accounts (it does not recompute it when only
    the overlap changes); returns the number of tasks changed."""
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
    """Per annotator done / remaining, and the stuck tasks with why, over the live tasks.

    Done: live tasks where the person's answer counts. Remaining: live tasks still short of
    ``quorum`` counted answers that the person has not answered. Stuck: a task Label Studio
    counts as full (as many answering accounts as its overlap) while fewer than ``quorum``
    answers count: nobody is handed it until a pull raises its overlap.
    """
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
