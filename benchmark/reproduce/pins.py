"""Inputs no revision could be found for, pinned by the first run: ``DIR/reproduce-pins.json``
(per model the ``repo@commit`` its adapter found, per unpinned dataset its data fingerprint).
A later run that resolves anything else is refused unless ``--allow-revision-change``.
"""

from __future__ import annotations

import fcntl
import json
import logging
from pathlib import Path
from typing import Any

from core import files
from core.errors import DataError

log = logging.getLogger(__name__)

PINS_FILE = "reproduce-pins.json"
PINS_VERSION = 1


class RevisionChanged(DataError):
    """An input resolved to another revision than the one this output dir recorded."""


def model_revisions(spec: Any) -> dict[str, str]:
    """What a loaded adapter's spec found: ``checkpoint`` and every ``*revision`` of ``extra``."""
    out = {"checkpoint": f"{spec.checkpoint}@{spec.revision}"}
    extra = dict(getattr(spec, "extra", None) or {})
    for key, value in sorted(extra.items()):
        if key.endswith("revision") and value:
            owner = extra.get(key.removesuffix("_revision") + "_model") or extra.get(
                key.removesuffix("_revision")) or key
            out[key] = f"{owner}@{value}"
    return out


def load(path: Path) -> dict[str, dict[str, Any]]:
    """{"models": {model: {part: repo@commit}}, "datasets": {spec: fingerprint}}."""
    empty: dict[str, dict[str, Any]] = {"models": {}, "datasets": {}}
    if not path.is_file():
        return empty
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("schema_version") != PINS_VERSION:
            raise ValueError("unknown schema")
        return {"models": dict(raw["models"]), "datasets": dict(raw["datasets"])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("%s unreadable (%s): recorded revisions start again", path, e)
        return empty


def check_and_record(path: Path, kind: str, name: str, value: Any, allow: bool) -> None:
    """Record ``value`` for ``name`` the first time; :class:`RevisionChanged` when it differs,
    unless ``allow``. Under a lock (``--devices`` processes share the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pins = load(path)
        old = pins[kind].get(name)
        if old is not None and old != value:
            if not allow:
                raise RevisionChanged(
                    f"{name}: resolved {_show(value, old)}, but this output dir recorded "
                    f"{_show(old, value)} at its first run; pin it, or pass "
                    "--allow-revision-change to accept the new one")
            log.warning("%s: revision changed (%s -> %s); recorded (--allow-revision-change)",
                        name, _show(old, value), _show(value, old))
        if old != value:
            pins[kind][name] = value
            files.atomic_write_json(path, {"schema_version": PINS_VERSION, **pins})


def _show(value: Any, other: Any) -> str:
    """The parts of ``value`` that differ from ``other`` (a dict of parts, or a string)."""
    if isinstance(value, dict) and isinstance(other, dict):
        diff = {k: v for k, v in value.items() if other.get(k) != v}
        return ", ".join(f"{k} {v}" for k, v in diff.items()) or "(none)"
    return str(value)
