"""Crawl and image-dedup additions (issue 7): per-download robots header, per-item dedup
evidence, rejected input rows, and the ``downloads_export`` view that
``python -m builder export downloads`` writes (one row per search-result item)."""

VERSION = 200

SQL = """
ALTER TABLE downloads ADD COLUMN x_robots_tag TEXT;
ALTER TABLE items ADD COLUMN dedup_json TEXT;

CREATE TABLE IF NOT EXISTS crawl_input_errors (
    source   TEXT NOT NULL,                   -- folder:PATH / urls:FILE
    line     TEXT NOT NULL,                   -- CSV line number or relative path
    reason   TEXT NOT NULL,
    raw      TEXT,
    run_id   INTEGER,
    PRIMARY KEY (source, line)
);

CREATE INDEX IF NOT EXISTS items_url ON items(url);
CREATE INDEX IF NOT EXISTS downloads_sha ON downloads(sha256);

CREATE VIEW IF NOT EXISTS downloads_export AS
SELECT i.url AS url, i.concept AS concept, i.country AS country, i.language AS language,
       i.rank AS rank, COALESCE(d.status, 'pending') AS status, d.reason AS reason,
       d.http_status AS http_status, d.sha256 AS sha256, d.bytes AS bytes,
       d.content_type AS content_type, im.width AS width, im.height AS height,
       im.format AS format, i.item_id AS item_id, i.status AS item_status,
       i.query_text AS query_text, s.kind AS kind, s.backend AS backend, s.region AS region,
       r.page_url AS page_url, r.title AS title, d.final_url AS final_url,
       d.fetched_at AS fetched_at, d.attempts AS attempts
FROM items i
JOIN searches s ON s.search_id = i.search_id
LEFT JOIN search_results r ON r.search_id = i.search_id AND r.rank = i.rank
LEFT JOIN downloads d ON d.url = i.url
LEFT JOIN images im ON im.sha256 = d.sha256
ORDER BY i.item_id;
"""
