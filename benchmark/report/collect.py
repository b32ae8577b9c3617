"""Find and load results files for a report: any mix of results roots, model folders, files.

Every ``*.json`` that validates as a results file (or an mteb result of our tasks) is kept by
(model, task, data fingerprint), the newest by ``date``; every other file is listed in
``Collection.skipped`` with its reason.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from benchmark.mteb.results import from_mteb, is_mteb_result
from benchmark.results import ResultFile, read_results, schema_problem
from core.errors import DataError
from core.files import sha256_text

log = logging.getLogger(__name__)

class ReportInputError(DataError):
    """No results where the user pointed: one line, exit code 2."""


KNOWN_TASKS = ("3xcm", "3xcm-i2i", "xm3600-i2t", "3xcm-matrix", "analysis")


Key = tuple[str, str, str]  # (model name, task name, data fingerprint)


@dataclass
class Collection:
    """Every results file found, by (model, task, data fingerprint), with its path, what was
    skipped and why, each model's display label; ``results``: the newest run per (model, task)."""

    runs: dict[Key, ResultFile] = field(default_factory=dict)
    run_paths: dict[Key, Path] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    _newest: dict[tuple[str, str], Key] | None = field(default=None, repr=False)

    def _keys(self) -> dict[tuple[str, str], Key]:
        """(model, task) -> the key of its newest run (computed once, not per lookup)."""
        if self._newest is None:
            newest = {k[:2]: k for k in sorted(self.runs, key=lambda k: self.runs[k].date)}
            self._newest = dict(sorted(newest.items()))
        return self._newest

    @property
    def results(self) -> dict[str, dict[str, ResultFile]]:
        """model name -> task name -> results (the newest of the model's runs of the task)."""
        out: dict[str, dict[str, ResultFile]] = {}
        for (model, task), k in self._keys().items():
            out.setdefault(model, {})[task] = self.runs[k]
        return out

    @property
    def paths(self) -> dict[tuple[str, str], Path]:
        return {mt: self.run_paths[k] for mt, k in self._keys().items()}

    @property
    def models(self) -> list[str]:
        return sorted({m for m, _ in self._keys()})

    def label(self, model: str) -> str:
        return self.labels.get(model, model)

    def task(self, task: str) -> dict[str, ResultFile]:
        """model name -> results of ``task`` (models without it are absent)."""
        return {m: self.runs[k] for (m, t), k in self._keys().items() if t == task}

    def fingerprints(self, tasks: tuple[str, ...] | None = None) -> list[str]:
        """The data fingerprints of the runs (of ``tasks``), in the order first seen."""
        return list(dict.fromkeys(k[2] for k in self.runs if tasks is None or k[1] in tasks))

    def subset(self, fingerprint: str) -> Collection:
        """The runs on one dataset (same ``task.data_fingerprint``), with the same labels."""
        keep = [k for k in self.runs if k[2] == fingerprint]
        return Collection({k: self.runs[k] for k in keep},
                          {k: self.run_paths[k] for k in keep}, [], self.labels)

    def add(self, r: ResultFile, path: Path) -> None:
        key = (r.model.name, r.task.name, r.task.data_fingerprint)
        old = self.runs.get(key)
        if old is not None:
            keep_new = r.date >= old.date
            log.warning("two results for %s / %s on one dataset (%s, %s); keeping the %s one",
                        r.model.name, r.task.name, self.run_paths[key], path,
                        "newer" if keep_new else "older")
            if not keep_new:
                return
        self.runs[key] = r
        self.run_paths[key] = path
        self._newest = None


#: a local path in a model name: at its start or after ``:``, ``=`` or a space
_PATH = re.compile(r"(?:^|(?<=[:=\s]))(?:[A-Za-z]:[\\/]|~?/)[^\s:]*")


def short_path(text: str, keep: int = 2) -> str:
    """``text`` with each local path cut to its last ``keep`` parts (``…/data/xcm``)."""
    def last(m: re.Match[str]) -> str:
        parts = [p for p in re.split(r"[\\/]", m.group(0)) if p]
        return "…/" + "/".join(parts[-keep:])  # never the machine's absolute path

    return _PATH.sub(last, " ".join(text.split()))


def display_labels(names: Iterable[str], width: int = 48) -> dict[str, str]:
    """Short unique labels: a local path in a name keeps its last folders (``…/v2``); a label
    still shared, or longer than ``width``, ends in ``#`` and a short hash of the name."""
    names = sorted(set(names))
    labels: dict[str, str] = {}
    for keep in (1, 2, 3):
        labels = {n: short_path(n, keep) for n in names}
        if len(set(labels.values())) == len(labels):
            break
    shared = Counter(labels.values())
    for n, label in labels.items():
        if shared[label] > 1 or len(label) > width:
            labels[n] = f"{label[:width - 10]} #{sha256_text(n)[:8]}"
    return labels


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


def not_results(raw: object) -> str | None:
    """Why parsed JSON is not a results file at all (None: it claims to be one)."""
    if not isinstance(raw, dict):
        kind = {list: "list", str: "string", bool: "boolean", int: "number",
                float: "number"}.get(type(raw), "null")
        return f"a JSON {kind}, not an object"
    missing = [k for k in ("schema_version", "model", "task", "scores") if k not in raw]
    return f"no {', '.join(missing)}" if missing else schema_problem(raw)


def collect(paths: list[Path]) -> Collection:
    """Load every results file under ``paths`` (see module docstring)."""
    col = Collection()
    for path in _json_files(paths):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            col.skipped.append((str(path), f"not JSON: {e}"))
            continue
        if is_mteb_result(raw):
            got = from_mteb(raw, path)
            if isinstance(got, str):
                col.skipped.append((str(path), got))
            else:
                col.add(got, path)
            continue
        why = not_results(raw)
        if why:
            col.skipped.append((str(path), f"not a results file: {why}"))
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
    col.labels = display_labels(m for m, _, _ in col.runs)
    return col
