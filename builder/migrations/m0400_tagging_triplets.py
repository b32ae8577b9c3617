"""Tagging and triplets (issue 9): tag attempts, Gemini Batch API jobs, triplet round."""

VERSION = 400

SQL = """
ALTER TABLE tags ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;  -- requests that covered it
ALTER TABLE tags ADD COLUMN updated_at TEXT;

-- One Gemini Batch API job of the tagging stage; an interrupted run picks it up by name.
CREATE TABLE IF NOT EXISTS tag_batch_jobs (
    job_name      TEXT PRIMARY KEY,           -- the API's resource name, e.g. batches/123
    model         TEXT NOT NULL,
    prompt_sha    TEXT NOT NULL,
    phase         TEXT NOT NULL,              -- first (groups) / retry (single images)
    state         TEXT NOT NULL,              -- last JOB_STATE_* seen, or collected
    requests_json TEXT NOT NULL,              -- [[sha256, ...] per request, request order]
    submitted_at  TEXT NOT NULL,
    updated_at    TEXT,
    collected_at  TEXT,
    run_id        INTEGER
);
"""
