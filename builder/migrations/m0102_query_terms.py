"""Query terms per (concept, country) (issue 14): the benchmark's text query and its review.

``query_terms`` holds one term per concept and country with the country's locale (BCP-47 with
region: es-AR is not es-ES), the English search term a person would type (kept apart from the
concept label), where the term came from (``generated`` / ``authors`` / ``reviewed``) and how
many native speakers agreed on it and when. ``published_terms`` keeps the authors' own term
(``concept_in_native`` of a published ``image_metadata`` config) beside ours, per dataset, for
``python -m builder.queries diff`` and the review tasks.
"""

VERSION = 102

SQL = """
CREATE TABLE IF NOT EXISTS query_terms (
    concept      TEXT NOT NULL,
    country      TEXT NOT NULL,               -- ISO alpha-3
    locale       TEXT NOT NULL,               -- BCP-47 with region, e.g. pt-PT
    native_term  TEXT NOT NULL,               -- the text query of (concept, country)
    english_term TEXT NOT NULL,               -- English search term (not the concept label)
    source       TEXT NOT NULL,               -- generated / authors / reviewed
    reviewers    INTEGER NOT NULL DEFAULT 0,  -- native speakers behind a reviewed term
    reviewed_at  TEXT,                        -- ISO time of the review decision
    note         TEXT,                        -- why the term is what it is (corrections)
    run_id       INTEGER,
    PRIMARY KEY (concept, country)
);

CREATE TABLE IF NOT EXISTS published_terms (
    dataset      TEXT NOT NULL,               -- hub id or folder of the published release
    concept      TEXT NOT NULL,
    country      TEXT NOT NULL,               -- ISO alpha-3
    term         TEXT NOT NULL,               -- the authors' concept_in_native
    n_images     INTEGER NOT NULL,            -- images of (concept, country) carrying it
    imported_at  TEXT NOT NULL,
    PRIMARY KEY (dataset, concept, country)
);
"""
