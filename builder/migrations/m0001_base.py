"""The catalog schema of 0.1.0: every table, index and view, each status column CHECKed
against the values of its enum in ``builder.statuses`` (a test compares the two)."""

VERSION = 1

SQL = """
CREATE TABLE stage_runs (
    run_id          INTEGER PRIMARY KEY AUTOINCREMENT,
    stage           TEXT NOT NULL,
    params_json     TEXT NOT NULL,            -- parameters (no secrets)
    fingerprint     TEXT NOT NULL,            -- sha256 of stage, params and input fingerprints
    status          TEXT NOT NULL,
    counts_json     TEXT,                     -- counts by status (and by country / concept)
    summary         TEXT,                     -- the one-screen summary printed at the end
    usage_json      TEXT,                     -- LLM token usage and API calls, summed
    package_version TEXT NOT NULL,
    started_at      TEXT NOT NULL,
    ended_at        TEXT,
    pid             INTEGER,                  -- who runs it (builder.liveness)
    host            TEXT,
    proc_start      TEXT,                     -- /proc/PID/stat start time and boot id
    CONSTRAINT stage_runs_status CHECK (status IN ('running', 'done', 'failed', 'interrupted'))
);

CREATE TABLE concepts (
    name         TEXT PRIMARY KEY,
    source       TEXT NOT NULL,               -- curated / generated
    status       TEXT NOT NULL,
    merged_into  TEXT,                        -- representative when status = merged
    similarity   REAL,                        -- cosine to the representative when merged
    reason       TEXT,
    run_id       INTEGER,
    CONSTRAINT concepts_status CHECK (status IN ('candidate', 'kept', 'merged', 'dropped'))
);

CREATE TABLE concept_instances (
    concept  TEXT NOT NULL,
    country  TEXT NOT NULL,                   -- ISO alpha-3
    round    INTEGER NOT NULL,
    instance TEXT NOT NULL,
    run_id   INTEGER,
    PRIMARY KEY (concept, country, round)
);

-- one row per LLM work item of a stage (a concept round, a concept x country query request)
CREATE TABLE llm_requests (
    stage       TEXT NOT NULL,
    item        TEXT NOT NULL,               -- the stage's work item, e.g. 'round=1;batch=0'
    status      TEXT NOT NULL,
    reason      TEXT,
    raw         TEXT,                        -- last raw model text when the answer was invalid
    cache_key   TEXT,                        -- key in cache/llm.sqlite
    llm         TEXT NOT NULL,               -- gemini:MODEL / offline
    prompt_sha  TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    run_id      INTEGER,
    PRIMARY KEY (stage, item),
    CONSTRAINT llm_requests_status CHECK (status IN ('ok', 'failed', 'refused', 'error'))
);

CREATE TABLE queries (
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
    PRIMARY KEY (concept, country, kind),
    CONSTRAINT queries_status CHECK (status IN ('ok', 'failed', 'refused', 'error', 'stale'))
);

-- the text query of (concept, country) in the country's locale, and its review
CREATE TABLE query_terms (
    concept      TEXT NOT NULL,
    country      TEXT NOT NULL,               -- ISO alpha-3
    locale       TEXT NOT NULL,               -- BCP-47 with region, e.g. pt-PT
    native_term  TEXT NOT NULL,
    english_term TEXT NOT NULL,               -- English search term (not the concept label)
    source       TEXT NOT NULL,               -- generated / authors / reviewed
    reviewers    INTEGER NOT NULL DEFAULT 0,  -- native speakers behind a reviewed term
    reviewed_at  TEXT,
    note         TEXT,                        -- why the term is what it is (corrections)
    run_id       INTEGER,
    PRIMARY KEY (concept, country)
);

-- the authors' concept_in_native of a published release, per dataset
CREATE TABLE published_terms (
    dataset      TEXT NOT NULL,               -- hub id or folder of the published release
    concept      TEXT NOT NULL,
    country      TEXT NOT NULL,
    term         TEXT NOT NULL,
    n_images     INTEGER NOT NULL,            -- images of (concept, country) carrying it
    imported_at  TEXT NOT NULL,
    PRIMARY KEY (dataset, concept, country)
);

CREATE TABLE searches (
    search_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    concept      TEXT NOT NULL,
    country      TEXT NOT NULL,
    language     TEXT NOT NULL,
    kind         TEXT NOT NULL,               -- english / native / folder / urls
    search_query TEXT NOT NULL,               -- the string sent to the search backend
    backend      TEXT NOT NULL,               -- ddgs:duckduckgo / folder / urls
    region       TEXT,
    status       TEXT NOT NULL,
    reason       TEXT,
    n_results    INTEGER,
    attempts     INTEGER NOT NULL DEFAULT 0,
    searched_at  TEXT,
    run_id       INTEGER,
    UNIQUE (concept, country, kind, backend),
    CONSTRAINT searches_status CHECK (status IN ('pending', 'ok', 'empty', 'failed', 'skipped'))
);

CREATE TABLE search_results (
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

CREATE TABLE crawl_input_errors (
    source   TEXT NOT NULL,                   -- folder:PATH / urls:FILE
    line     TEXT NOT NULL,                   -- CSV line number or relative path
    reason   TEXT NOT NULL,
    raw      TEXT,
    run_id   INTEGER,
    PRIMARY KEY (source, line)
);

CREATE TABLE downloads (
    url           TEXT PRIMARY KEY,
    status        TEXT NOT NULL,
    reason        TEXT,
    http_status   INTEGER,
    final_url     TEXT,
    sha256        TEXT,
    bytes         INTEGER,
    content_type  TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    fetched_at    TEXT,
    run_id        INTEGER,
    x_robots_tag  TEXT,
    CONSTRAINT downloads_status CHECK (status IN ('ok', 'duplicate', 'http_error', 'timeout',
        'connection_error', 'too_large', 'not_an_image', 'corrupt_image', 'unsupported_format',
        'decompression_bomb', 'blocked_host', 'opted_out', 'redirect_loop',
        'too_many_redirects', 'unsupported_scheme', 'invalid_url', 'dns_error', 'missing_file',
        'fetch_error', 'internal_error'))
);
CREATE INDEX downloads_sha ON downloads(sha256);

CREATE TABLE images (
    sha256     TEXT PRIMARY KEY,
    ext        TEXT NOT NULL,
    format     TEXT NOT NULL,                 -- Pillow format name
    width      INTEGER NOT NULL,
    height     INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    phash      TEXT,
    first_seen TEXT NOT NULL
);

-- one row per search result: the image as found for a concept and country
CREATE TABLE items (
    item_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    search_id    INTEGER NOT NULL REFERENCES searches(search_id),
    rank         INTEGER NOT NULL,
    concept      TEXT NOT NULL,
    country      TEXT NOT NULL,
    language     TEXT NOT NULL,
    search_query TEXT NOT NULL,
    url          TEXT NOT NULL,
    sha256       TEXT,                        -- null until downloaded
    status       TEXT NOT NULL,
    reason       TEXT,
    group_id     INTEGER,                     -- near-duplicate group
    updated_at   TEXT,
    dedup_json   TEXT,                        -- the dedup evidence of this item
    UNIQUE (search_id, rank),
    CONSTRAINT items_status CHECK (status IN ('pending', 'ok', 'failed', 'duplicate',
        'near_duplicate', 'needs_review', 'kept', 'removed'))
);
CREATE INDEX items_cc ON items(concept, country);
CREATE INDEX items_group ON items(group_id);
CREATE INDEX items_sha ON items(sha256);
CREATE INDEX items_url ON items(url);

CREATE TABLE dedup_groups (
    group_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    concept       TEXT NOT NULL,
    kept_item_id  INTEGER,
    status        TEXT NOT NULL,
    evidence_json TEXT NOT NULL,              -- member pairs with phash distance / cosine
    run_id        INTEGER,
    CONSTRAINT dedup_groups_status CHECK (status IN ('auto', 'needs_review', 'reviewed'))
);
CREATE INDEX dedup_groups_concept ON dedup_groups(concept);
CREATE INDEX dedup_groups_status ON dedup_groups(status);

CREATE TABLE reviews (
    review_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT NOT NULL,              -- duplicates / tags / queries
    project_id    INTEGER,
    task_id       INTEGER NOT NULL,
    annotation_id INTEGER NOT NULL,
    annotator     TEXT NOT NULL,
    item_id       INTEGER,
    sha256        TEXT,
    decision      TEXT NOT NULL,              -- keep / remove / none_duplicates / tag list json
    annotated_at  TEXT,
    pulled_at     TEXT NOT NULL,
    current       INTEGER NOT NULL DEFAULT 1, -- 0 once a later version of the annotation exists
    result_sha    TEXT,                       -- sha256 of the annotation result
    run_id        INTEGER,
    answer        TEXT,                       -- the text an annotator typed (a better term)
    editor        TEXT                        -- who last saved it when not its author
);
CREATE INDEX reviews_ann ON reviews(kind, project_id, annotation_id, current);

-- the Label Studio project of each review kind, per server
CREATE TABLE ls_projects (
    kind          TEXT NOT NULL,
    server        TEXT NOT NULL,              -- LABEL_STUDIO_URL (no credentials)
    project_id    INTEGER NOT NULL,
    title         TEXT NOT NULL,
    model_version TEXT NOT NULL,              -- version of the pre-annotations
    config_sha    TEXT NOT NULL,              -- sha256 of the label config
    created_at    TEXT NOT NULL,
    choices_json  TEXT,                       -- the choices it was pushed with
    PRIMARY KEY (kind, server)
);

-- every pushed task (one per key and project: pushing is idempotent)
CREATE TABLE ls_tasks (
    kind           TEXT NOT NULL,
    server         TEXT NOT NULL,
    project_id     INTEGER NOT NULL,
    task_key       TEXT NOT NULL,             -- 'group:<id>' or 'image:<sha256>'
    task_id        INTEGER NOT NULL,
    group_id       INTEGER,                   -- duplicates: the dedup group
    sha256         TEXT,                      -- tags: the image
    data_json      TEXT NOT NULL,             -- the task data as pushed
    pushed_at      TEXT NOT NULL,
    retired_at     TEXT,                      -- set when the catalog no longer asks for it
    retired_reason TEXT,
    overlap        INTEGER,                   -- the overlap last set (NULL: the project's)
    PRIMARY KEY (kind, server, project_id, task_key)
);
CREATE INDEX ls_tasks_task ON ls_tasks(project_id, task_id);

-- reviewers (Label Studio e-mails) assigned to a locale; pull counts only theirs
CREATE TABLE ls_reviewers (
    locale      TEXT NOT NULL,
    annotator   TEXT NOT NULL,
    assigned_at TEXT NOT NULL,
    PRIMARY KEY (locale, annotator)
);

-- the decision of every pushed query-term task
CREATE TABLE term_reviews (
    project_id  INTEGER NOT NULL,
    task_id     INTEGER NOT NULL,
    concept     TEXT NOT NULL,
    country     TEXT NOT NULL,
    locale      TEXT NOT NULL,
    proposed    TEXT NOT NULL,                -- the term the task asked about
    outcome     TEXT NOT NULL,
    term        TEXT,                         -- the reviewed term (accepted or corrected)
    reviewers   INTEGER NOT NULL DEFAULT 0,   -- counted reviewers who chose the outcome
    votes_json  TEXT NOT NULL,                -- {annotator: answer} of the counted reviewers
    reason      TEXT NOT NULL,
    applied     INTEGER NOT NULL DEFAULT 0,   -- 1 while query_terms carries this decision
    decided_at  TEXT,                         -- the latest counted answer's time
    run_id      INTEGER,
    PRIMARY KEY (project_id, task_id),
    CONSTRAINT term_reviews_outcome CHECK (outcome IN ('accepted', 'corrected', 'unclear',
        'pending', 'needs_review', 'stale'))
);
CREATE INDEX term_reviews_cc ON term_reviews(concept, country);

CREATE TABLE tags (
    sha256      TEXT PRIMARY KEY,
    tags_json   TEXT,                         -- ordered concept list (priority order)
    status      TEXT NOT NULL,
    reason      TEXT,
    raw         TEXT,                         -- raw model text when it failed validation
    model       TEXT,
    prompt_sha  TEXT,
    run_id      INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0,   -- requests that covered it
    updated_at  TEXT,
    CONSTRAINT tags_status CHECK (status IN ('ok', 'retry', 'failed', 'refused', 'transient'))
);

-- one Gemini Batch API job of the tagging stage; an interrupted run picks it up by name
CREATE TABLE tag_batch_jobs (
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

CREATE TABLE triplets (
    triplet_id             TEXT PRIMARY KEY,
    seed                   INTEGER NOT NULL,
    query_item_id          INTEGER NOT NULL,
    query_concept          TEXT NOT NULL,
    query_country          TEXT NOT NULL,
    query_language         TEXT NOT NULL,
    query_text             TEXT NOT NULL,     -- the benchmark's text query
    semantic_item_id       INTEGER NOT NULL,
    cultural_item_id       INTEGER NOT NULL,
    non_relevant_item_id   INTEGER NOT NULL,
    run_id                 INTEGER
);

-- what python -m pipeline export downloads writes: one row per search-result item
CREATE VIEW downloads_export AS
SELECT i.url AS url, i.concept AS concept, i.country AS country, i.language AS language,
       i.rank AS rank, COALESCE(d.status, 'pending') AS status, d.reason AS reason,
       d.http_status AS http_status, d.sha256 AS sha256, d.bytes AS bytes,
       d.content_type AS content_type, im.width AS width, im.height AS height,
       im.format AS format, i.item_id AS item_id, i.status AS item_status,
       i.search_query AS search_query, s.kind AS kind, s.backend AS backend,
       s.region AS region, r.page_url AS page_url, r.title AS title, d.final_url AS final_url,
       d.fetched_at AS fetched_at, d.attempts AS attempts
FROM items i
JOIN searches s ON s.search_id = i.search_id
LEFT JOIN search_results r ON r.search_id = i.search_id AND r.rank = i.rank
LEFT JOIN downloads d ON d.url = i.url
LEFT JOIN images im ON im.sha256 = d.sha256
ORDER BY i.item_id;
"""
