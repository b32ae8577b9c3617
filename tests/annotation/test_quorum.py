"""Which answers count and which use up a task (issue 21), with the in-process SDK stand-in:
an answer saved by another account, a half answer and a contradiction never use up the
quorum (the pull raises the task's overlap so Label Studio hands it out again), the first two
are not counted at all, and every such case is named (task, author, why, editor).
"""

from __future__ import annotations

import json

import pytest

from annotation.links import ImageLinks
from annotation.pull import format_report, pull
from annotation.push import duplicate_drafts
from annotation.quorum import AnswerState, progress, target_overlaps
from tests.annotation import synth
from tests.annotation.fakes import fake_connection, record_pushed

USERS = {1: "ann1@example.com", 2: "ann2@example.com", 3: "ann3@example.com",
         4: "ann4@example.com", 5: "ann5@example.com"}


def _ann(aid: int, user: int, *choices: str | None, editor: int | None = None) -> dict:
    res = [{"from_name": f"decision_{i}", "to_name": f"image_{i}", "type": "choices",
            "value": {"choices": [c]}} for i, c in enumerate(choices) if c is not None]
    return {"id": aid, "completed_by": user, "updated_by": editor or user,
            "updated_at": f"2026-01-0{user}T00:00:00Z", "result": res}


@pytest.fixture()
def pushed(tmp_path):
    cat, sha, items = synth.build(tmp_path / "wd")
    links = ImageLinks(cat.workdir.images_dir, "local-files", str(tmp_path))
    drafts, _ = duplicate_drafts(cat, links, ("needs_review",))
    record_pushed(cat, "duplicates", 7, drafts, 101)  # groups 1..4: tasks 101..104
    conn, client = fake_connection(USERS)
    yield cat, conn, client, items
    cat.close()


def _items(cat, ids):
    return {(r["status"], r["reason"]) for r in cat.query(
        "SELECT status, reason FROM items WHERE item_id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),))}


def test_only_counted_answers_use_up_a_task(pushed):
    cat, conn, client, items = pushed
    client.set_tasks([
        # group 2 (D E): ann1 and ann2 answer; ann3's answer was overwritten by ann4 (remove E);
        # ann5 leaves E without a choice (a half answer)
        {"id": 102, "annotations": [_ann(1, 1, "keep", "remove"), _ann(2, 2, "keep", "remove"),
                                    _ann(3, 3, "keep", "keep", editor=4),
                                    _ann(4, 5, "keep", None)]},
        # group 3 (F G): three complete answers
        {"id": 103, "annotations": [_ann(5 + u, u, "keep", "keep") for u in (1, 2, 3)]},
        {"id": 101, "annotations": []}, {"id": 104, "annotations": []},
    ])
    report = pull(cat, conn, "duplicates")
    # D and E have the two counted answers only: 2/3 (the overwritten one and the half answer
    # decide nothing)
    assert _items(cat, items["D"]) == {("needs_review", "review: 2/3 annotators (keep 2, remove 0)")}
    assert _items(cat, items["E"]) == {("needs_review", "review: 2/3 annotators (keep 0, remove 2)")}
    assert _items(cat, items["F"]) == {("kept", "review: majority of 3 (keep 3, remove 0)")}
    assert report["answers_not_counted"] == [
        {"task": 102, "author": "ann3@example.com", "why": "saved by another account",
         "editor": "ann4@example.com"},
        {"task": 102, "author": "ann5@example.com",
         "why": "half answer (an image with neither keep nor remove)"}]
    # task 102: four accounts answered, two count: overlap 3 + 2 = 5, so Label Studio hands it
    # to one more person; the other tasks keep the project's 3
    assert client.updates == [(102, {"overlap": 5, "is_labeled": False})]
    assert report["tasks_with_overlap_changed"] == 1
    text = format_report(report)
    assert ("  task 102: ann3@example.com: saved by another account (last saved by "
            "ann4@example.com)") in text
    before = synth.snapshot(cat)
    pull(cat, conn, "duplicates")  # nothing new: no second update, nothing changed
    assert client.updates == [(102, {"overlap": 5, "is_labeled": False})] and synth.snapshot(cat) == before
    # ann3 saves their own answer again: it counts, and the task needs one answer less
    client.set_tasks([
        {"id": 102, "annotations": [_ann(1, 1, "keep", "remove"), _ann(2, 2, "keep", "remove"),
                                    _ann(3, 3, "keep", "keep"), _ann(4, 5, "keep", None)]},
        {"id": 103, "annotations": [_ann(5 + u, u, "keep", "keep") for u in (1, 2, 3)]},
        {"id": 101, "annotations": []}, {"id": 104, "annotations": []},
    ])
    again = pull(cat, conn, "duplicates")
    assert again["stored"]["changed"] == 1  # the editor changed, the result did not
    assert client.updates[-1] == (102, {"overlap": 4, "is_labeled": True})
    assert _items(cat, items["E"]) == {("removed", "review: majority of 3 (keep 1, remove 2)")}


def test_target_overlaps_and_progress():
    def st(task, who, state="counted", editor=None):
        return AnswerState(task, hash((task, who)) % 10**6, who, state, editor)

    states = [st(1, "a"), st(1, "b"), st(1, "x", "not assigned"), st(2, "a"),
              st(2, "c", "skipped"), st(3, "b", "contradiction"), st(3, "y", "not assigned"),
              st(3, "z", "saved by another account", "q")]
    # task 1: 3 answered, 2 count -> 2 + 1; task 2: the skip counts nowhere -> 2; task 3: 3 + 2
    assert target_overlaps([1, 2, 3, 4], states, 2) == {1: 3, 2: 2, 3: 5, 4: 2}
    got = progress({1, 2, 3, 4}, states, 2, {1: None, 3: None}, ["a", "b", "c"])
    # task 1 is done (a, b count); 2, 3, 4 are open. Stuck: 3 accounts answered task 3 while
    # its overlap (never raised) is 2 and none counts; task 2 has one answer of 2: not full
    assert got["open_tasks"] == 3
    assert got["per_annotator"]["a"] == {"done": 2, "remaining": 2}
    assert got["per_annotator"]["b"] == {"done": 1, "remaining": 2}
    assert got["per_annotator"]["c"] == {"done": 0, "remaining": 3}
    assert got["stuck"] == [{"task": 3, "counted": 0, "answered": 3, "why": [
        "b: contradiction", "y: not assigned", "z: saved by another account by q"]}]
