"""Decide the query-term review and write it back (``python -m annotation pull --kind queries``).

Only answers of reviewers assigned to the task's locale count, each reviewer's latest once.
Outcomes: ``needs_review`` (a counted answer contradicts itself or is incomplete), ``pending``
(too few answers or no strict majority), else ``accepted`` / ``corrected`` / ``unclear``.
Accepted and corrected terms go to ``query_terms`` while the row still holds the term asked
about (else ``stale``); every outcome is kept in ``term_reviews`` (docs/annotation.md).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation.agreement import krippendorff_alpha
from annotation.reviews import ReviewRow, normalize_term
from builder.catalog import Catalog
from builder.query_terms import catalog_terms
from builder.statuses import TermOutcome
from core import query_table

FLAGGED = ("contradiction", "incomplete", "invalid")
APPLIED = (TermOutcome.ACCEPTED, TermOutcome.CORRECTED)


@dataclass(frozen=True)
class Answer:
    decision: str
    answer: str | None
    annotated_at: str | None

    @property
    def category(self) -> str | None:
        """The vote for agreement and majority: correct / unclear / term:<casefolded term>."""
        if self.decision == "better_term" and self.answer:
            return "term:" + normalize_term(self.answer).casefold()
        return self.decision if self.decision in ("correct", "unclear") else None


@dataclass
class TermDecision:
    outcome: str
    reason: str
    term: str | None = None
    reviewers: int = 0
    decided_at: str | None = None
    votes: dict[str, str] = field(default_factory=dict)


def latest_answers(
    rows: Iterable[ReviewRow], assigned: Iterable[str]
) -> tuple[dict[int, dict[str, Answer]], Counter]:
    """``{task_id: {reviewer: latest answer}}`` of the assigned reviewers, and the number of
    annotations per reviewer that are stored but not counted (not assigned to the locale)."""
    allowed = {a.casefold() for a in assigned}  # e-mail addresses: case does not matter
    out: dict[int, dict[str, Answer]] = {}
    uncounted: Counter = Counter()
    # the latest answer wins (by time, then annotation id, whatever the rows' order)
    for r in sorted(rows, key=lambda r: (r.annotated_at or "", r.annotation_id)):
        if r.annotator.casefold() not in allowed:
            uncounted[r.annotator] += 1
            continue
        out.setdefault(r.task_id, {})[r.annotator] = Answer(r.decision, r.answer, r.annotated_at)
    return out, uncounted


def _tally(votes: Mapping[str, str]) -> str:
    c = Counter(v.removeprefix("term:") for v in votes.values())
    return ", ".join(f"{k} {n}" for k, n in sorted(c.items()))


def decide_terms(task_rows: Iterable[Mapping[str, Any]],
                 answers: Mapping[int, Mapping[str, Answer]], required: int
                 ) -> dict[int, TermDecision]:
    """``{task id: decision}`` of query-term tasks from their counted answers."""
    return {int(t["task_id"]): decide_term(answers.get(int(t["task_id"]), {}),
                                           json.loads(t["data_json"])["proposed"], required)
            for t in task_rows}


def decide_term(answers: Mapping[str, Answer], proposed: str, required: int) -> TermDecision:
    """The outcome of one task from its counted answers (see the module docstring)."""
    flagged = {a: x for a, x in answers.items() if x.decision in FLAGGED}
    if flagged:
        who = "; ".join(f"{a}: {x.decision}" + (f" ({x.answer})" if x.answer else "")
                        for a, x in sorted(flagged.items()))
        return TermDecision(TermOutcome.NEEDS_REVIEW, f"review: an answer is not usable ({who})")
    votes = {a: x.category for a, x in answers.items() if x.category}
    n = len(votes)
    if n < required:
        return TermDecision(TermOutcome.PENDING, f"review: {n}/{required} reviewers ({_tally(votes)})",
                            votes=dict(votes))
    (top, count), = Counter(votes.values()).most_common(1)
    if 2 * count <= n:
        return TermDecision(TermOutcome.PENDING, f"review: no majority of {n} ({_tally(votes)})",
                            votes=dict(votes))
    winners = sorted((answers[a] for a, v in votes.items() if v == top),
                     key=lambda x: x.annotated_at or "")
    decided_at = winners[-1].annotated_at
    reason = f"review: majority of {n} ({_tally(votes)})"
    base = dict(reviewers=count, decided_at=decided_at, votes=dict(votes))
    if top == "correct":
        return TermDecision(TermOutcome.ACCEPTED, reason, term=proposed, **base)
    if top == "unclear":
        return TermDecision(TermOutcome.UNCLEAR, reason, **base)
    order = [normalize_term(x.answer or "") for x in winners]  # the most frequent spelling,
    best = max(order, key=lambda s: (order.count(s), -order.index(s)))  # the earliest on ties
    return TermDecision(TermOutcome.CORRECTED, reason, term=best, **base)


def _restore(con: Any, data: Mapping[str, Any], run_id: int | None) -> int:
    """Put the pushed term back (a decision that was applied no longer stands)."""
    return con.execute(
        "UPDATE query_terms SET native_term=?, source=?, reviewers=0, reviewed_at=NULL, note=?,"
        " run_id=? WHERE concept=? AND country=?",
        (data["proposed"], data.get("proposed_source") or "generated", data.get("proposed_note"),
         run_id, data["concept"], data["country"])).rowcount


def _write(con: Any, data: Mapping[str, Any], d: TermDecision, run_id: int | None) -> int:
    note = (f"review: corrected from '{data['proposed']}' by {d.reviewers} native speakers"
            f" ({data['locale']})" if d.outcome == "corrected" else data.get("proposed_note"))
    return con.execute(
        "UPDATE query_terms SET native_term=:t, source=:src, reviewers=:n, reviewed_at=:at,"
        " note=:note, run_id=:run WHERE concept=:c AND country=:k AND NOT (native_term IS :t"
        " AND source=:src AND reviewers IS :n AND reviewed_at IS :at AND note IS :note)",
        {"t": d.term, "src": query_table.REVIEWED, "n": d.reviewers, "at": d.decided_at,
         "note": note, "run": run_id, "c": data["concept"], "k": data["country"]}).rowcount


def record_term_review(con: sqlite3.Connection, project_id: int, task_id: int,
                       data: Mapping[str, Any], d: TermDecision, applied: bool | int,
                       run_id: int | None = None) -> None:
    """Record one task's decision ``d`` in ``term_reviews``."""
    con.execute(
        "INSERT OR REPLACE INTO term_reviews (project_id, task_id, concept, country, locale,"
        " proposed, outcome, term, reviewers, votes_json, reason, applied, decided_at, run_id)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (project_id, task_id, data["concept"], data["country"], data["locale"], data["proposed"],
         d.outcome, d.term, d.reviewers, json.dumps(d.votes, sort_keys=True, ensure_ascii=False),
         d.reason, int(applied), d.decided_at, run_id))


def apply_term_decisions(
    cat: Catalog, pid: int, task_rows: Iterable[Mapping[str, Any]],
    decisions: Mapping[int, TermDecision], run_id: int | None,
) -> Counter:
    """Write the decisions to ``query_terms`` and ``term_reviews`` (only what changes)."""
    counts: Counter = Counter()
    with cat.tx() as con:
        for t in task_rows:
            tid, data = int(t["task_id"]), json.loads(t["data_json"])
            d = decisions[tid]
            prev = con.execute("SELECT * FROM term_reviews WHERE project_id=? AND task_id=?",
                               (pid, tid)).fetchone()
            row = con.execute("SELECT native_term, source FROM query_terms WHERE concept=? AND"
                              " country=?", (data["concept"], data["country"])).fetchone()
            ours = prev is not None and prev["applied"] and row is not None and (
                row["native_term"] == prev["term"] and row["source"] == "reviewed")
            applied = 0
            if d.outcome in APPLIED:
                if row is not None and (row["native_term"] == data["proposed"] or ours):
                    counts[f"terms {d.outcome}"] += _write(con, data, d, run_id)
                    applied = 1
                else:
                    now = row["native_term"] if row is not None else None
                    d = TermDecision(TermOutcome.STALE, f"review: the term is now {now!r}, not the pushed "
                                     f"{data['proposed']!r}; push again ({d.reason})",
                                     votes=d.votes)
            elif ours:
                counts["terms restored to the pushed one"] += _restore(con, data, run_id)
            new = (d.outcome, d.term, d.reviewers, json.dumps(d.votes, sort_keys=True,
                   ensure_ascii=False), d.reason, applied, d.decided_at)
            old = None if prev is None else (prev["outcome"], prev["term"], prev["reviewers"],
                                             prev["votes_json"], prev["reason"], prev["applied"],
                                             prev["decided_at"])
            if new != old:
                record_term_review(con, pid, tid, data, d, applied, run_id)
            counts[f"outcome {d.outcome}"] += 1
    return counts


def term_agreement(answers: Mapping[int, Mapping[str, Answer]]) -> dict[str, Any]:
    """Krippendorff's alpha (nominal) over the tasks with at least two counted votes."""
    by_coder: dict[str, dict[str, str]] = {}
    units = 0
    for tid, per in answers.items():
        votes = {a: x.category for a, x in per.items() if x.category}
        if len(votes) < 2:
            continue
        units += 1
        for a, v in votes.items():
            by_coder.setdefault(a, {})[str(tid)] = v
    alpha = krippendorff_alpha(by_coder) if by_coder else None
    return {"n_units": units, "n_raters": len(by_coder), "krippendorff_alpha": alpha}


def write_queries_csv(cat: Catalog) -> Path:
    """Write ``query_terms`` as ``exports/queries.csv`` (``data/queries.csv``'s format)."""
    path = cat.workdir.exports_dir / "queries.csv"
    query_table.write_query_table(path, catalog_terms(cat).values())
    return path
