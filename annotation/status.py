"""Progress of the review projects (``python -m annotation status``).

Reads the live project (nothing is written): tasks, how many distinct annotators answered
each task (0, 1, 2, 3+; skipped tasks do not count), and the agreement so far, computed from
the live annotations exactly as ``pull`` would.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from annotation.client import Connection, export_tasks, user_names
from annotation.configs import KINDS
from annotation.projects import known_tasks, recorded_project
from annotation.pull import duplicate_summary, fmt_num, tag_summary
from annotation.reviews import parse_export
from builder.catalog import Catalog


def project_status(
    cat: Catalog, conn: Connection, kind: str, min_annotators: int = 3
) -> dict[str, Any] | None:
    """Status of the ``kind`` project, or None when this work dir has not pushed it."""
    pid = recorded_project(cat, kind, conn.server)
    if pid is None:
        return None
    tasks = export_tasks(conn.client, pid, all_tasks=True)
    task_map = {int(t["task_id"]): t for t in known_tasks(cat, kind, conn.server, pid).values()}
    users = user_names(conn.client)
    by_n: Counter = Counter()
    for t in tasks:
        who = {a.get("completed_by") if not isinstance(a.get("completed_by"), dict)
               else a["completed_by"].get("id")
               for a in t.get("annotations") or [] if not a.get("was_cancelled")}
        n = len(who)
        by_n[str(n) if n < 3 else "3+"] += 1
    rows, _ = parse_export(kind, tasks, task_map, users)
    out: dict[str, Any] = {
        "kind": kind, "project_id": pid, "tasks": len(tasks),
        "tasks_recorded": len(task_map),
        "annotated_by": {k: by_n.get(k, 0) for k in ("0", "1", "2", "3+")},
    }
    if kind == "duplicates":
        out.update(duplicate_summary(rows, min_annotators))
    else:
        out.update(tag_summary(cat, rows, min_annotators))
    return out


def status(cat: Catalog, conn: Connection, min_annotators: int = 3) -> list[dict[str, Any]]:
    """Status of every review project this work dir has pushed."""
    return [s for k in KINDS if (s := project_status(cat, conn, k, min_annotators)) is not None]


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
        )
        if "agreement" in s:
            ag = s["agreement"]
            lines.append(
                f"  agreement so far over {ag['n_units']} images: alpha "
                f"{fmt_num(ag['krippendorff_alpha'])}, kappa {fmt_num(ag['fleiss_kappa'])}; decisions "
                + ", ".join(f"{k} {v}" for k, v in s["decisions"].items())
            )
        if "gemini_vs_people" in s:
            g = s["gemini_vs_people"]
            lines.append(f"  Gemini tags so far on {g['n_units']} images: precision "
                         f"{fmt_num(g['precision'])}, recall {fmt_num(g['recall'])}")
        for a, c in s.get("annotators", {}).items():
            lines.append(f"  {a}: {c['annotations']} annotations")
    return "\n".join(lines)
