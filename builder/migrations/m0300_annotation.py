"""Annotation (issue 8): Label Studio projects and tasks pushed from the catalog, pull history.

``ls_projects`` remembers which Label Studio project holds each review kind (per server), so a
second push reuses it; ``ls_tasks`` maps every pushed task to its dedup group (duplicates) or
image (tags) and makes pushing idempotent (one task per key and project). ``reviews`` gains
the sha256 of the annotation result, which tells a changed annotation from an unchanged one,
and the pull that stored the row; older versions stay with ``current = 0`` (the history).
"""

VERSION = 300

SQL = """
CREATE TABLE IF NOT EXISTS ls_projects (
    kind          TEXT NOT NULL,              -- duplicates / tags
    server        TEXT NOT NULL,              -- LABEL_STUDIO_URL (no credentials)
    project_id    INTEGER NOT NULL,
    title         TEXT NOT NULL,
    model_version TEXT NOT NULL,              -- version of the pre-annotations
    config_sha    TEXT NOT NULL,              -- sha256 of the label config
    created_at    TEXT NOT NULL,
    PRIMARY KEY (kind, server)
);

CREATE TABLE IF NOT EXISTS ls_tasks (
    kind        TEXT NOT NULL,
    server      TEXT NOT NULL,
    project_id  INTEGER NOT NULL,
    task_key    TEXT NOT NULL,                -- 'group:<id>' or 'image:<sha256>'
    task_id     INTEGER NOT NULL,
    group_id    INTEGER,                      -- duplicates: the dedup group
    sha256      TEXT,                         -- tags: the image
    data_json   TEXT NOT NULL,                -- the task data as pushed
    pushed_at   TEXT NOT NULL,
    PRIMARY KEY (kind, server, project_id, task_key)
);
CREATE INDEX IF NOT EXISTS ls_tasks_task ON ls_tasks(project_id, task_id);

ALTER TABLE reviews ADD COLUMN result_sha TEXT;
ALTER TABLE reviews ADD COLUMN run_id INTEGER;
CREATE INDEX IF NOT EXISTS reviews_ann ON reviews(kind, project_id, annotation_id, current);
"""
