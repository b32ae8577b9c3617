"""The schema of a release's ``build.json``, checked wherever one is read (``benchmark run``
on a local release, ``triplets validate --release``): not an object, or a field of the wrong
type, is a :class:`~core.errors.DataError` (one line, exit 2), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import DataError


def _models() -> Any:
    from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

    class Sampling(BaseModel):
        model_config = ConfigDict(extra="allow")
        seed: StrictInt | None = None
        per_image: StrictInt | None = None
        distinct_language: StrictBool = False

    class BuildRecord(BaseModel):
        model_config = ConfigDict(extra="allow")
        format: StrictStr | None = None
        format_version: StrictInt | None = None
        exported_at: StrictStr | None = None
        package_version: StrictStr | None = None
        git_commit: StrictStr | None = None
        sampling: Sampling = Sampling()
        stage_runs: list[dict[str, Any]] = []
        numbers: dict[str, Any] = {}

    return BuildRecord


def parse_build_record(text: str, what: str) -> dict[str, Any]:
    """``build.json`` text as a dict whose known fields have their types, else DataError."""
    from pydantic import ValidationError

    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{what}: build.json is not JSON ({e})") from e
    if not isinstance(obj, dict):
        raise DataError(f"{what}: build.json must be a JSON object, not {type(obj).__name__}")
    try:
        record = _models().model_validate(obj)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top)"
        raise DataError(f"{what}: build.json field {where}: {first['msg']} "
                        f"({e.error_count()} problem(s))") from e
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
