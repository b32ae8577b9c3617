"""The schema of a release's ``build.json``, checked by every reader and by the writer: a bad
record is one :class:`~core.errors.DataError` line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from core.errors import DataError


class Sampling(BaseModel):
    model_config = ConfigDict(extra="allow")
    seed: StrictInt | None = None
    per_image: StrictInt | None = None
    distinct_language: StrictBool = False


class BuildRecord(BaseModel):
    """``build.json``: the fields with a known type (others are kept as they are)."""

    model_config = ConfigDict(extra="allow")
    format: StrictStr | None = None
    format_version: StrictInt | None = None
    exported_at: StrictStr | None = None
    package_version: StrictStr | None = None
    git_commit: StrictStr | None = None
    sampling: Sampling = Sampling()
    stage_runs: list[dict[str, Any]] = []
    numbers: dict[str, Any] = {}


def _first_problem(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "(top)"
    return f"build.json field {where}: {first['msg']} ({e.error_count()} problem(s))"


def check_written(build: dict[str, Any]) -> None:
    """A record about to be written holds to the schema (else ValueError: our bug)."""
    try:
        BuildRecord.model_validate(build)
    except ValidationError as e:
        raise ValueError(f"refusing to write {_first_problem(e)}") from e


def parse_build_record(text: str, what: str) -> dict[str, Any]:
    """``build.json`` text as a dict whose known fields have their types, else DataError."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{what}: build.json is not JSON ({e})") from e
    if not isinstance(obj, dict):
        raise DataError(f"{what}: build.json must be a JSON object, not {type(obj).__name__}")
    try:
        record = BuildRecord.model_validate(obj)
    except ValidationError as e:
        raise DataError(f"{what}: {_first_problem(e)}") from e
    return {**obj, "sampling": {**(obj.get("sampling") or {}),
                                **record.sampling.model_dump(include={"seed", "per_image",
                                                                      "distinct_language"})}}


def read_build_record(release: str | Path) -> dict[str, Any]:
    """A local release's ``build.json`` checked against the schema, ``{}`` when absent."""
    path = Path(release) / "build.json"
    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: unreadable build record ({e})") from e
    return parse_build_record(text, str(release))
