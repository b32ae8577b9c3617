"""Pull annotations back (``python -m annotation pull``): check, store, decide, apply, measure.

The export is checked first (:mod:`annotation.exports`; one matching none of the pushed tasks
is refused and nothing is stored), every annotation is stored with its history, then each
kind is decided (:mod:`annotation.decide`, :mod:`annotation.terms`) and the report written
to ``exports/annotation/<kind>_pull.json``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from annotation.client import AnnotationError, Connection, user_names
from annotation.configs import base_kind
from annotation.decide import (
    annotator_counts,
    apply_duplicate_decisions,
    duplicate_summary,
    image_votes,
    tag_summary,
)
from annotation.exports import decode_export, export_tasks
from annotation.projects import (
    assigned_reviewers,
    known_tasks,
    recorded_annotators,
    recorded_keys,
    recorded_project,
    require_project,
    tag_choices,
)
from annotation.quorum import (
    answer_states,
    deciding_rows,
    not_counted,
    sync_overlaps,
    target_overlaps,
)
from annotation.reviews import ReviewRow, current_rows, parse_export, store_reviews
from annotation.terms import (
    apply_term_decisions,
    decide_terms,
    latest_answers,
    term_agreement,
    write_queries_csv,
)
from builder.catalog import Catalog
from builder.stagekit import stage_run
from core import query_table
from core.files import atomic_write_text

log = logging.getLogger(__name__)

#: answers each unit needs before the majority decides, per kind (``--min-annotators``)
DEFAULT_MIN = {"duplicates": 3, "tags": 3, "queries": 2}
#: answers a task collects when the project does not say (push's default ``--annotators``)
DEFAULT_QUORUM = 3
#: answers that do not count named in the text report (all are in the JSON report)
MAX_NAMED = 20


def _project_keys(cat: Catalog, server: str, kind: str, locales: list[str] | None
                  ) -> list[tuple[str, int]]:
    """``[(project key, project id)]`` to pull (query terms: of ``locales``, None: all)."""
    if kind != "queries":
        return [(kind, require_project(cat, kind, server))]
    keys = recorded_keys(cat, "queries", server)
    if locales is not None:
        keys = [k for k in keys if k.split(":", 1)[1] in locales]
    if not keys:
        raise AnnotationError(
            f"no query-term project of {server} in this work dir"
            + (f" for {', '.join(locales)}" if locales else "")
            + ": run `python -m annotation push --kind queries` first")
    return [(k, int(recorded_project(cat, k, server) or 0)) for k in keys]


def read_export_file(path: str | Path) -> list[dict[str, Any]]:
    """A JSON export saved from Label Studio, checked (one line on any fault)."""
    p = Path(path)
    try:
        blob = p.read_bytes()
    except OSError as exc:
        raise AnnotationError(f"cannot read the export file {p}: {exc.strerror}") from None
    return decode_export(blob, f"the export file {p}")


def load_exports(
    cat: Catalog, conn: Connection, projects: list[tuple[str, int]],
    export_file: str | Path | None = None, exported: list[dict[str, Any]] | None = None,
) -> dict[str, tuple[int, list[dict[str, Any]]]]:
    """``{project key: (project id, export tasks)}`` of the projects the export speaks for
    (each project's full export from the server, or the file's ``exported`` tasks); an export
    matching none of the pushed tasks is refused before anything is stored."""
    from_file = exported
    if from_file is None and export_file is not None:
        from_file = read_export_file(export_file)
    out: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    pushed_total = 0
    for key, pid in projects:
        pushed = {int(t["task_id"]) for t in known_tasks(cat, key, conn.server, pid).values()}
        pushed_total += len(pushed)
        tasks = from_file if from_file is not None else export_tasks(conn.client, pid,
                                                                     all_tasks=True)
        if any(t["id"] in pushed for t in tasks) or not pushed:
            out[key] = (pid, tasks)
        elif from_file is None:
            raise AnnotationError(_refusal(f"the export of project {pid}", tasks, len(pushed), key))
    if from_file is not None and not out and pushed_total:
        raise AnnotationError(_refusal(f"the export file {export_file}", from_file, pushed_total,
                                       ", ".join(k for k, _ in projects)))
    return out


def _refusal(source: str, tasks: list[dict[str, Any]], n_pushed: int, what: str) -> str:
    content = "is empty" if not tasks else f"holds {len(tasks)} tasks"
    return (f"{source} {content} and matches none of the {n_pushed} tasks pushed ({what}) from "
            "this work dir; nothing was changed (wrong project, server or file?)")


def pull(
    cat: Catalog, conn: Connection, kind: str, min_annotators: int | None = None, *,
    export_file: str | Path | None = None, exported: list[dict[str, Any]] | None = None,
    locales: list[str] | None = None,
) -> dict[str, Any]:
    """Check the export, store every annotation, decide, apply; return a report."""
    required = min_annotators or DEFAULT_MIN[kind]
    projects = _project_keys(cat, conn.server, kind, locales)
    exports = load_exports(cat, conn, projects, export_file, exported)
    users = user_names(conn.client)
    params = {"action": "pull", "kind": kind, "server": conn.server, "min_annotators": required,
              "projects": {k: pid for k, pid in projects},
              "export_file": str(export_file) if export_file is not None else None}
    if kind != "queries":
        params["project_id"] = projects[0][1]
    with stage_run(cat, "review", params) as rec:
        if kind == "queries":
            report = _pull_queries(cat, conn, exports, users, required, rec.run_id)
        else:
            pid, tasks = exports[kind]
            report, current = _store(cat, conn, kind, pid, tasks, users, rec.run_id)
            report["min_annotators"] = required
            live = live_rows(cat, kind, conn.server, pid)
            current, info = count_answers(cat, conn, kind, pid, live, current)
            report.update(info)
            if kind == "duplicates":
                applied = apply_duplicate_decisions(cat, live.values(), image_votes(current),
                                                    required)
                report["applied"] = dict(sorted(applied.items()))
                report.update(duplicate_summary(current, required))
            else:
                report.update(tag_summary(cat, current, required))
        rec.counts, rec.summary = report, format_report(report)
    out = cat.workdir.exports_dir / "annotation" / f"{kind}_pull.json"
    atomic_write_text(out, json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False,
                                      allow_nan=False) + "\n")
    return report


def _store(
    cat: Catalog, conn: Connection, key: str, pid: int, tasks: list[dict[str, Any]],
    users: dict[int, str], run_id: int | None,
) -> tuple[dict[str, Any], list]:
    """Store the export's annotations of one project; the report's head and the current rows."""
    task_map = {int(t["task_id"]): t for t in known_tasks(cat, key, conn.server, pid).values()}
    choices = tag_choices(cat, key, conn.server) if key == "tags" else None
    rows, parse_counts = parse_export(base_kind(key), tasks, task_map, users, choices)
    for note in ("annotations last saved by another account",
                 "tag answers with concepts outside the list (rejected)"):
        if parse_counts.get(note):
            log.warning("%s: %d %s", key, parse_counts[note], note)
    exported = {t["id"] for t in tasks if t["id"] in task_map}
    stored = store_reviews(cat, key, pid, rows, run_id, exported)
    report: dict[str, Any] = {
        "kind": base_kind(key), "project_id": pid, "server": conn.server,
        "tasks_pushed": len(task_map), "tasks_in_export": len(exported),
        "tasks_retired": sum(1 for t in task_map.values() if t.get("retired_at")),
        "export": dict(parse_counts), "stored": dict(stored),
    }
    return report, current_rows(cat, key, pid)


def _pull_queries(
    cat: Catalog, conn: Connection, exports: dict[str, tuple[int, list[dict[str, Any]]]],
    users: dict[int, str], required: int, run_id: int | None,
) -> dict[str, Any]:
    """Per locale project: store, decide with the assigned reviewers, apply; then the CSV."""
    locales: dict[str, Any] = {}
    for key, (pid, tasks) in exports.items():
        locale = key.split(":", 1)[1]
        part, current = _store(cat, conn, key, pid, tasks, users, run_id)
        live = live_rows(cat, key, conn.server, pid)
        assigned = assigned_reviewers(cat, locale).get(locale, [])
        current, info = count_answers(cat, conn, key, pid, live, current, assigned)
        part.update(info)
        answers, uncounted = latest_answers(current, assigned)
        task_rows = list(live.values())
        decisions = decide_terms(task_rows, answers, required)
        applied = apply_term_decisions(cat, pid, task_rows, decisions, run_id)
        del part["kind"], part["server"]
        locales[locale] = {
            **part,
            "reviewers_assigned": assigned,
            "not_counted": dict(sorted(uncounted.items())),
            "outcomes": {k.removeprefix("outcome "): v for k, v in sorted(applied.items())
                         if k.startswith("outcome ")},
            "applied": {k: v for k, v in sorted(applied.items()) if not k.startswith("outcome ")},
            "agreement": term_agreement(answers),
            "annotators": annotator_counts(current),
        }
    path = write_queries_csv(cat)
    reviewed = cat.query("SELECT COUNT(*) FROM query_terms WHERE source = ?",
                         (query_table.REVIEWED,))[0][0]
    return {"kind": "queries", "server": conn.server, "min_annotators": required,
            "locales": locales, "queries_csv": str(path), "reviewed_terms": reviewed}


def live_rows(cat: Catalog, key: str, server: str, pid: int) -> dict[int, dict[str, Any]]:
    """``{task id: ls_tasks row}`` of the project's live tasks (only their answers count)."""
    return {int(r["task_id"]): r for r in known_tasks(cat, key, server, pid).values()
            if not r.get("retired_at")}


def count_answers(
    cat: Catalog, conn: Connection, key: str, pid: int, live: dict[int, dict[str, Any]],
    current: list[ReviewRow], assigned: list[str] | None = None,
) -> tuple[list[ReviewRow], dict[str, Any]]:
    """The live tasks' rows the decisions see and the answers that do not count, named; sets
    each live task's overlap (:mod:`annotation.quorum`)."""
    kind = base_kind(key)
    current = [r for r in current if r.task_id in live]
    states = answer_states(kind, current, assigned)
    quorum = recorded_annotators(cat, conn, key) or DEFAULT_QUORUM
    reopened = sync_overlaps(cat, conn.client, key, conn.server, pid,
                             target_overlaps(live, states, quorum), quorum, states)
    return deciding_rows(kind, current), {
        "answers_not_counted": not_counted(states), "quorum": quorum,
        "tasks_with_overlap_changed": reopened}


def fmt_num(x: Any) -> str:
    """A statistic for people: three decimals, or n/a when undefined."""
    return "n/a" if x is None else f"{x:.3f}"


def format_report(report: dict[str, Any]) -> str:
    """One screen of text for the CLI and the stage-run record."""
    if report["kind"] == "queries":
        return _format_queries(report)
    lines = [f"{report['kind']} project {report['project_id']} ({report['server']}): "
             f"{report['tasks_pushed']} tasks pushed"
             + (f", {report['tasks_retired']} retired (answers kept, not counted)"
                if report.get("tasks_retired") else "")]
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
    lines += format_not_counted(report.get("answers_not_counted") or [])
    return "\n".join(lines)


def format_not_counted(items: list[dict[str, Any]], indent: str = "") -> list[str]:
    """Lines naming the answers that do not count (task, author, why, editor)."""
    if not items:
        return []
    lines = [f"{indent}answers not counted ({len(items)}; they do not use up their task):"]
    for x in items[:MAX_NAMED]:
        lines.append(f"{indent}  task {x['task']}: {x['author']}: {x['why']}"
                     + (f" (last saved by {x['editor']})" if x.get("editor") else ""))
    if len(items) > MAX_NAMED:
        lines.append(f"{indent}  ... and {len(items) - MAX_NAMED} more (--json lists all)")
    return lines


def _format_queries(report: dict[str, Any]) -> str:
    lines = [f"queries ({report['server']}): {len(report['locales'])} locale projects, "
             f"majority of at least {report['min_annotators']} assigned reviewers"]
    for locale, r in report["locales"].items():
        stored = ", ".join(f"{k} {v}" for k, v in sorted(r["stored"].items())) or "none"
        lines.append(f"{locale}: project {r['project_id']}, {r['tasks_pushed']} tasks pushed; "
                     f"annotations: {stored}")
        lines.append("  reviewers: " + (", ".join(r["reviewers_assigned"]) or
                     "none assigned (python -m annotation assign)"))
        if r["not_counted"]:
            lines.append("  not counted (not assigned to " + locale + "): " + ", ".join(
                f"{a} {n}" for a, n in r["not_counted"].items()))
        lines.append("  outcomes: " + ", ".join(f"{k} {v}" for k, v in r["outcomes"].items()))
        lines += format_not_counted([x for x in r.get("answers_not_counted") or []
                                     if x["why"] != "not assigned"], "  ")
        ag = r["agreement"]
        lines.append(f"  agreement over {ag['n_units']} tasks with 2+ answers: Krippendorff "
                     f"alpha {fmt_num(ag['krippendorff_alpha'])}")
    lines.append(f"{report['queries_csv']}: {report['reviewed_terms']} reviewed terms")
    return "\n".join(lines)
