"""Annotation (issues 14 and 15): native-speaker review of query terms, and review bookkeeping.

``ls_reviewers`` assigns reviewers (Label Studio e-mails) to a locale: Label Studio's community
edition shows every project to every user of the organization, so the assignment is enforced
by ``pull`` (answers of a reviewer not assigned to the locale are stored but not counted).
``term_reviews`` holds the decision of every pushed query-term task (one per Label Studio task:
a term changed after the push gets a new task) and whether it was written to ``query_terms``.
``reviews.answer`` keeps the text an annotator typed (a better query term).
``ls_projects.choices_json`` records the choices a project was pushed with (the tag check's
concepts), so a pulled answer outside them is rejected.
"""

VERSION = 301

SQL = """
CREATE TABLE IF NOT EXISTS ls_reviewers (
    locale      TEXT NOT NULL,                -- BCP-47 with region, e.g. pt-PT
    annotator   TEXT NOT NULL,                -- Label Studio e-mail
    assigned_at TEXT NOT NULL,
    PRIMARY KEY (locale, annotator)
);

CREATE TABLE IF NOT EXISTS term_reviews (
    project_id  INTEGER NOT NULL,
    task_id     INTEGER NOT NULL,
    concept     TEXT NOT NULL,
    country     TEXT NOT NULL,
    locale      TEXT NOT NULL,
    proposed    TEXT NOT NULL,                -- the term the task asked about
    outcome     TEXT NOT NULL,                -- accepted / corrected / unclear / pending /
                                              -- needs_review / stale
    term        TEXT,                         -- the reviewed term (accepted or corrected)
    reviewers   INTEGER NOT NULL DEFAULT 0,   -- counted reviewers who chose the outcome
    votes_json  TEXT NOT NULL,                -- {annotator: answer} of the counted reviewers
    reason      TEXT NOT NULL,
    applied     INTEGER NOT NULL DEFAULT 0,   -- 1 while query_terms carries this decision
    decided_at  TEXT,                         -- the latest counted answer's time
    run_id      INTEGER,
    PRIMARY KEY (project_id, task_id)
);
CREATE INDEX IF NOT EXISTS term_reviews_cc ON term_reviews(concept, country);

ALTER TABLE reviews ADD COLUMN answer TEXT;
ALTER TABLE ls_projects ADD COLUMN choices_json TEXT;
"""
