"""Per-request record of LLM-driven stages (issue 6): one row per stage work item (a concept
round, a concept x language query request), with its status, the reason when it failed, and the
raw model text kept when the answer never validated."""

VERSION = 101

SQL = """
CREATE TABLE IF NOT EXISTS llm_requests (
    stage       TEXT NOT NULL,               -- concepts / queries / ...
    item        TEXT NOT NULL,               -- the stage's work item, e.g. 'round=1;batch=0'
    status      TEXT NOT NULL,               -- ok / failed / error
    reason      TEXT,
    raw         TEXT,                        -- last raw model text when the answer was invalid
    cache_key   TEXT,                        -- key in cache/llm.sqlite
    llm         TEXT NOT NULL,               -- gemini:MODEL / offline
    prompt_sha  TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    run_id      INTEGER,
    PRIMARY KEY (stage, item)
);
"""
