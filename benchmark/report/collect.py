"""Find and load results files for a report: any mix of results roots, model folders, files.

A results root holds ``<model-slug>/<task>.json``; every ``*.json`` below the given paths that
validates as a results file (:func:`benchmark.results.read_results`) is taken, grouped by
model name and task name. Files that are not results (other JSON) are skipped with a debug
line; a results file that fails validation is reported in ``Collection.skipped`` with its
reason. Two files for the same (model, task) keep the newest by ``date`` (logged).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from benchmark.data import DataError
from benchmark.results import ResultFile, read_results

log = logging.getLogger(__name__)

class ReportInputError(DataError):
    """No results where the user pointed: one line, exit code 2."""


KNOWN_TASKS = ("3xcm", "3xcm-i2i", "xm3600-i2t", "3xcm-matrix", "analysis")


@dataclass
class Collection:
    """model name -> task name -> results, plus where each came from and what was skipped."""

    results: dict[str, dict[str, ResultFile]] = field(default_factory=dict)
    paths: dict[tuple[str, str], Path] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted(self.results)

    def task(self, task: str) -> dict[str, ResultFile]:
        """model name -> results of ``task`` (models without it are absent)."""
        return {m: t[task] for m, t in sorted(self.results.items()) if task in t}

    def add(self, r: ResultFile, path: Path) -> None:
        slot = self.results.setdefault(r.model.name, {})
        old = slot.get(r.task.name)
        if old is not None:
            keep_new = r.date >= old.date
            log.warning("two results for %s / %s (%s, %s); keeping the %s one", r.model.name,
                        r.task.name, self.paths[(r.model.name, r.task.name)], path,
                        "newer" if keep_new else "older")
            if not keep_new:
                return
        slot[r.task.name] = r
        self.paths[(r.model.name, r.task.name)] = path


def _json_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.json") if not q.name.startswith(".")))
        else:
            raise ReportInputError(f"no such results file or folder: {p}")
    return list(dict.fromkeys(out))


def collect(paths: list[Path]) -> Collection:
    """Load every results file under ``paths`` (see module docstring)."""
    col = Collection()
    for path in _json_files(paths):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            col.skipped.append((str(path), f"not JSON: {e}"))
            continue
        if not (isinstance(raw, dict) and "schema_version" in raw and "scores" in raw):
            log.debug("not a results file: %s", path)
            continue
        try:
            r = read_results(path)
        except ValidationError as e:
            col.skipped.append((str(path), f"invalid results file: {e.error_count()} error(s)"))
            continue
        if r.task.name not in KNOWN_TASKS:
            log.info("results of task %r are not part of the report: %s", r.task.name, path)
        col.add(r, path)
    for path, why in col.skipped:
        log.warning("skipped %s: %s", path, why)
    return col
