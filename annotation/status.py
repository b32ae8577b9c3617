"""Progress of the review projects (``python -m annotation status``); writes nothing.

Per live project: tasks by counted answers, the decisions and agreement ``pull`` would
compute, and per annotator the tasks done and remaining, the stuck tasks and every answer
that does not count (:mod:`annotation.quorum`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from annotation.client import Connection, user_names
from annotation.configs import KINDS, base_kind
from annotation.decide import duplicate_summary, tag_summary
from annotation.exports import export_tasks
from annotation.projects import (
    assigned_reviewers,
    known_tasks,
    recorded_annotators,
    recorded_keys,
    recorded_project,
    tag_choices,
)
from annotation.pull import DEFAULT_MIN, DEFAULT_QUORUM, fmt_num, format_not_counted
from annotation.quorum import answer_states, deciding_rows, not_counted, progress, task_counts
from annotation.reviews import parse_export
from annotation.terms import decide_terms, latest_answers, term_agreement
from builder.catalog import Catalog


def project_status(
    cat: Catalog, conn: Connection, key: str, min_annotators: int | None = None
) -> dict[str, Any] | None:
    """Status of the project ``key``, or None when this work dir has not pushed it."""
    pid = recorded_project(cat, key, conn.server)
    if pid is None:
        return None
    kind = base_kind(key)
    required = min_annotators or DEFAULT_MIN[kind]
    tasks = export_tasks(conn.client, pid, all_tasks=True)
    task_map = {int(t["task_id"]): t for t in known_tasks(cat, key, conn.server, pid).values()}
    retired = {tid for tid, t in task_map.items() if t.get("retired_at")}
    live = {int(t["id"]) for t in tasks if t["id"] in task_map and t["id"] not in retired}
    users = user_names(conn.client)
    choices = tag_choices(cat, key, conn.server) if kind == "tags" else None
    rows, _ = parse_export(kind, tasks, task_map, users, choices)
    rows = [r for r in rows if r.task_id in live]
    # the order pull decides in (current_rows: oldest annotation first, undated first)
    rows.sort(key=lambda r: (r.annotated_at or "", r.annotation_id))
    locale = key.partition(":")[2]
    assigned = assigned_reviewers(cat, locale).get(locale, []) if kind == "queries" else None
    states = answer_states(kind, rows, assigned)
    counts = task_counts(states)
    by_n = Counter(min(len(counts.get(t, (set(), set()))[1]), 3) for t in live)
    quorum = recorded_annotators(cat, conn, key) or DEFAULT_QUORUM
    overlaps = {tid: t.get("overlap") for tid, t in task_map.items()}
    people = assigned if assigned is not None else list(users.values())
    out: dict[str, Any] = {
        "kind": key, "project_id": pid, "tasks": len(live),
        "tasks_recorded": len(task_map), "tasks_retired": len(retired),
        "annotated_by": {k: by_n.get(int(k[0]), 0) for k in ("0", "1", "2", "3+")},
        "quorum": quorum, "answers_not_counted": not_counted(states),
        **progress(live, states, quorum, overlaps, people),
    }
    decide_on = deciding_rows(kind, rows)
    if kind == "duplicates":
        out.update(duplicate_summary(decide_on, required))
    elif kind == "tags":
        out.update(tag_summary(cat, decide_on, required))
    else:
        answers, uncounted = latest_answers(decide_on, assigned or [])
        outcomes = Counter(d.outcome for d in decide_terms(
            [task_map[t] for t in sorted(live)], answers, required).values())
        out.update({"outcomes": dict(sorted(outcomes.items())),
                    "term_agreement": term_agreement(answers),
                    "not_counted": dict(sorted(uncounted.items()))})
    return out


def status(cat: Catalog, conn: Connection, min_annotators: int | None = None
           ) -> list[dict[str, Any]]:
    """Status of every review project this work dir has pushed."""
    keys = [k for kind in KINDS for k in recorded_keys(cat, kind, conn.server)]
    return [s for k in keys if (s := project_status(cat, conn, k, min_annotators)) is not None]


def format_status(items: list[dict[str, Any]]) -> str:
    """Text table of :func:`status` for the CLI."""
    if not items:
        return "nothing pushed yet: run `python -m annotation push --kind duplicates`"
    lines = []
    for s in items:
        ab = s["annotated_by"]
        lines.append(
            f"{s['kind']}: project {s['project_id']}, {s['tasks']} tasks; annotated by "
            f"0: {ab['0']}, 1: {ab['1']}, 2: {ab['2']}, 3+: {ab['3+']}"
            + (f"; {s['tasks_retired']} retired (not handed out, answers not counted)"
               if s.get("tasks_retired") else "")
        )
        if "agreement" in s:
            ag = s["agreement"]
            lines.append(
                f"  agreement so far over {ag['n_units']} images: alpha "
                f"{fmt_num(ag['krippendorff_alpha'])}, kappa {fmt_num(ag['fleiss_kappa'])}; decisions "
                + ", ".join(f"{k} {v}" for k, v in s["decisions"].items())
            )
        if "outcomes" in s:
            lines.append("  outcomes so far: " + ", ".join(
                f"{k} {v}" for k, v in s["outcomes"].items()) + "; alpha "
                + fmt_num(s["term_agreement"]["krippendorff_alpha"]))
        if "gemini_vs_people" in s:
            g = s["gemini_vs_people"]
            lines.append(f"  Gemini tags so far on {g['n_units']} images: precision "
                         f"{fmt_num(g['precision'])}, recall {fmt_num(g['recall'])}")
        for a, c in s.get("annotators", {}).items():
            lines.append(f"  {a}: {c['annotations']} annotations")
        lines += _format_progress(s)
    return "\n".join(lines)


def _format_progress(s: dict[str, Any]) -> list[str]:
    """The manager's lines: who has done / has left what, stuck tasks, answers not counted."""
    lines = [f"  open tasks (fewer than {s['quorum']} counted answers): {s['open_tasks']}"]
    for who, p in s["per_annotator"].items():
        lines.append(f"  {who}: done {p['done']}, remaining {p['remaining']}")
    for x in s["stuck"]:
        lines.append(f"  stuck: task {x['task']}: {x['answered']} answered, {x['counted']} "
                     f"counted ({'; '.join(x['why'])}); `pull` hands it out again")
    lines += format_not_counted([x for x in s["answers_not_counted"]
                                 if x["why"] != "not assigned"], "  ")
    return lines
