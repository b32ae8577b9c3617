"""The query table ``data/queries.csv`` (docs/queries.md): one term per (concept, country);
its one reader and writer, and :func:`term_country`, whose term asks another country's images."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from core.datatables import Country, TableError, concepts, countries, data_dir
from core.text import StrictDictReader, normalize_term

QUERY_COLUMNS = [
    "concept",
    "country",  # ISO alpha-3
    "locale",  # the country's locale (countries.csv), BCP-47 with region
    "language",  # the country's language
    "native_term",  # the concept as people of that country type it: the 3XCM text query
    "english_term",  # English search term (not the concept label; en-GB/en-AU where it differs)
    "source",  # generated / authors / reviewed
    "reviewers",  # native speakers behind a reviewed term (0 otherwise)
    "reviewed_at",  # ISO time of the review decision (empty otherwise)
    "note",  # why the term is what it is (corrections, or why a questioned term was kept)
    "generic_term",  # the concept in this language for other countries' images (empty: native)
]
# an older export may lack these; they read as empty
OPTIONAL_QUERY_COLUMNS = ("generic_term",)
REVIEWED = "reviewed"  # the source of a term native speakers reviewed
QUERY_SOURCES = ("generated", "authors", REVIEWED)


@dataclass(frozen=True)
class QueryTerm:
    """One row of the query table: the text query of one concept in one country."""

    concept: str
    country: str
    locale: str
    language: str
    native_term: str
    english_term: str
    source: str = "generated"
    reviewers: int = 0
    reviewed_at: str = ""
    note: str = ""
    generic_term: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.concept, self.country)

    @property
    def generic(self) -> str:
        """The term for other countries' images: ``generic_term``, else ``native_term``."""
        return self.generic_term or self.native_term

    @property
    def reviewed(self) -> bool:
        return self.source == REVIEWED

    def row(self) -> dict[str, str]:
        """The CSV row (``QUERY_COLUMNS``)."""
        return {c: str(getattr(self, c)) for c in QUERY_COLUMNS}


def query_term(concept: str, c: Country, native_term: str, english_term: str,
               source: str = "generated", note: str = "") -> QueryTerm:
    """A not-yet-reviewed term of ``c`` (its locale and language filled from countries.csv)."""
    return QueryTerm(concept, c.code, c.locale, c.language, native_term, english_term, source,
                     0, "", note)


def _query_row_problem(r: dict[str, str], by_code: dict[str, Country]) -> str | None:
    """Why a normalised row is not a valid query term, or None."""
    c = by_code.get(r["country"])
    if not r["concept"]:
        return "empty concept"
    if c is None:
        return f"unknown country {r['country']!r} (an ISO code of countries.csv)"
    if r["locale"] != c.locale or r["language"] != c.language:
        return (f"{c.code} is locale {c.locale} / language {c.language}, not "
                f"{r['locale'] or '-'} / {r['language'] or '-'}")
    if not r["native_term"] or not r["english_term"]:
        return "empty native_term or english_term"
    if r["source"] not in QUERY_SOURCES:
        return f"source {r['source']!r} is not one of {', '.join(QUERY_SOURCES)}"
    if not r["reviewers"].isdigit():
        return f"reviewers {r['reviewers']!r} is not a count"
    if r["source"] == "reviewed":
        if int(r["reviewers"]) < 1 or not r["reviewed_at"]:
            return "a reviewed term needs reviewers >= 1 and reviewed_at"
        try:
            datetime.fromisoformat(r["reviewed_at"])
        except ValueError:
            return f"reviewed_at {r['reviewed_at']!r} is not an ISO time"
    elif r["reviewers"] != "0" or r["reviewed_at"]:
        return f"a {r['source']} term has reviewers 0 and no reviewed_at"
    if r["generic_term"] and r["generic_term"] != r["native_term"] and \
            f"generic {r['generic_term']}: " not in r["note"]:
        return (f"generic_term {r['generic_term']!r} differs from native_term: the note must "
                f"say why ('generic {r['generic_term']}: <reason>')")
    return None


def parse_query_rows(rows: Iterable[Mapping[str, str | None]], where: str) -> list[QueryTerm]:
    """Validated :class:`QueryTerm` of CSV rows (cells stripped, terms NFC); any problem is a
    :class:`TableError` naming the first offending line and counting all of them."""
    by_code = {c.code: c for c in countries()}
    out: list[QueryTerm] = []
    seen: set[tuple[str, str]] = set()
    problems: list[str] = []
    for line, raw in enumerate(rows, start=2):
        r = {k: normalize_term(raw.get(k)) for k in QUERY_COLUMNS}
        why = _query_row_problem(r, by_code)
        if why is None and (r["concept"], r["country"]) in seen:
            why = f"second row for ({r['concept']}, {r['country']})"
        if why is not None:
            problems.append(f"line {line}: {why}")
            continue
        seen.add((r["concept"], r["country"]))
        out.append(QueryTerm(**{**r, "reviewers": int(r["reviewers"])}))
    if problems:
        raise TableError(f"{where}: {len(problems)} bad query row(s); first: {problems[0]}")
    return out


def read_query_table(path: str | Path | None = None) -> list[QueryTerm]:
    """The query table at ``path`` (default ``data/queries.csv``), validated."""
    path = Path(path) if path is not None else data_dir() / "queries.csv"
    if not path.is_file():
        raise TableError(f"missing query table {path}")
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = StrictDictReader(f, str(path), TableError)
            header = list(reader.fieldnames or [])
            missing = [c for c in QUERY_COLUMNS
                       if c not in header and c not in OPTIONAL_QUERY_COLUMNS]
            if missing:
                raise TableError(f"{path}: not a query table (missing columns {missing})")
            return parse_query_rows(reader, str(path))
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def write_query_table(path: str | Path, terms: Iterable[QueryTerm]) -> int:
    """Write ``terms`` as a query table (concept, then country order); returns the row count."""
    from core.files import atomic_write_text

    try:
        order = {k: i for i, k in enumerate(concepts())}
    except TableError:
        order = {}
    pos = {c.code: i for i, c in enumerate(countries())}
    rows = sorted(terms, key=lambda t: (order.get(t.concept, len(order)), t.concept,
                                        pos.get(t.country, len(pos)), t.country))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=QUERY_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(t.row() for t in rows)
    atomic_write_text(Path(path), buf.getvalue())
    return len(rows)


def note_parts(note: str) -> list[str]:
    """The parts of a query row's note: ``was OLD: why``, ``kept: why``, ``generic TERM: why``."""
    return [x for x in re.split(r"; (?=was |kept: |generic )", note) if x] if note else []


def with_shipped_generic(t: QueryTerm, shipped: Mapping[tuple[str, str], QueryTerm]) -> QueryTerm:
    """``t`` with the ``generic_term`` (and its note part) of the shipped row for its key when
    both have the same native term (a catalog keeps no generic term); else ``t`` unchanged."""
    s = shipped.get(t.key)
    if s is None or s.native_term != t.native_term or t.generic_term or not s.generic_term:
        return t
    note = t.note
    if s.generic_term != t.native_term and f"generic {s.generic_term}: " not in note:
        part = [x for x in note_parts(s.note) if x.startswith(f"generic {s.generic_term}: ")]
        note = "; ".join([*([note] if note else []), *part])
    return replace(t, generic_term=s.generic_term, note=note)


def query_terms() -> dict[tuple[str, str], QueryTerm]:
    """(concept, country) -> its term in ``data/queries.csv``."""
    return {t.key: t for t in read_query_table()}


def generic_terms() -> dict[tuple[str, str], str]:
    """(concept, language) -> the term of ``data/queries.csv`` for other countries' images:
    the ``generic_term`` of the language's first country (countries.csv order) with a row."""
    out: dict[tuple[str, str], str] = {}
    pos = {c.code: i for i, c in enumerate(countries())}
    for t in sorted(read_query_table(), key=lambda t: pos.get(t.country, len(pos))):
        out.setdefault((t.concept, t.language), t.generic)
    return out


def term_country(keys: Container[tuple[str, str]], concept: str, language: str,
                 country_code: str) -> str | None:
    """Whose term writes ``concept`` in ``language`` for the images of ``country_code``, or None:
    the country's own where it speaks the language (ARG's Spanish query is the es-AR term), else
    that of the first country of the language in countries.csv order with one (USA, ESP, PRT);
    ``keys``: the (concept, country) pairs that have a term."""
    own = next((c for c in countries() if c.code == country_code), None)
    if own is not None and own.language == language and (concept, own.code) in keys:
        return own.code
    return next((c.code for c in countries()
                 if c.language == language and (concept, c.code) in keys), None)


def term_in_language(terms: Mapping[tuple[str, str], str], concept: str, language: str,
                     country_code: str,
                     generic: Mapping[tuple[str, str], str] | None = None) -> str | None:
    """The text query of ``concept`` in ``language`` for the images of ``country_code``
    (:func:`term_country`'s rule), None when no country of the language has a term. When the
    term is another country's, ``generic`` (concept, language) -> text replaces it
    (:func:`generic_terms`: Portuguese for the US Congress is *parlamento*, not PRT's
    *Assembleia da República*)."""
    code = term_country(terms, concept, language, country_code)
    if code is None:
        return None
    if code != country_code and generic and (concept, language) in generic:
        return generic[(concept, language)]
    return terms[(concept, code)]
