"""Annotation (issue 21): a re-push retires the tasks whose subject is gone or changed.

``ls_tasks.retired_at`` / ``retired_reason``: set when a push finds that the catalog no longer
asks for a task (its dedup group was renumbered with other members, its image lost its tags,
its term changed). A retired task stays in Label Studio with its answers (the history), is
never handed out again (its overlap is 0) and its answers are never counted; a push that
finds the subject again reopens it (both columns back to NULL).

``ls_tasks.overlap``: the overlap a push or pull last set on the task (NULL: the project's
``maximum_annotations``): raised by the answers that do not count, so such answers never use
up a task (:mod:`annotation.quorum`). ``reviews.editor``: the account that last saved an
annotation when it is not its author (such an answer is stored, named and not counted).
"""

VERSION = 305

SQL = """
ALTER TABLE ls_tasks ADD COLUMN retired_at TEXT;
ALTER TABLE ls_tasks ADD COLUMN retired_reason TEXT;
ALTER TABLE ls_tasks ADD COLUMN overlap INTEGER;
ALTER TABLE reviews ADD COLUMN editor TEXT;
"""
