"""Blind, counted answers against a real Label Studio (issue 21): the labeling stream shows a
person no one else's answer; a half answer and an answer another account overwrote do not
use up the task (after a pull Label Studio hands it out again), are not counted, and are named
in ``pull`` and ``status`` with task, author and editor; ``status`` counts what ``pull``
counts. The people answer through the API as themselves (tests/annotation/people.py).
"""

from __future__ import annotations

import pytest

from annotation.pull import format_report, pull
from annotation.push import push
from annotation.status import format_status, status
from tests.annotation import synth
from tests.annotation.people import join

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _choices(*values: str | None) -> list[dict]:
    return [{"from_name": f"decision_{i}", "to_name": f"image_{i}", "type": "choices",
             "value": {"choices": [v]}} for i, v in enumerate(values) if v is not None]


def test_blind_stream_and_answers_that_do_not_use_up_a_task(label_studio, ls_conn):
    root = label_studio.document_root / "counting-work"
    cat, sha, items = synth.build(root)
    with cat.tx() as con:  # group 2 (D E) only, two answers per task
        con.execute("UPDATE dedup_groups SET status='auto' WHERE group_id IN (1, 3, 4)")
    rep = push(cat, ls_conn, "duplicates", title="counting test", annotators=2,
               document_root=str(label_studio.document_root))
    pid, tid = rep.project_id, int(cat.query("SELECT task_id FROM ls_tasks")[0][0])
    project = ls_conn.client.projects.get(pid)
    assert (project.show_annotation_history, project.show_collab_predictions,
            project.reveal_preannotations_interactively) == (False, True, False)
    a, b, c, d = (join(label_studio.url, label_studio.token, f"count{n}@example.com")
                  for n in (1, 2, 3, 4))
    assert a.next_task(pid)["id"] == tid
    first = a.annotate(tid, _choices("keep", "remove"))
    handed = b.next_task(pid)
    assert handed["id"] == tid
    assert handed["annotations"] == []  # blind: a's answer is not shown to b ...
    assert [p["model_version"] for p in handed["predictions"]] == ["xcm3-image-dedup"]
    b.annotate(tid, _choices("keep", None))  # ... and b leaves E with neither choice
    assert c.next_task(pid) is None  # Label Studio counts 2 of 2: the task is stuck

    st = status(cat, ls_conn)[0]
    assert st["annotated_by"] == {"0": 0, "1": 1, "2": 0, "3+": 0}  # what pull will count
    assert st["stuck"] == [{"task": tid, "counted": 1, "answered": 2, "why": [
        "count2@example.com: half answer (an image with neither keep nor remove)"]}]
    assert f"  stuck: task {tid}: 2 answered, 1 counted" in format_status([st])

    report = pull(cat, ls_conn, "duplicates", min_annotators=2)
    assert report["answers_not_counted"] == [
        {"task": tid, "author": "count2@example.com",
         "why": "half answer (an image with neither keep nor remove)"}]
    assert ls_conn.client.tasks.get(str(tid)).overlap == 3
    assert c.next_task(pid)["id"] == tid  # back in the queue
    # c opens a's answer (as anyone can from the Data Manager) and overwrites it, then answers
    c.update(first, _choices("remove", "remove"))
    c.annotate(tid, _choices("keep", "keep"))
    second = pull(cat, ls_conn, "duplicates", min_annotators=2)
    assert {"task": tid, "author": "count1@example.com", "why": "saved by another account",
            "editor": "count3@example.com"} in second["answers_not_counted"]
    assert (f"  task {tid}: count1@example.com: saved by another account (last saved by "
            "count3@example.com)") in format_report(second)
    # only c's own answer counts: D and E wait with 1/2; the task takes two more people
    assert {(r["status"], r["reason"]) for r in cat.query(
        "SELECT status, reason FROM items WHERE item_id=?", (items["E"][0],))} == {
        ("needs_review", "review: 1/2 annotators (keep 1, remove 0)")}
    assert ls_conn.client.tasks.get(str(tid)).overlap == 4
    assert d.next_task(pid)["id"] == tid
    st = status(cat, ls_conn, min_annotators=2)[0]
    assert st["annotated_by"]["1"] == 1 and st["stuck"] == []
    assert st["per_annotator"]["count4@example.com"] == {"done": 0, "remaining": 1}
    assert st["per_annotator"]["count3@example.com"] == {"done": 1, "remaining": 0}
    # the manager raises the answers per task in Label Studio's settings: Label Studio resets
    # the task's overlap to 3; the next pull sets it from the live quorum again: 3 + 2
    ls_conn.client.projects.update(pid, maximum_annotations=3)
    assert ls_conn.client.tasks.get(str(tid)).overlap == 3
    third = pull(cat, ls_conn, "duplicates", min_annotators=2)
    assert third["quorum"] == 3 and third["tasks_with_overlap_changed"] == 1
    assert ls_conn.client.tasks.get(str(tid)).overlap == 5
    ls_conn.client.tasks.update(str(tid), overlap=3)  # reset behind the catalog's back: the
    pull(cat, ls_conn, "duplicates", min_annotators=2)  # pull reads the server's overlap
    assert ls_conn.client.tasks.get(str(tid)).overlap == 5
    cat.close()
