"""Pull faults (issue 15): a wrong or broken export never retires stored human decisions.

Unit level with an in-process SDK stand-in (tests/annotation/fakes.py); the integration tests
repeat the refusal against a real Label Studio.
"""

from __future__ import annotations

import json

import pytest

from annotation.cli import main
from annotation.client import AnnotationError
from annotation.exports import check_tasks, decode_export
from annotation.links import ImageLinks
from annotation.pull import pull
from annotation.push import duplicate_drafts
from tests.annotation import synth
from tests.annotation.fakes import fake_connection, record_pushed

USERS = {1: "ann1@example.com", 2: "ann2@example.com", 3: "ann3@example.com"}


def _ann(aid: int, user: int, *choices: str, origin: str | None = None) -> dict:
    res = [{"from_name": f"decision_{i}", "to_name": f"image_{i}", "type": "choices",
            "value": {"choices": [c]}, **({"origin": origin} if origin else {})}
           for i, c in enumerate(choices)]
    return {"id": aid, "completed_by": user, "updated_at": f"2026-01-0{user}T00:00:00Z",
            "result": res}


@pytest.fixture()
def pulled(tmp_path):
    """A catalog whose duplicate tasks (ids 101..104) were pulled once: groups 1 and 2
    decided by three annotators."""
    cat, sha, items = synth.build(tmp_path / "wd")
    links = ImageLinks(cat.workdir.images_dir, "local-files", str(tmp_path))
    drafts, _ = duplicate_drafts(cat, links, ("needs_review",))
    tid = record_pushed(cat, "duplicates", 7, drafts, 101)
    conn, client = fake_connection(USERS)
    tasks = [
        {"id": 101, "annotations": [_ann(1, 1, "keep", "remove", "keep"),
                                    _ann(2, 2, "keep", "remove", "remove"),
                                    _ann(3, 3, "keep", "remove", "keep")]},
        {"id": 102, "annotations": [_ann(4 + u, u, "keep", "remove") for u in (1, 2, 3)]},
        {"id": 103, "annotations": []}, {"id": 104, "annotations": []},
    ]
    client.set_tasks(tasks)
    report = pull(cat, conn, "duplicates")
    assert report["stored"] == {"new": 6}
    assert client.exported == [(7, True)]  # with the tasks nobody annotated
    yield cat, conn, client, items, tasks, tid
    cat.close()


def _decisions(cat) -> dict[int, tuple[str, str]]:
    return {r["item_id"]: (r["status"], r["reason"]) for r in cat.query("SELECT * FROM items")}


@pytest.mark.parametrize("export", [b"[]", b"  ", json.dumps(
    [{"id": 9001, "annotations": [{"id": 77, "completed_by": 1, "result": []}]}]).encode()])
def test_an_export_matching_no_pushed_task_is_refused(pulled, export):
    cat, conn, client, items, _, _ = pulled
    before = synth.snapshot(cat)
    runs = cat.query("SELECT COUNT(*) FROM stage_runs")[0][0]
    client.export = export
    with pytest.raises(AnnotationError) as exc:
        pull(cat, conn, "duplicates")
    msg = str(exc.value)
    assert "\n" not in msg and "nothing was changed" in msg
    if export.strip():
        assert "matches none of the 4 tasks pushed" in msg
    assert synth.snapshot(cat) == before  # no decision retired, no history touched
    assert cat.query("SELECT COUNT(*) FROM stage_runs")[0][0] == runs
    assert _decisions(cat)[items["B"][0]] == ("removed", "review: majority of 3 (keep 0, remove 3)")


def test_a_partial_export_changes_only_what_it_contains(pulled, tmp_path):
    cat, conn, client, items, tasks, _ = pulled
    # group 2 only, where ann3 changed their mind on E; group 1 is not in the export
    changed = {"id": 102, "annotations": [_ann(5, 1, "keep", "remove"), _ann(6, 2, "keep", "keep"),
                                          _ann(7, 3, "keep", "keep")]}
    f = tmp_path / "partial.json"
    f.write_text(json.dumps([changed]))
    report = pull(cat, conn, "duplicates", export_file=f)
    assert report["stored"] == {"changed": 2, "unchanged": 1}
    assert report["tasks_in_export"] == 1
    dec = _decisions(cat)
    assert dec[items["E"][0]] == ("kept", "review: majority of 3 (keep 2, remove 1)")
    assert dec[items["B"][0]] == ("removed", "review: majority of 3 (keep 0, remove 3)")
    assert cat.query("SELECT COUNT(*) FROM reviews WHERE task_id=101 AND current=1")[0][0] == 9
    # a task in the export without an annotation it had: that annotation was deleted
    f.write_text(json.dumps([{"id": 101, "annotations": tasks[0]["annotations"][:2]}]))
    report = pull(cat, conn, "duplicates", export_file=f)
    assert report["stored"] == {"deleted in Label Studio": 1, "unchanged": 2}
    assert dec[items["E"][0]] == _decisions(cat)[items["E"][0]]


def test_contradiction_and_confirmed_proposal_are_never_a_silent_decision(pulled):
    cat, conn, client, items, tasks, _ = pulled
    none = {"from_name": "group", "to_name": "group_info", "type": "choices",
            "value": {"choices": ["none_duplicates"]}}
    contradictory = _ann(3, 3, "keep", "remove", "remove", origin="prediction")
    contradictory["result"].append(none)
    tasks[0]["annotations"][2] = contradictory
    # group 2: all three submitted the proposal (keep D, remove E) unchanged
    tasks[1]["annotations"] = [_ann(4 + u, u, "keep", "remove", origin="prediction")
                               for u in (1, 2, 3)]
    client.set_tasks(tasks)
    report = pull(cat, conn, "duplicates")
    dec = _decisions(cat)
    for letter in "ABC":  # the contradictory answer blocks the group until it is corrected
        assert dec[items[letter][0]][0] == "needs_review"
        assert "contradictory answer by ann3@example.com" in dec[items[letter][0]][1]
    assert cat.query("SELECT status FROM dedup_groups WHERE group_id=1")[0][0] == "needs_review"
    assert dec[items["E"][0]] == (
        "removed", "review: majority of 3 (keep 0, remove 3; 3 confirmed the proposal unchanged)")
    stored = {r["decision"] for r in cat.query(
        "SELECT decision FROM reviews WHERE task_id=102 AND current=1")}
    assert stored == {"confirmed_keep", "confirmed_remove"}
    assert report["annotators"]["ann3@example.com"]["contradiction"] == 3


@pytest.mark.parametrize("blob, words", [
    (b'[{"id": 1, "annotations": [{"id": 2, "res', "is not valid JSON"),
    (b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head></html>",
     "is an HTML page, not a JSON export ('502 Bad Gateway')"),
    (b'[{"id": 1, "annotations": [{"result": []}]}]', "task 1, annotation 1 has no id"),
    (b'[{"id": "abc", "annotations": []}]', "task 1 has id 'abc', not a number"),
    (b'{"detail": "Authentication credentials were not provided."}',
     "is not a JSON list of tasks (got dict: Authentication credentials"),
    (b'[{"id": 4}]', "task 4 has no 'annotations' list"),
    (b'[{"id": 4, "annotations": [{"id": 5, "result": "keep"}]}]', "'result' is not a list"),
    (b"\xff\xfe[]", "is not UTF-8 text"),
    (b"", "is empty"),
])
def test_broken_exports_are_one_line(blob, words):
    with pytest.raises(AnnotationError) as exc:
        decode_export(blob, "the export of project 3")
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_export_ids_are_numbers():
    assert check_tasks([{"id": "12", "annotations": [{"id": 3}]}], "x") == [
        {"id": 12, "annotations": [{"id": 3}]}]
    with pytest.raises(AnnotationError, match="has id True, not a number"):
        check_tasks([{"id": True, "annotations": []}], "x")


@pytest.mark.parametrize("blob, words", [
    (b'[{"id": 1, "annotations": [', "is not valid JSON"),
    (b"<html><body>Server Error (500)</body></html>", "is an HTML page"),
    (b'[{"id": 1, "annotations": [{"completed_by": 1, "result": []}]}]', "has no id"),
    (b'[{"id": "one", "annotations": []}]', "not a number"),
])
def test_cli_pull_of_a_broken_export_file_is_one_line_exit_2(tmp_path, capsys, blob, words,
                                                             monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    f = tmp_path / "export.json"
    f.write_bytes(blob)
    assert main(["pull", "--workdir", str(tmp_path / "wd"), "--kind", "duplicates",
                 "--export-file", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err
    assert not (tmp_path / "wd").exists()  # nothing created before the input was checked
    assert main(["pull", "--workdir", str(tmp_path / "wd"), "--kind", "duplicates",
                 "--export-file", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the export file" in capsys.readouterr().err


def test_pull_of_chosen_locales_never_widens_to_all(tmp_path, capsys, monkeypatch):
    """``--countries`` names locales through countries.csv; a locale with no project is one
    line, never 'every locale'; a non-queries pull refuses ``--countries``."""
    from annotation.projects import record_project
    from annotation.pull import _project_keys
    from builder.catalog import Catalog
    from builder.workdir import WorkDir

    with Catalog(WorkDir.open(tmp_path / "wd")) as cat:
        with cat.tx() as con:
            for loc, pid in (("pt-PT", 5), ("es-ES", 6)):
                record_project(con, f"queries:{loc}", "http://s", pid, loc, "v", "x",
                               created_at="now")
        assert _project_keys(cat, "http://s", "queries", ["pt-PT"]) == [("queries:pt-PT", 5)]
        assert len(_project_keys(cat, "http://s", "queries", None)) == 2
        with pytest.raises(AnnotationError, match="for nothing|no query-term project"):
            _project_keys(cat, "http://s", "queries", [])
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    assert main(["pull", "--workdir", str(tmp_path / "wd"), "--kind", "duplicates",
                 "--countries", "PRT"]) == 2
    assert "--countries applies to --kind queries only" in capsys.readouterr().err
