"""``python -m pipeline status``: each stage's state in a work dir, and the catalog's tables."""

from __future__ import annotations

import json
import logging
from typing import Any

from builder.catalog import Catalog, stale_reason
from pipeline.stages import STAGES, Stage

log = logging.getLogger(__name__)


def build_status(catalog: Catalog, stages: list[Stage] | None = None) -> dict[str, Any]:
    """Stages with state and last-run record, and the catalog's table sizes."""
    out = []
    stale = set(catalog.stale_runs())  # shown interrupted; the next run records it so
    for st in STAGES if stages is None else stages:
        run = catalog.last_run(st.name)
        entry: dict[str, Any] = {"stage": st.name, "module": st.module_name}
        if run is None:
            entry["state"] = "not run"
        else:
            entry.update(
                state=run["status"],
                run_id=run["run_id"],
                started_at=run["started_at"],
                ended_at=run["ended_at"],
                counts=json.loads(run["counts_json"] or "{}"),
                usage=json.loads(run["usage_json"] or "{}"),
                runs=catalog.query("SELECT COUNT(*) FROM stage_runs WHERE stage=?",
                                   (st.name,))[0][0],
                headline=(run["summary"] or "").split("\n", 1)[0],
            )
            if run["run_id"] in stale:
                entry.update(state="interrupted", headline=stale_reason(run["pid"], run["host"]))
        out.append(entry)
    tables = {t: catalog.query(f'SELECT COUNT(*) FROM "{t}"')[0][0] for t in catalog.tables()}
    return {
        "workdir": str(catalog.workdir.root),
        "schema_version": catalog.schema_version,
        "stages": out,
        "tables": tables,
    }


def empty_status(root: Any, stages: list[Stage]) -> dict[str, Any]:
    """The status of a work dir without a catalog (nothing made to show it)."""
    return {"workdir": str(root), "schema_version": None, "tables": {},
            "stages": [{"stage": s.name, "module": s.module_name, "state": "not run"}
                       for s in stages]}


def _brief(counts: dict[str, Any], width: int = 70) -> str:
    def total(v: Any) -> Any:  # a dict of counts: the sum of its numbers
        return sum(x for x in v.values() if isinstance(x, int)) if isinstance(v, dict) else v

    text = ", ".join(f"{k}={total(v)}" for k, v in counts.items())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_status(st: dict[str, Any]) -> str:
    """The status as a table: one line per stage, then the table sizes."""
    head = (f"catalog schema v{st['schema_version']}" if st["schema_version"] is not None else
            "no catalog: nothing built yet; python -m builder run starts, docs/offline.md")
    lines = [
        f"work dir {st['workdir']} ({head})",
        "",
        f"{'stage':<14} {'state':<14} {'last run (UTC)':<26} last summary",
    ]
    for s in st["stages"]:
        when = s.get("ended_at") or s.get("started_at") or "-"
        what = s.get("headline") or _brief(s.get("counts", {}))
        lines.append(f"{s['stage']:<14} {s['state']:<14} {when:<26} {what}")
    lines += ["", "tables: " + ", ".join(f"{k}={v}" for k, v in st["tables"].items())]
    return "\n".join(lines)
