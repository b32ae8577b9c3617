"""A re-push reconciles the project with the catalog (issue 21), against a real Label Studio:
after ``image_dedup`` ran again with another threshold, the tasks of groups that no longer
exist are retired, nobody is handed them by the labeling stream, and their answers are kept
but never counted; a tag push with another sample adds tasks only when asked.
"""

from __future__ import annotations

import json

import pytest

from annotation.pull import pull
from annotation.push import push
from annotation.status import status
from annotation.terms import TermDecision, record_term_review
from builder.image_dedup import add_dedup_group
from tests.annotation import synth
from tests.annotation.people import join

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _keep_all(n: int) -> list[dict]:
    return [{"from_name": f"decision_{i}", "to_name": f"image_{i}", "type": "choices",
             "value": {"choices": ["keep"]}} for i in range(n)]


def _rerun_dedup(cat) -> None:
    """What ``image_dedup`` with another threshold does to the synth catalog: group 1 is
    renumbered 11 with the same images, groups 2 and 3 merge into 12, group 4 dissolves."""
    with cat.tx() as con:
        synth.copy_group(con, 1, 11)
        synth.copy_group(con, 2, 12)
        con.execute("UPDATE items SET group_id=11 WHERE group_id=1")
        con.execute("UPDATE items SET group_id=12, status='needs_review', reason='similar'"
                    " WHERE group_id IN (2, 3)")
        con.execute("UPDATE items SET group_id=NULL, status='kept', reason='no near duplicate'"
                    " WHERE group_id=4")
        con.execute("DELETE FROM dedup_groups WHERE group_id IN (1, 2, 3, 4)")


def test_repush_retires_stale_tasks_and_the_stream_never_hands_them_out(label_studio, ls_conn):
    root = label_studio.document_root / "repush-work"
    cat, sha, items = synth.build(root)
    kw = dict(title="re-push test", document_root=str(label_studio.document_root))
    first = push(cat, ls_conn, "duplicates", **kw)
    assert (first.created, first.unchanged, first.changed, first.retired) == (4, 0, 0, 0)
    pid = first.project_id
    tid = {r["group_id"]: int(r["task_id"]) for r in cat.query("SELECT * FROM ls_tasks")}
    early = join(label_studio.url, label_studio.token, "early@example.com")
    early.annotate(tid[2], [*_keep_all(1), {**_keep_all(2)[1], "value": {"choices": ["remove"]}}])

    _rerun_dedup(cat)
    second = push(cat, ls_conn, "duplicates", **kw)
    # group 11 (ABC again) is the old group 1's task with the new number; 12 (DEFG) is new;
    # the tasks of groups 2, 3 (merged) and 4 (gone) are retired
    assert (second.created, second.unchanged, second.changed, second.retired) == (1, 0, 1, 3)
    assert "1 created, 0 unchanged, 1 changed, 3 retired" in second.summary()
    rows = {r["task_key"]: r for r in cat.query("SELECT * FROM ls_tasks")}
    retired = {int(r["task_id"]) for r in rows.values() if r["retired_at"]}
    assert retired == {tid[2], tid[3], tid[4]}
    live = {int(r["task_id"]) for r in rows.values() if not r["retired_at"]}
    new = next(int(r["task_id"]) for r in rows.values() if r["group_id"] == 12)
    assert live == {tid[1], new}
    renumbered = ls_conn.client.tasks.get(str(tid[1]))
    assert renumbered.data["group_id"] == 11 and renumbered.data["info"].startswith("Group 11:")
    for t in retired:  # still there with its answers, but counted as done by Label Studio
        task = ls_conn.client.tasks.get(str(t))
        assert (task.overlap, task.is_labeled) == (0, True)
    assert len(ls_conn.client.annotations.list(id=tid[2])) == 1

    # the labeling stream hands out the two live tasks and nothing else, to a new person and
    # to the one who answered a task that is now retired
    for who in (join(label_studio.url, label_studio.token, "late@example.com"), early):
        served = []
        while (task := who.next_task(pid)) is not None:
            assert task["id"] not in served, "handed the same task twice"
            served.append(task["id"])
            who.annotate(task["id"], _keep_all(len(task["data"]["images"])))
        assert sorted(served) == sorted(live)

    report = pull(cat, ls_conn, "duplicates")
    assert report["tasks_retired"] == 3
    assert report["stored"] == {"new": 5}  # the retired task's answer is kept ...
    kept_row = cat.query("SELECT decision FROM reviews WHERE task_id=? AND sha256=?",
                         (tid[2], sha["E"]))
    assert [r["decision"] for r in kept_row] == ["remove"]
    # ... and never counted: E has the two keeps of the live task 12 only
    (st, why), = {(r["status"], r["reason"]) for r in cat.query(
        "SELECT status, reason FROM items WHERE item_id IN (SELECT value FROM json_each(?))",
        (json.dumps(items["E"]),))}
    assert (st, why) == ("needs_review", "review: 2/3 annotators (keep 2, remove 0)")
    st_report = status(cat, ls_conn)[0]
    assert st_report["tasks"] == 2 and st_report["tasks_retired"] == 3

    # someone sets a retired task's overlap back by hand: the next push retires it again
    ls_conn.client.tasks.update(str(tid[3]), overlap=3, is_labeled=False)
    again = push(cat, ls_conn, "duplicates", **kw)  # a second re-push changes nothing else
    assert (again.created, again.unchanged, again.changed, again.retired) == (0, 2, 0, 3)
    assert ls_conn.client.tasks.get(str(tid[3])).overlap == 0
    with cat.tx() as con:  # group 4 comes back: its task is reopened, not created again
        add_dedup_group(con, "food", "needs_review", {}, kept_item_id=items["H"][0],
                        group_id=14)
        con.execute("UPDATE items SET group_id=14, status='needs_review' WHERE item_id IN"
                    " (SELECT value FROM json_each(?))", (json.dumps(items["H"] + items["I"]),))
    back = push(cat, ls_conn, "duplicates", **kw)
    assert (back.created, back.reopened, back.changed, back.retired) == (0, 1, 1, 2)
    assert ls_conn.client.tasks.get(str(tid[4])).overlap == 3
    cat.close()


def test_tag_push_adds_tasks_only_when_asked(label_studio, ls_conn):
    cat, sha, _ = synth.build(label_studio.document_root / "repush-tags")
    kw = dict(title="re-push tags", document_root=str(label_studio.document_root))
    first = push(cat, ls_conn, "tags", sample=2, seed=1, **kw)
    assert first.created == 2
    larger = push(cat, ls_conn, "tags", sample=3, seed=1, **kw)  # another sample: nothing added
    assert (larger.created, larger.unchanged, larger.not_added) == (0, 2, 1)
    assert "1 sampled images not added" in larger.summary() and "--add-tasks" in larger.summary()
    added = push(cat, ls_conn, "tags", sample=3, seed=1, add_tasks=True, **kw)
    assert (added.created, added.unchanged, added.not_added) == (1, 2, 0)
    with cat.tx() as con:  # T2's tagging is redone and fails: its task has no subject
        con.execute("UPDATE tags SET status='failed' WHERE sha256=?", (sha["T2"],))
    gone = push(cat, ls_conn, "tags", sample=3, seed=1, **kw)
    assert (gone.created, gone.unchanged, gone.retired) == (0, 2, 1)
    cat.close()


def test_query_term_push_retires_the_task_of_a_changed_term(label_studio, ls_conn):
    from annotation.query_review import push_queries

    cat, _, _ = synth.build(label_studio.document_root / "repush-terms")
    synth.build_terms(cat)
    kw = dict(countries=["PRT"], document_root=str(label_studio.document_root))
    (first,) = push_queries(cat, ls_conn, **kw)  # train and bus (market is reviewed already)
    assert (first.created, first.retired) == (2, 0)
    with cat.tx() as con:  # the queries stage proposes another term for bus
        con.execute("UPDATE query_terms SET native_term='autocarro' WHERE concept='bus' AND"
                    " country='PRT'")
    (second,) = push_queries(cat, ls_conn, **kw)
    assert (second.created, second.unchanged, second.changed, second.retired) == (1, 1, 0, 1)
    rows = {json.loads(r["data_json"])["proposed"]: r for r in cat.query(
        "SELECT * FROM ls_tasks WHERE kind='queries:pt-PT'")}
    assert rows["ônibus"]["retired_at"] and not rows["autocarro"]["retired_at"]
    # a pull corrected train to 'comboio' (its decision is what query_terms carries): the
    # task keeps its place although its key names the old term
    train = rows["trem"]
    with cat.tx() as con:
        con.execute("UPDATE query_terms SET native_term='comboio', source='reviewed' WHERE"
                    " concept='train' AND country='PRT'")
        record_term_review(con, train["project_id"], train["task_id"],
                           {"concept": "train", "country": "PRT", "locale": "pt-PT",
                            "proposed": "trem"},
                           TermDecision("corrected", "review: majority of 2", "comboio", 2),
                           applied=True)
    (third,) = push_queries(cat, ls_conn, **kw)
    assert (third.created, third.unchanged, third.changed, third.retired) == (0, 2, 0, 1)
    cat.close()
