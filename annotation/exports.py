"""Label Studio JSON exports as untrusted input: decode, check the shape, or say in one line why not.

An export (from the server or ``pull --export-file``) must be a JSON list of tasks with
numeric ids and ``annotations`` lists of annotations with numeric ids and ``result`` lists;
else :class:`~annotation.client.AnnotationError` names the first bad place, before anything
is stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

from annotation.client import AnnotationError, download_export


def _number(value: Any) -> int | None:
    """An id as Label Studio writes it (an integer; a string of digits is accepted)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _refused(source: str, why: str) -> AnnotationError:
    return AnnotationError(f"{source}{why}; nothing was changed")


def decode_export(blob: bytes, source: str) -> list[dict[str, Any]]:
    """The tasks of a JSON export, or an :class:`AnnotationError` naming ``source`` and why not."""
    if not blob.strip():
        raise _refused(source, " is empty (0 bytes of JSON)")
    try:
        text = blob.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AnnotationError(f"{source} is not UTF-8 text ({exc.reason} at byte {exc.start})"
                              ) from None
    if text.lstrip().startswith("<"):
        m = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        title = " ".join(m.group(1).split())[:120] if m else ""
        raise AnnotationError(
            f"{source} is an HTML page, not a JSON export"
            + (f" ({title!r})" if title else "")
            + "; a login page or a proxy error? nothing was changed"
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _refused(source, f" is not valid JSON ({exc.msg} at line {exc.lineno} column "
                               f"{exc.colno}; truncated?)") from None
    return check_tasks(data, source)


def check_tasks(data: Any, source: str) -> list[dict[str, Any]]:
    """The tasks of a decoded export with numeric ids, or an :class:`AnnotationError`."""
    if not isinstance(data, list):
        detail = data.get("detail") if isinstance(data, dict) else None
        raise _refused(source, f" is not a JSON list of tasks (got {type(data).__name__}"
                               + (f": {str(detail)[:200]}" if detail else "") + ")")
    out = []
    for n, task in enumerate(data, start=1):
        if not isinstance(task, dict):
            raise _refused(source, f": entry {n} is not a task object")
        tid = _number(task.get("id"))
        if tid is None:
            raise _refused(source, f": task {n} has id {task.get('id')!r}, not a number")
        anns = task.get("annotations")
        if not isinstance(anns, list):
            raise _refused(source, f": task {tid} has no 'annotations' list (not Label Studio's "
                                   "JSON export format?)")
        checked = []
        for k, ann in enumerate(anns, start=1):
            aid = _number(ann.get("id")) if isinstance(ann, dict) else None
            if aid is None:
                what = "is not an object" if not isinstance(ann, dict) else (
                    "has no id" if ann.get("id") is None else f"has id {ann.get('id')!r}, not a number")
                raise _refused(source, f": task {tid}, annotation {k} {what}")
            if not isinstance(ann.get("result") or [], list):
                raise _refused(source, f": task {tid}, annotation {aid}: 'result' is not a list")
            checked.append({**ann, "id": aid})
        out.append({**task, "id": tid, "annotations": checked})
    return out


def export_tasks(client: Any, pid: int, all_tasks: bool = False) -> list[dict[str, Any]]:
    """The project's tasks with every annotation, downloaded and checked."""
    return decode_export(download_export(client, pid, all_tasks), f"the export of project {pid}")
