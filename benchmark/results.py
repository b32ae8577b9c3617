"""The results file: ``<output-dir>/<model-slug>/<task>.json``, strict JSON, written atomically.

Schema: README.md, "Results format". NaN and infinities are written as null (``sanitize``) and
``allow_nan`` is off, so a stray one is an error, never a silent ``NaN`` token.
"""

from __future__ import annotations

import json
import math
import platform
import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from benchmark.models.base import ModelSpec
from core import __version__, files
from core.errors import DataError

SCHEMA_VERSION = 1


class TaskInfo(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    dataset: str
    data_fingerprint: str
    n: int


class ResultFile(BaseModel):
    """Top level of every results JSON."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())
    schema_version: int = SCHEMA_VERSION
    package_version: str = __version__
    git_commit: str | None = None
    date: str
    environment: dict[str, Any] = {}
    model: ModelSpec
    task: TaskInfo
    settings: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    scores: dict[str, Any]


SAFE_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def model_slug(name: str) -> str:
    """The model's folder name: the name when safe (``[a-z0-9._-]``, <= 64), else a readable
    part and a short hash, so two names never share a folder (case-insensitive file systems)."""
    if SAFE_SLUG.fullmatch(name) and not name.endswith("."):
        return name
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:48] or "model"
    return f"{readable}-{files.sha256_text(name)[:10]}"


def schema_problem(raw: dict[str, Any]) -> str | None:
    """Why a results file's ``schema_version`` is not one this version reads (None: it is)."""
    v = raw.get("schema_version")
    if type(v) is int and v == SCHEMA_VERSION:
        return None
    return f"schema_version {v!r} is not one this version reads ({SCHEMA_VERSION})"


def environment() -> dict[str, Any]:
    """Versions of the interpreter and the numeric libraries that shaped the numbers."""
    env: dict[str, Any] = {"python": platform.python_version(), "numpy": np.__version__,
                           "platform": platform.platform()}
    import importlib.metadata as md

    for pkg in ("torch", "transformers", "open_clip_torch", "datasets"):
        try:
            env[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return env


def sanitize(obj: Any) -> Any:
    """Make ``obj`` strict-JSON: numpy scalars/arrays to Python, NaN/inf to None."""
    if isinstance(obj, dict):
        return {str(k): sanitize(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [sanitize(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return sanitize(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


#: the kind in the marker of a results folder (see core.files.claim): ``run``,
#: ``analyze`` and ``reproduce`` write only into a new or empty folder or one marked so
RESULTS_KIND = "3xcm-results"


def results_path(output_dir: str | Path, model_name: str, task_name: str) -> Path:
    return Path(output_dir) / model_slug(model_name) / f"{task_name}.json"


def model_conflict(path: Path, name: str) -> str | None:
    """Why the results file at ``path`` must not be replaced by one of model ``name`` (it
    holds another model's results); None when it may."""
    try:
        other = json.loads(path.read_text(encoding="utf-8"))["model"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if other == name:
        return None
    return (f"{path} holds the results of model {other!r}, not {name!r}: refusing to "
            "overwrite it (pass another --output-dir)")


def write_results(output_dir: str | Path, result: ResultFile) -> Path:
    """Validate and write a results file; returns its path. A file there of another model is
    never overwritten (DataError)."""
    path = results_path(output_dir, result.model.name, result.task.name)
    why = model_conflict(path, result.model.name)
    if why:
        raise DataError(why)
    files.atomic_write_json(path, sanitize(result.model_dump(mode="python")))
    files.mark_folder(output_dir, RESULTS_KIND, [path])
    return path


def read_results(path: str | Path) -> ResultFile:
    """Load and validate a results file; an unknown ``schema_version`` is a DataError."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    why = schema_problem(raw) if isinstance(raw, dict) else None
    if why:
        raise DataError(f"{path}: {why}")
    return ResultFile.model_validate(raw)
