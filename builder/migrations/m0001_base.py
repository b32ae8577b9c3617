"""Base schema: stage runs, concepts, queries, searches, downloads, images, items, dedup,
reviews, tags, triplets. Per-(image, concept, country) status lives in ``items``."""

VERSION = 1

SQL = """
CREATE TABLE IF NOT EXISTS stage_runs (
    run_id          INTEGER PRIMARY KEY AUTOINCREMENT,
    stage           TEXT NOT NULL,
    params_json     TEXT NOT NULL,            -- parameters (no secrets)
    fingerprint     TEXT NOT NULL,            -- sha256 of stage, params and input fingerprints
    status          TEXT NOT NULL,            -- running / done / failed / interrupted
    counts_json     TEXT,                     -- counts by status (and by country / concept)
    summary         TEXT,                     -- the one-screen summary printed at the end
    usage_json      TEXT,                     -- LLM token usage and API calls, summed
    package_version TEXT NOT NULL,
    started_at      TEXT NOT NULL,
    ended_at        TEXT
);

CREATE TABLE IF NOT EXISTS concepts (
    name         TEXT PRIMARY KEY,
    source       TEXT NOT NULL,               -- curated / generated
    status       TEXT NOT NULL,               -- candidate / kept / merged / dropped
    merged_into  TEXT,                        -- representative when status = merged
    similarity   REAL,                        -- cosine to the representative when merged
    reason       TEXT,
    run_id       INTEGER
);

CREATE TABLE IF NOT EXISTS concept_instances (
    concept  TEXT NOT NULL,
    country  TEXT NOT NULL,                   -- ISO alpha-3
    round    INTEGER NOT NULL,
    instance TEXT NOT NULL,
    run_id   INTEGER,
    PRIMARY KEY (concept, country, round)
);

CREATE TABLE IF NOT EXISTS queries (
    concept       TEXT NOT NULL,
    country       TEXT NOT NULL,
    kind          TEXT NOT NULL,              -- english / native
    language      TEXT NOT NULL,              -- BCP-47 of the query text
    text          TEXT NOT NULL,
    native_term   TEXT,                       -- bare concept term in the native language
    source        TEXT NOT NULL,              -- table / generated / offline
    status        TEXT NOT NULL DEFAULT 'ok',
    reason        TEXT,
    run_id        INTEGER,
    PRIMARY KEY (concept, country, kind)
);

CREATE TABLE IF NOT EXISTS searches (
    search_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    concept     TEXT NOT NULL,
    country     TEXT NOT NULL,
    language    TEXT NOT NULL,
    kind        TEXT NOT NULL,                -- english / native / folder / urls
    query_text  TEXT NOT NULL,
    backend     TEXT NOT NULL,                -- ddgs:duckduckgo / folder / urls
    region      TEXT,
    status      TEXT NOT NULL,                -- pending / ok / failed / empty
    reason      TEXT,
    n_results   INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0,
    searched_at TEXT,
    run_id      INTEGER,
    UNIQUE (concept, country, kind, backend)
);

CREATE TABLE IF NOT EXISTS search_results (
    search_id  INTEGER NOT NULL REFERENCES searches(search_id),
    rank       INTEGER NOT NULL,              -- raw 1-based rank from the backend
    image_url  TEXT NOT NULL,
    page_url   TEXT,
    title      TEXT,
    width      INTEGER,
    height     INTEGER,
    raw_json   TEXT NOT NULL,                 -- every field the backend returned
    PRIMARY KEY (search_id, rank)
);

CREATE TABLE IF NOT EXISTS downloads (
    url           TEXT PRIMARY KEY,
    status        TEXT NOT NULL,              -- ok / duplicate / http_error / timeout / ...
    reason        TEXT,
    http_status   INTEGER,
    final_url     TEXT,
    sha256        TEXT,
    bytes         INTEGER,
    content_type  TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    fetched_at    TEXT,
    run_id        INTEGER
);

CREATE TABLE IF NOT EXISTS images (
    sha256     TEXT PRIMARY KEY,
    ext        TEXT NOT NULL,
    format     TEXT NOT NULL,                 -- Pillow format name
    width      INTEGER NOT NULL,
    height     INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    phash      TEXT,
    first_seen TEXT NOT NULL
);

-- One row per (search result) occurrence: the image as found for a concept and country.
CREATE TABLE IF NOT EXISTS items (
    item_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    search_id   INTEGER NOT NULL REFERENCES searches(search_id),
    rank        INTEGER NOT NULL,
    concept     TEXT NOT NULL,
    country     TEXT NOT NULL,
    language    TEXT NOT NULL,
    query_text  TEXT NOT NULL,
    url         TEXT NOT NULL,
    sha256      TEXT,                         -- null until downloaded
    status      TEXT NOT NULL,                -- pending / ok / failed / duplicate / near_duplicate
                                              -- / needs_review / kept / removed
    reason      TEXT,
    group_id    INTEGER,                      -- near-duplicate group
    updated_at  TEXT,
    UNIQUE (search_id, rank)
);
CREATE INDEX IF NOT EXISTS items_sha ON items(sha256);
CREATE INDEX IF NOT EXISTS items_cc ON items(concept, country);

CREATE TABLE IF NOT EXISTS dedup_groups (
    group_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    concept       TEXT NOT NULL,
    kept_item_id  INTEGER,
    status        TEXT NOT NULL,              -- auto / needs_review / reviewed
    evidence_json TEXT NOT NULL,              -- member pairs with phash distance / cosine
    run_id        INTEGER
);

CREATE TABLE IF NOT EXISTS reviews (
    review_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT NOT NULL,              -- duplicates / tags
    project_id    INTEGER,
    task_id       INTEGER NOT NULL,
    annotation_id INTEGER NOT NULL,
    annotator     TEXT NOT NULL,
    item_id       INTEGER,
    sha256        TEXT,
    decision      TEXT NOT NULL,              -- keep / remove / none_duplicates / tag list json
    annotated_at  TEXT,
    pulled_at     TEXT NOT NULL,
    current       INTEGER NOT NULL DEFAULT 1  -- 0 once a later version of the annotation exists
);

CREATE TABLE IF NOT EXISTS tags (
    sha256      TEXT PRIMARY KEY,
    tags_json   TEXT,                         -- ordered concept list (priority order)
    status      TEXT NOT NULL,                -- ok / failed / refused
    reason      TEXT,
    raw         TEXT,                         -- raw model text when it failed validation
    model       TEXT,
    prompt_sha  TEXT,
    run_id      INTEGER
);

CREATE TABLE IF NOT EXISTS triplets (
    triplet_id             TEXT PRIMARY KEY,
    seed                   INTEGER NOT NULL,
    query_item_id          INTEGER NOT NULL,
    query_concept          TEXT NOT NULL,
    query_country          TEXT NOT NULL,
    query_language         TEXT NOT NULL,
    query_text             TEXT NOT NULL,
    semantic_item_id       INTEGER NOT NULL,
    cultural_item_id       INTEGER NOT NULL,
    non_relevant_item_id   INTEGER NOT NULL,
    run_id                 INTEGER
);
"""
