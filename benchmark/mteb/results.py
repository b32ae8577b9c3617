"""mteb's results of our three tasks, read back as our results files (``benchmark report``).

Our task record rides in the scores (``xcm3``), so a result matches ``run --model mteb:NAME``'s
but for mteb's 6-decimal rounding and no outcomes; any other result is skipped, with the reason.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmark.models.base import model_spec
from benchmark.mteb.meta import KINDS, from_mteb_scores
from benchmark.results import ResultFile, TaskInfo

JSON_ROUNDING = 6  # decimals of every float in mteb's TaskResult JSON


def is_mteb_result(raw: object) -> bool:
    """Does parsed JSON look like an mteb ``TaskResult`` file?"""
    return (isinstance(raw, dict) and {"task_name", "scores", "mteb_version"} <= set(raw)
            and isinstance(raw.get("scores"), dict))


def _model_meta(path: Path) -> dict[str, Any]:
    f = path.parent / "model_meta.json"
    try:
        meta = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _date(raw: dict[str, Any]) -> str:
    d = raw.get("date")
    if isinstance(d, int | float):
        return datetime.fromtimestamp(d, UTC).isoformat(timespec="seconds")
    return str(d) if d else "1970-01-01T00:00:00+00:00"


def from_mteb(raw: dict[str, Any], path: Path) -> ResultFile | str:
    """The :class:`ResultFile` of one mteb ``TaskResult`` of our tasks, or why it is not one."""
    name = str(raw.get("task_name"))
    kind = KINDS.get(name)
    if kind is None:
        return f"an mteb result of task {name!r}, not one of 3XCM's ({', '.join(KINDS)})"
    subsets = raw["scores"].get("test")
    if not isinstance(subsets, list) or not subsets or not isinstance(subsets[0], dict):
        return f"an mteb result of {name} without scores for split 'test'"
    scores = subsets[0]
    rec = scores.get("xcm3")
    if not isinstance(rec, dict) or not isinstance(rec.get("task"), dict):
        return f"an mteb result of {name} without its xcm3 task record (dataset unknown)"
    settings = dict(rec.get("settings") or {})
    conv = (settings.get("conventions") or {}).get("query") or {}
    record = conv.get("mteb") or {}
    meta = _model_meta(path)
    model_name = str(record.get("name") or meta.get("name") or path.parent.parent.name)
    revision = record.get("revision") or meta.get("revision")
    settings["mteb_json_rounding"] = JSON_ROUNDING
    settings["mteb_version"] = raw.get("mteb_version")
    spec = model_spec(f"mteb:{model_name}", "mteb", model_name, revision,
                      multi_vector=record.get("similarity_fn_name") == "MaxSim",
                      mteb=record or meta)
    task = TaskInfo.model_validate({**rec["task"],
                                    "dataset_revision_in_mteb": raw.get("dataset_revision")})
    return ResultFile(date=_date(raw), model=spec, task=task, settings=settings,
                      timings=dict(rec.get("timings") or {}),
                      scores=from_mteb_scores(kind, scores),
                      source={"runner": "mteb", "file": str(path)})
