"""The catalog's query terms (``query_terms``): one per (concept, country). Where several places
know one, the rule the queries stage, ``diff`` and ``import --published`` share: a ``reviewed``
term in the catalog, else the row of ``data/queries.csv`` (unless ``--no-table``), else any
other term in the catalog (generated, or the authors'), else none: the stage asks the LLM."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable

from builder.catalog import Catalog
from core import datatables, query_table

log = logging.getLogger(__name__)

#: (concept, country) -> its term
Terms = dict[tuple[str, str], query_table.QueryTerm]


def _term(row: sqlite3.Row) -> query_table.QueryTerm:
    return query_table.QueryTerm(
        concept=row["concept"], country=row["country"], locale=row["locale"],
        language=datatables.country(row["country"]).language, native_term=row["native_term"],
        english_term=row["english_term"], source=row["source"],
        reviewers=int(row["reviewers"] or 0), reviewed_at=row["reviewed_at"] or "",
        note=row["note"] or "")


def catalog_terms(catalog: Catalog) -> Terms:
    """(concept, country) -> the catalog's term (countries unknown to countries.csv left out)."""
    codes = {c.code for c in datatables.countries()}
    return {(r["concept"], r["country"]): _term(r)
            for r in catalog.query("SELECT * FROM query_terms ORDER BY concept, country")
            if r["country"] in codes}


def table_terms(use_table: bool = True) -> Terms:
    """(concept, country) -> the term of ``data/queries.csv`` ({} without one; a malformed one
    raises ``TableError``)."""
    if not use_table:
        return {}
    path = datatables.data_dir() / "queries.csv"
    if not path.is_file():
        log.warning("no query table: %s is missing", path)
        return {}
    return query_table.query_terms()


def resolve(catalog_term: query_table.QueryTerm | None, table_term: query_table.QueryTerm | None
            ) -> tuple[query_table.QueryTerm | None, str]:
    """The term of one (concept, country) by the module's rule, and its origin."""
    if catalog_term is not None and catalog_term.reviewed:
        return catalog_term, "catalog"
    if table_term is not None:
        return table_term, "table"
    if catalog_term is not None:
        return catalog_term, "catalog"
    return None, "none"


def resolved(cat: Terms, table: Terms) -> Terms:
    """Every (concept, country) with a term by :func:`resolve`."""
    return {k: t for k in sorted(set(cat) | set(table))
            if (t := resolve(cat.get(k), table.get(k))[0]) is not None}


def our_terms(catalog: Catalog) -> Terms:
    """:func:`resolved` over the catalog and the table, less the authors' terms."""
    terms = resolved(catalog_terms(catalog), table_terms())
    return {k: t for k, t in terms.items() if t.source != "authors"}


def english_term(concept: str, known: Terms) -> str:
    """The English term of ``concept`` for a country without one: the first country's with a
    term (countries.csv order), else the concept label."""
    for c in datatables.countries():
        t = known.get((concept, c.code))
        if t is not None and t.english_term:
            return t.english_term
    return concept


def upsert_terms(con: sqlite3.Connection, terms: Iterable[query_table.QueryTerm],
                 run_id: int | None) -> int:
    """Insert or replace ``terms`` in ``query_terms``; returns how many."""
    rows = [(t.concept, t.country, t.locale, t.native_term, t.english_term, t.source, t.reviewers,
             t.reviewed_at or None, t.note or None, run_id) for t in terms]
    con.executemany(
        "INSERT OR REPLACE INTO query_terms (concept, country, locale, native_term, english_term,"
        " source, reviewers, reviewed_at, note, run_id) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    return len(rows)
