"""Push the query terms to native speakers (``python -m annotation push --kind queries``).

One project per locale, one task per (concept, country) term, showing the concept, its
definition and instances, the authors' term, the proposed term and a few crawled images
(docs/annotation.md). The task key carries the term's hash, so answers about an old term are
never applied to a new one.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from annotation.client import AnnotationError, Connection
from annotation.configs import project_key, project_spec
from annotation.links import ImageLinks, TaskDraft
from annotation.projects import recorded_annotators, recorded_title
from annotation.push import PushReport, push_drafts
from builder.catalog import Catalog
from builder.statuses import USABLE_ITEMS, ItemStatus
from core import datatables
from core.files import sha256_text

log = logging.getLogger(__name__)

MAX_IMAGES = 4
#: item statuses whose image may illustrate a term (not failed, not a removed copy)
SHOWN_STATUSES = (*USABLE_ITEMS, ItemStatus.NEEDS_REVIEW)


def term_key(concept: str, country: str, term: str) -> str:
    """Task key of a (concept, country) term: a changed term is a new task."""
    return f"term:{concept}|{country}|{sha256_text(term)[:16]}"


def term_rows(
    cat: Catalog, countries: Sequence[str] | None = None, include_reviewed: bool = False
) -> list[Any]:
    """The ``query_terms`` rows to review (of ``countries``, ISO codes; all when None)."""
    where, params = [], []
    if countries:
        where.append(f"country IN ({','.join('?' * len(countries))})")
        params += list(countries)
    if not include_reviewed:
        where.append("source != 'reviewed'")
    sql = "SELECT * FROM query_terms" + (f" WHERE {' AND '.join(where)}" if where else "")
    return cat.query(sql + " ORDER BY locale, rowid", tuple(params))


def _country_name(code: str) -> str:
    try:
        return datatables.country(code).name
    except datatables.TableError:
        return code


def _definitions() -> dict[str, str]:
    """concept -> definition (``data/concept_definitions.csv``)."""
    try:
        return datatables.concept_definitions()
    except datatables.TableError as exc:
        raise AnnotationError(f"cannot show the concept definitions: {exc}") from None


def definition_text(definitions: dict[str, str], concept: str) -> str:
    """What a task says the concept means: its definition, or that there is none."""
    text = definitions.get(concept)
    return f"What it means: {text}" if text else "No definition of this concept is recorded."


def is_placeholder(concept: str, country_name: str, instance: str) -> bool:
    """Whether an instance is the offline stand-in ``<concept> in <country>`` (says nothing)."""
    return instance.strip().casefold() == f"{concept} in {country_name}".casefold()


def _examples(cat: Catalog, concept: str, country: str) -> str:
    """The concept's instances in up to three other countries (stand-ins left out)."""
    others = cat.query(
        "SELECT country, instance FROM concept_instances WHERE concept = ? AND country != ?"
        " ORDER BY round DESC, country", (concept, country))
    seen: dict[str, str] = {}
    for r in others:
        name = _country_name(r["country"])
        if r["country"] not in seen and not is_placeholder(concept, name, r["instance"]):
            seen[r["country"]] = f"{r['instance']} ({name})"
    if not seen:
        return "No examples of it from other countries."
    return f"Examples in other countries: {'; '.join(list(seen.values())[:3])}"


def _images(cat: Catalog, links: ImageLinks, concept: str, country: str) -> list[dict[str, str]]:
    """Up to four distinct images crawled for (concept, country), kept ones and best rank first."""
    marks = ",".join("?" * len(SHOWN_STATUSES))
    rows = cat.query(
        "SELECT i.sha256, im.ext FROM items i JOIN images im ON im.sha256 = i.sha256"
        f" WHERE i.concept = ? AND i.country = ? AND i.status IN ({marks})"
        " ORDER BY i.status = ? DESC, i.rank, i.item_id",
        (concept, country, *SHOWN_STATUSES, ItemStatus.KEPT))
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        if r["sha256"] in out or not cat.workdir.image_path(r["sha256"], r["ext"]).is_file():
            continue
        out[r["sha256"]] = {"url": links.url(r["sha256"], r["ext"]), "sha256": r["sha256"]}
        if len(out) == MAX_IMAGES:
            break
    return list(out.values())


def term_draft(cat: Catalog, links: ImageLinks, row: Any,
               definitions: dict[str, str] | None = None) -> TaskDraft:
    """The task of one ``query_terms`` row (``definitions``: :func:`_definitions`)."""
    definitions = _definitions() if definitions is None else definitions
    concept, country, term = row["concept"], row["country"], row["native_term"]
    name = _country_name(country)
    inst = [r for r in cat.query(
        "SELECT instance FROM concept_instances WHERE concept = ? AND country = ?"
        " ORDER BY round DESC LIMIT 1", (concept, country))
        if not is_placeholder(concept, name, r["instance"])]
    authors = cat.query("SELECT dataset, term FROM published_terms WHERE concept = ? AND"
                        " country = ? ORDER BY imported_at DESC LIMIT 1", (concept, country))
    data = {
        "title": f"{concept} | {name} ({row['locale']})",
        "concept": concept, "country": country, "locale": row["locale"],
        "concept_text": f"English concept: {concept}; English search term: "
                        f"{row['english_term'] or concept}",
        "definition": definition_text(definitions, concept),
        "examples": _examples(cat, concept, country),
        "instance": (f"In {name}, concept generation gave: {inst[0]['instance']}" if inst
                     else f"Concept generation gave no instance for {name}."),
        "authors": (f"The paper authors' term ({authors[0]['dataset']}): {authors[0]['term']}"
                    if authors else "No term of the paper's authors was imported."),
        "proposed": term,
        "proposed_source": row["source"],
        "proposed_note": row["note"],
        "images": _images(cat, links, concept, country),
    }
    return TaskDraft(term_key(concept, country, term), data, prediction=[])


def push_queries(
    cat: Catalog,
    conn: Connection,
    *,
    countries: Sequence[str] | None = None,
    include_reviewed: bool = False,
    images: str = "local-files",
    document_root: str | None = None,
    annotators: int | None = None,
    batch_size: int = 100,
) -> list[PushReport]:
    """One project per locale of the chosen countries' terms; import the missing tasks."""
    rows = term_rows(cat, countries, include_reviewed)
    if not rows:
        have = cat.query("SELECT COUNT(*) FROM query_terms")[0][0]
        raise AnnotationError(
            "no query terms to review in this work dir" + (
                " (all chosen ones are reviewed already; --include-reviewed pushes them again)"
                if have else ": run `python -m builder.queries` first"))
    links = ImageLinks(cat.workdir.images_dir, images, document_root)
    definitions = _definitions()
    by_locale: dict[str, list[Any]] = {}
    for r in rows:
        by_locale.setdefault(r["locale"], []).append(r)
    reports = []
    for locale, loc_rows in by_locale.items():
        key = project_key("queries", locale)
        n = annotators or recorded_annotators(cat, conn, key) or 3
        spec = project_spec("queries", recorded_title(cat, key, conn.server), annotators=n,
                            locale=locale)
        drafts = [term_draft(cat, links, r, definitions) for r in loc_rows]
        notes = +Counter({"tasks without images": sum(1 for d in drafts if not d.data["images"])})
        params = {"images": images, "countries": sorted({r["country"] for r in loc_rows}),
                  "include_reviewed": include_reviewed}
        subjects, kept = _term_subjects(cat, links, locale, conn.server)
        reports.append(push_drafts(cat, conn, spec, links, drafts, Counter(), params, batch_size,
                                   notes, subjects={**subjects, **{d.key: d for d in drafts}},
                                   kept=kept, why_gone="the term it asks about changed"))
    return reports


def _term_subjects(cat: Catalog, links: ImageLinks, locale: str, server: str
                   ) -> tuple[dict[str, TaskDraft], set[str]]:
    """The tasks a locale's project may hold now: every term of the locale, and (kept) the
    tasks whose decision is the term ``query_terms`` carries (a correction changes the key)."""
    rows = cat.query("SELECT * FROM query_terms WHERE locale = ? ORDER BY rowid", (locale,))
    subjects = {d.key: d for d in (term_draft(cat, links, r) for r in rows)}
    kept = {r["task_key"] for r in cat.query(
        "SELECT t.task_key FROM ls_tasks t JOIN term_reviews r ON r.project_id = t.project_id"
        " AND r.task_id = t.task_id WHERE t.kind = ? AND t.server = ? AND r.applied = 1",
        (project_key("queries", locale), server))}
    return subjects, kept
