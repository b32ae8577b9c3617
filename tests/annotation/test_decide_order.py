"""Decisions depend only on the set of counted answers, never on task order or grouping.

A seeded permutation loop (no hypothesis in the environment): the same answers, spread over
tasks in another order, with groups split or merged into other tasks and empty tasks added,
must leave ``items`` and ``dedup_groups`` exactly as the plain case does.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from annotation.decide import apply_duplicate_decisions, image_votes, tag_votes
from annotation.reviews import ReviewRow
from annotation.terms import latest_answers
from tests.annotation import synth

SHOWN = {1: "ABC", 2: "DE", 3: "FG", 4: "HI"}  # the images each group's task shows
PEOPLE = ["ana@example.com", "bo@example.com", "cy@example.com", "di@example.com"]
DECISIONS = ["keep", "remove", "confirmed_keep", "confirmed_remove", "none_duplicates",
             "unanswered", "skipped", "contradiction"]


def _image(letter: str, sha: dict[str, str], items: dict[str, list[int]]) -> dict:
    return {"sha256": sha[letter], "item_ids": items[letter]}


def _tasks(layout: list[str], sha, items) -> list[dict]:
    """``ls_tasks`` rows: one task per string of image letters (task ids 100, 101, ...)."""
    return [{"task_id": 100 + i, "data_json": json.dumps(
        {"images": [_image(x, sha, items) for x in letters]})} for i, letters in enumerate(layout)]


def _answers(rng: random.Random) -> list[tuple[str, str, str, str]]:
    """``(letter, annotator, decision, time)``: each person answers some images, sometimes
    twice (a later change); some images get no answer at all."""
    out = []
    for letters in SHOWN.values():
        for letter in letters:
            for who in rng.sample(PEOPLE, rng.randint(0, 4)):
                for _ in range(rng.choice([1, 1, 2])):
                    t = f"2026-01-0{rng.randint(1, 9)}T00:00:{rng.randint(10, 59)}Z"
                    out.append((letter, who, rng.choice(DECISIONS), t))
    return out


def _rows(answers, layout: list[str], sha, rng: random.Random) -> list[ReviewRow]:
    """The answers as review rows of the tasks of ``layout`` that show each image (a random
    one of them when several do), in a shuffled order."""
    rows = []
    for n, (letter, who, dec, t) in enumerate(answers):
        tasks = [100 + i for i, ls in enumerate(layout) if letter in ls]
        rows.append(ReviewRow(task_id=rng.choice(tasks), annotation_id=1000 + n, annotator=who,
                              item_id=None, sha256=sha[letter], decision=dec, annotated_at=t,
                              result_sha="x"))
    rng.shuffle(rows)
    return rows


def _layouts(rng: random.Random) -> list[list[str]]:
    base = list(SHOWN.values())
    permuted = rng.sample(base, len(base))
    split = ["A", "BC", "D", "E", "FG", "HI"]  # group 1 and 2 split into smaller tasks
    merged = ["ABCDE", "FGHI"]  # two groups per task
    empty = [*base, "ABC", "DE", ""]  # newer tasks for the same images, nobody answers them
    return [permuted, split, rng.sample(merged, 2), rng.sample(empty, len(empty))]


def _outcome(root: Path, layout: list[str], answers, rng: random.Random) -> dict:
    cat, sha, items = synth.build(root)
    tasks = _tasks([x for x in layout if x], sha, items) + (
        [{"task_id": 999, "data_json": json.dumps({"images": []})}] if "" in layout else [])
    rows = _rows(answers, [x for x in layout if x], sha, rng)
    apply_duplicate_decisions(cat, tasks, image_votes(rows), 3)
    snap = {
        "items": [tuple(r) for r in cat.query(
            "SELECT item_id, status, reason FROM items ORDER BY item_id")],
        "groups": [tuple(r) for r in cat.query(
            "SELECT group_id, status, kept_item_id FROM dedup_groups ORDER BY group_id")],
    }
    cat.close()
    return snap


def test_duplicate_decisions_do_not_depend_on_task_order_or_grouping(tmp_path):
    for seed in range(6):
        rng = random.Random(seed)
        answers = _answers(rng)
        want = _outcome(tmp_path / f"{seed}-base", list(SHOWN.values()), answers, rng)
        for n, layout in enumerate(_layouts(rng)):
            got = _outcome(tmp_path / f"{seed}-{n}", layout, answers, rng)
            assert got == want, (seed, layout)


def test_a_newer_unanswered_task_does_not_undo_a_majority(tmp_path):
    """The reported case: three votes, then a newer task for the same images nobody
    answered; the images stay decided."""
    cat, sha, items = synth.build(tmp_path)
    rows = [ReviewRow(100, 10 + i, who, None, sha[x], dec, "2026-01-01T00:00:00Z", "x")
            for i, who in enumerate(PEOPLE[:3])
            for x, dec in (("D", "keep"), ("E", "remove"))]
    tasks = _tasks(["DE", "DE"], sha, items)  # task 101: the newer one, no answers
    for order in (tasks, tasks[::-1]):
        apply_duplicate_decisions(cat, order, image_votes(rows), 3)
        got = {r["item_id"]: (r["status"], r["reason"]) for r in cat.query(
            "SELECT item_id, status, reason FROM items WHERE item_id IN (?, ?)",
            (items["D"][0], items["E"][0]))}
        assert got == {items["D"][0]: ("kept", "review: majority of 3 (keep 3, remove 0)"),
                       items["E"][0]: ("removed", "review: majority of 3 (keep 0, remove 3)")}
        assert cat.query("SELECT status FROM dedup_groups WHERE group_id=2")[0][0] == "reviewed"


def test_tag_and_term_answers_do_not_depend_on_row_order():
    rows = [ReviewRow(7, i, who, None, "s1", json.dumps(tags), t, "x", None)
            for i, (who, tags, t) in enumerate([("ana", ["food"], "2026-01-02"),
                                                ("ana", ["dance"], "2026-01-01"),
                                                ("bo", [], "2026-01-01")])]
    for order in (rows, rows[::-1]):
        assert tag_votes(order) == {"s1": {"ana": ["food"], "bo": []}}
    terms = [ReviewRow(7, 1, "Rui@Example.com", None, None, "correct", "2026-01-02", "x"),
             ReviewRow(7, 2, "Rui@Example.com", None, None, "unclear", "2026-01-01", "x")]
    for order in (terms, terms[::-1]):
        answers, uncounted = latest_answers(order, ["rui@example.com"])
        assert {a: x.decision for a, x in answers[7].items()} == {"Rui@Example.com": "correct"}
        assert not uncounted
