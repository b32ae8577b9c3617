"""``build.json`` has one schema (``core.build_record``): the readers check it and so does the
writer, which refuses a record that breaks it before writing anything."""

from __future__ import annotations

import json

import pytest

from core import release
from core.build_record import BuildRecord, read_build_record
from core.errors import DataError


def test_the_writer_checks_the_record_and_writes_nothing_bad(tmp_path):
    with pytest.raises(ValueError, match=r"build.json field sampling.seed"):
        release.write_metadata(tmp_path, "card", {"sampling": {"seed": "3"}}, "licence")
    assert list(tmp_path.iterdir()) == []
    release.write_metadata(tmp_path, "card", {"sampling": {"seed": 3}, "extra": [1]}, "licence")
    written = json.loads((tmp_path / "build.json").read_text())
    assert written == {"sampling": {"seed": 3}, "extra": [1], "format": release.FORMAT,
                       "format_version": release.FORMAT_VERSION}  # as given, nothing added
    assert read_build_record(tmp_path)["sampling"] == {"seed": 3, "per_image": None,
                                                       "distinct_language": False}


def test_the_reader_uses_the_same_schema(tmp_path):
    (tmp_path / "build.json").write_text(json.dumps({"format_version": "2"}))
    with pytest.raises(DataError, match="build.json field format_version"):
        read_build_record(tmp_path)
    assert BuildRecord.model_fields.keys() >= {"format", "format_version", "sampling"}
