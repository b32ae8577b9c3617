"""The one loader of the versioned tables in ``data/`` (countries, languages, concepts, queries).

Every other module asks this one for country codes, native languages and locales, Common Crawl
shares, tiers, concept names and query terms; nothing else hard-codes these facts. The tables
live in the repository's ``data/`` folder; ``XCM_DATA_DIR`` points elsewhere (e.g. a user's
variant).

Query terms (``queries.csv``, docs/queries.md) are one per (concept, country), in the country's
locale: :data:`QUERY_COLUMNS`, :class:`QueryTerm`, the one reader :func:`read_query_table` (an
old per-language table is refused with the command that converts it) and the one writer
:func:`write_query_table` (also for exports of reviewed terms); :func:`term_country` is the
rule for asking one country's images in another country's language, where another country's
images get the term's ``generic_term`` (no country's proper name such as PRT's parliament).
:func:`concept_definitions` reads ``concept_definitions.csv`` (what each concept counts).
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections import Counter
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from benchmark import files
from benchmark.text import StrictDictReader, normalize_term


class TableError(ValueError):
    """A data table is missing or malformed."""


def data_dir() -> Path:
    """Folder holding the tables: ``$XCM_DATA_DIR`` or the repository's ``data/``."""
    env = os.environ.get("XCM_DATA_DIR")
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "data"
    if not path.is_dir():
        raise TableError(f"data folder not found: {path} (set XCM_DATA_DIR)")
    return path


@dataclass(frozen=True)
class DataFile:
    """A file of ``data/``: where it is, its text, and the sha256 of its bytes."""

    name: str  # path relative to the data folder, e.g. "prompts/tagging.txt"
    path: Path
    text: str
    sha256: str


def data_path(name: str) -> Path:
    """Path of ``data/<name>`` (the file must exist); ``name`` may not leave the folder."""
    root = data_dir().resolve()
    path = (root / name).resolve()
    if root not in path.parents and path != root:
        raise TableError(f"{name!r} is outside the data folder")
    if not path.exists():
        raise TableError(f"missing data file {path}")
    return path


def data_file(name: str) -> DataFile:
    """Read ``data/<name>`` as UTF-8 text, with its sha256 (prompts, configs, guidelines,
    the paper's and the authors' tables): the one way any module reads a file of ``data/``."""
    path = data_path(name)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 ({exc})") from exc
    return DataFile(name, path, text, files.sha256_bytes(raw))


def data_csv(name: str) -> list[dict[str, str]]:
    """The rows of a CSV file of ``data/`` (read through :func:`data_file`)."""
    f = data_file(name)
    return list(StrictDictReader(io.StringIO(f.text, newline=""), str(f.path), TableError))


@dataclass(frozen=True)
class Country:
    """One of the benchmark's countries."""

    code: str  # ISO 3166-1 alpha-3
    name: str
    label: str  # the paper's short label (USA, UK, GER, ...)
    authors_name: str  # as written in the authors' xcm-bench.csv
    language: str  # BCP-47 of the native language
    language_name: str
    ddg_region: str | None  # DuckDuckGo region; None -> "wt-wt"
    cc_share: float | None  # Common Crawl share (%) of the language; None if unknown
    locale: str = ""  # BCP-47 with region (pt-PT is not pt-BR): the locale of its query terms
    native_name: str = ""  # the country's name in its language (native search queries)

    @property
    def search_region(self) -> str:
        return self.ddg_region or "wt-wt"


@dataclass(frozen=True)
class Language:
    """One of the 36 Crossmodal-3600 languages."""

    code: str
    name: str
    cc_share: float
    tier: str  # high / medium / low


def _read_csv(name: str, required: list[str]) -> list[dict[str, str]]:
    path = data_dir() / name
    if not path.is_file():
        raise TableError(f"missing table {path}")
    with path.open(newline="", encoding="utf-8") as f:
        reader = StrictDictReader(f, str(path), TableError)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise TableError(f"{path}: missing columns {missing}")
        return list(reader)


@lru_cache(maxsize=4)
def _countries(root: str) -> tuple[Country, ...]:
    rows = _read_csv(
        "countries.csv",
        ["code", "name", "label", "authors_name", "language", "locale", "language_name",
         "native_name", "ddg_region", "cc_share"],
    )
    out = []
    for r in rows:
        if r["locale"].split("-")[0] != r["language"] or "-" not in r["locale"]:
            raise TableError(f"countries.csv: {r['code']}: locale {r['locale']!r} is not "
                             f"{r['language']}-<REGION>")
        out.append(Country(
            code=r["code"],
            name=r["name"],
            label=r["label"],
            authors_name=r["authors_name"],
            language=r["language"],
            language_name=r["language_name"],
            ddg_region=r["ddg_region"] or None,
            cc_share=float(r["cc_share"]) if r["cc_share"] else None,
            locale=r["locale"],
            native_name=r["native_name"] or r["name"],
        ))
    return tuple(out)


def countries() -> tuple[Country, ...]:
    """All countries, in the table's order (the paper's order)."""
    return _countries(str(data_dir()))


def country(key: str) -> Country:
    """Look a country up by ISO code, paper label, English name or authors' name (any case)."""
    k = key.strip().lower()
    for c in countries():
        if k in {c.code.lower(), c.label.lower(), c.name.lower(), c.authors_name.lower()}:
            return c
    known = ", ".join(c.code for c in countries())
    raise TableError(f"unknown country {key!r} (known: {known})")


def resolve_countries(spec: str) -> list[Country]:
    """``all`` or a comma-separated list of codes/labels/names; a list that names no country
    (``""``, ``","``) is an error, never "none" or "all"."""
    if spec.strip().lower() == "all":
        return list(countries())
    out = [country(p) for p in spec.split(",") if p.strip()]
    if not out:
        raise TableError(f"--countries {spec!r} names no country: give codes such as THA,KEN "
                         "(data/countries.csv), or all")
    return out


@lru_cache(maxsize=4)
def _languages(root: str) -> tuple[Language, ...]:
    rows = _read_csv("xm3600_languages.csv", ["code", "name", "cc_share", "tier"])
    return tuple(Language(r["code"], r["name"], float(r["cc_share"]), r["tier"]) for r in rows)


def languages() -> tuple[Language, ...]:
    """The 36 XM3600 languages with Common Crawl share and tier."""
    return _languages(str(data_dir()))


def language(code: str) -> Language:
    for lang in languages():
        if lang.code == code:
            return lang
    raise TableError(f"unknown XM3600 language {code!r}")


def language_names() -> dict[str, str]:
    """BCP-47 code -> English name, over the XM3600 languages and the countries' languages."""
    out = {lang.code: lang.name for lang in languages()}
    for c in countries():
        out.setdefault(c.language, c.language_name)
    return out


def concepts() -> list[str]:
    """The curated concept list (``data/concepts.txt``), in index order."""
    path = data_dir() / "concepts.txt"
    if not path.is_file():
        raise TableError(f"missing table {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [normalize_term(ln) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


# -- query terms: data/queries.csv, one term per (concept, country) ---------------------------

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
QUERY_SOURCES = ("generated", "authors", "reviewed")
MIGRATE_COMMAND = "python -m builder.queries migrate-table {path} --out NEW.csv"


class OldQueryTableError(TableError):
    """A query table in the old format (one term per language, a ``reviewed`` column)."""


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
        return self.source == "reviewed"

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
    """The query table at ``path`` (default ``data/queries.csv``), validated. An old-format
    table is refused with :class:`OldQueryTableError` naming the command that converts it."""
    path = Path(path) if path is not None else data_dir() / "queries.csv"
    if not path.is_file():
        raise TableError(f"missing query table {path}")
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = StrictDictReader(f, str(path), TableError)
            header = list(reader.fieldnames or [])
            if "locale" not in header and {"reviewed", "native_query"} & set(header):
                raise OldQueryTableError(
                    f"{path} is an old-format query table (one term per language, column "
                    "'reviewed'); terms are now per (concept, country) with a locale: convert "
                    f"it with `{MIGRATE_COMMAND.format(path=path)}`")
            missing = [c for c in QUERY_COLUMNS
                       if c not in header and c not in OPTIONAL_QUERY_COLUMNS]
            if missing:
                raise TableError(f"{path}: not a query table (missing columns {missing})")
            return parse_query_rows(reader, str(path))
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def write_query_table(path: str | Path, terms: Iterable[QueryTerm]) -> int:
    """Write ``terms`` as a query table (concept order of concepts.txt, then country order),
    atomically with the user's umask; returns the number of rows."""
    from benchmark.files import atomic_write_text

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


DEFINITION_COLUMNS = ["concept", "definition", "source"]


def concept_definitions() -> dict[str, str]:
    """concept -> its one-line definition (what counts, what does not), from
    ``data/concept_definitions.csv``: exactly one non-empty line per concept of concepts.txt."""
    rows = _read_csv("concept_definitions.csv", DEFINITION_COLUMNS)
    known, out, problems = set(concepts()), {}, []
    for line, r in enumerate(rows, start=2):
        concept, text = normalize_term(r.get("concept")), normalize_term(r.get("definition"))
        if concept not in known:
            problems.append(f"line {line}: {concept!r} is not a concept of concepts.txt")
        elif concept in out:
            problems.append(f"line {line}: second definition of {concept!r}")
        elif not text or not normalize_term(r.get("source")):
            problems.append(f"line {line}: {concept!r} has an empty definition or source")
        else:
            out[concept] = text
    problems += [f"no definition of {c!r}" for c in concepts() if c not in out]
    if problems:
        raise TableError(f"{data_dir() / 'concept_definitions.csv'}: {len(problems)} "
                         f"problem(s); first: {problems[0]}")
    return out


def migrate_old_query_table(path: str | Path) -> tuple[list[QueryTerm], Counter]:
    """The terms of an old-format table (``concept, country, language, english_query,
    native_query, native_term, source, reviewed``), per (concept, country), not reviewed.

    ``english_term`` is the old English query without its country name; an old
    ``reviewed=true`` left no reviewer record, so it becomes a note asking for a review, not
    ``source=reviewed``. Returns the terms and counts (migrated, skipped and why)."""
    path = Path(path)
    counts: Counter = Counter()
    out: dict[tuple[str, str], QueryTerm] = {}
    with path.open(newline="", encoding="utf-8") as f:
        reader = StrictDictReader(f, str(path), TableError)
        missing = [c for c in ("concept", "country", "native_term") if c not in
                   (reader.fieldnames or [])]
        if missing:
            raise TableError(f"{path}: not a query table (missing columns {missing})")
        for r in reader:
            concept, term = normalize_term(r.get("concept")), normalize_term(r.get("native_term"))
            try:
                c = country(r.get("country") or "")
            except TableError:
                counts["skipped_unknown_country"] += 1
                continue
            if not concept or not term or (concept, c.code) in out:
                counts["skipped_empty" if not concept or not term else "skipped_duplicate"] += 1
                continue
            english = normalize_term(r.get("english_query")).removesuffix(f" {c.name}").strip() or concept
            old_source = normalize_term(r.get("source"))
            notes = ["migrated from the per-language table"]
            if old_source and old_source not in ("generated", "authors"):
                notes.append(f"old source {old_source}")
            if normalize_term(r.get("reviewed")).lower() in ("true", "1", "yes"):
                notes.append("old table said reviewed=true with no reviewer record: review again")
            source = old_source if old_source in ("generated", "authors") else "generated"
            out[(concept, c.code)] = query_term(concept, c, term, english, source,
                                                "; ".join(notes))
            counts["migrated"] += 1
    return list(out.values()), counts


def term_country(keys: Container[tuple[str, str]], concept: str, language: str,
                 country_code: str) -> str | None:
    """Whose term writes ``concept`` in ``language`` for the images of ``country_code``.

    The rule (``3xcm-matrix``): a country whose language it is gets its own term (ARG's Spanish
    query is the es-AR term); any other country gets the term of the first country of that
    language in countries.csv order that has one (USA for English, ESP for Spanish, PRT for
    Portuguese). ``keys``: the (concept, country) pairs that have a term; None when none fits.
    The text a query uses for another country's images is that row's generic term
    (:func:`term_in_language`, :func:`generic_terms`).
    """
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
