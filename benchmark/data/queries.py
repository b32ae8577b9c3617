"""The text queries of 3XCM: where they come from, and the record of that in every result.

A 3XCM text query is one term per (concept, country): the concept as people in that country
would type it. Four sources, chosen with ``--query-source`` (``auto`` picks the dataset's own):

==========  ==================================================================  ===============
source      the query text of a triplet                                         default for
==========  ==================================================================  ===============
published   ``concept_in_native`` of its query image (the authors' own term)    the authors'
                                                                                published layout
release     the release's own ``query_text`` column                             a release
table       ``native_term`` of ``data/queries.csv`` for (concept, country)      ``--triplets-csv``
FILE        a CSV ``concept,country,text`` (or the older ``concept,language,    never (``--queries
            text``: a term for every country of that language)                 FILE`` names one)
==========  ==================================================================  ===============

Every source becomes a :class:`QueryTable` keyed by (concept, ISO country), each term with
its review status (``source``: generated / authors / reviewed / ...; a term counts as reviewed
only when ``source == "reviewed"``; a published or release term is reviewed when
``data/queries.csv`` holds the same term as reviewed). :func:`provenance` is what a result
records (the table's sha256, its source mix, the share of reviewed terms per country) and
:func:`warn_unreviewed` logs one warning per run when unreviewed terms are scored.
"""

from __future__ import annotations

import csv
import io
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark import tables
from benchmark.data import DataError
from benchmark.data.rules import first_items
from benchmark.files import sha256_bytes, sha256_file, sha256_text

log = logging.getLogger(__name__)

KINDS = ("published", "release", "table")
DEFAULT_FOR_LAYOUT = {"release": "release", "published": "published", "authors-csv": "table"}
SOURCE_HELP = (
    "query texts: auto (default: the dataset's own: concept_in_native for the authors' "
    "published layout, query_text for a release, data/queries.csv for --triplets-csv with "
    "--images), published, release, table (native_term of data/queries.csv by concept and "
    "country), or a CSV FILE")
REVIEWED = "reviewed"


@dataclass(frozen=True)
class Term:
    text: str
    source: str  # generated / authors / reviewed / user / unmatched ...


@dataclass
class QueryTable:
    """(concept, ISO country) -> :class:`Term`, and where the terms came from."""

    kind: str  # published / release / table / file
    origin: str  # data/queries.csv, the file, the dataset
    sha256: str
    terms: dict[tuple[str, str], Term]
    notes: dict[str, Any] = field(default_factory=dict)


def resolve_source(query_source: str | None, queries: Path | None, layout: str) -> tuple[str, Path | None]:
    """(kind, file) from ``--query-source`` and ``--queries`` for a dataset ``layout``
    (release / published / authors-csv)."""
    spec = (query_source or "auto").strip()
    if queries is not None:
        if spec not in ("auto", str(queries)):
            raise DataError(f"--queries {queries} and --query-source {spec} disagree: give one")
        return "file", Path(queries)
    if spec == "auto":
        return DEFAULT_FOR_LAYOUT[layout], None
    if spec in KINDS:
        if spec in ("published", "release") and DEFAULT_FOR_LAYOUT[layout] != spec:
            raise DataError(f"--query-source {spec}: the dataset is not in the {spec} layout "
                            f"(it is {layout}); use table or a CSV FILE")
        return spec, None
    path = Path(spec)
    if not path.is_file():
        raise DataError(f"--query-source: {spec!r} is none of auto, {', '.join(KINDS)} and no "
                        "such file")
    return "file", path


# -- reading the sources ------------------------------------------------------------------------
def _decode(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{what}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                        f"{e.start}); save it as UTF-8") from e


def default_table() -> QueryTable:
    """``native_term`` of ``data/queries.csv`` by (concept, country), with each row's source."""
    try:  # the one reader of the table (validated: locales, sources, reviewers)
        path = tables.data_path("queries.csv")
        rows = tables.query_terms()
    except tables.TableError as e:
        raise DataError(f"no query texts: {e}; pass --queries FILE") from e
    if not rows:
        raise DataError(f"{path}: no rows")
    terms = {k: Term(t.native_term, t.source) for k, t in rows.items() if t.native_term.strip()}
    return QueryTable("table", "data/queries.csv", sha256_file(path), terms)


def read_file(path: Path) -> QueryTable:
    """A user's CSV: ``concept,country,text`` (country: ISO code, label or name) or the older
    ``concept,language,text`` (a term for every country of that language); an optional
    ``source`` column gives each term's review status."""
    what = f"--queries {path}"
    if not path.is_file():
        raise DataError(f"{what}: no such file")
    raw = path.read_bytes()
    reader = csv.DictReader(io.StringIO(_decode(raw, what)))
    cols = list(reader.fieldnames or [])
    key = "country" if "country" in cols else "language" if "language" in cols else None
    if key is None or "concept" not in cols or "text" not in cols:
        raise DataError(f"{what}: expected columns concept,country,text (or concept,language,"
                        f"text); found {','.join(cols) or 'none'}")
    rows = list(reader)
    if not rows:
        raise DataError(f"{what}: no query texts (a header and no rows)")
    by_lang: dict[str, list[str]] = {}
    for c in tables.countries():
        by_lang.setdefault(c.language, []).append(c.code)
    terms: dict[tuple[str, str], Term] = {}
    empty, conflicts, unknown = [], [], set()
    for n, r in enumerate(rows, 2):
        concept, text, k = (r.get("concept") or ""), (r.get("text") or "").strip(), r.get(key) or ""
        if not text:
            empty.append(f"line {n}")
            continue
        if key == "country":
            try:
                codes = [tables.country(k).code]
            except tables.TableError:
                unknown.add(k)
                continue
        else:
            codes = by_lang.get(k, [])
        for code in codes:
            old = terms.setdefault((concept, code), Term(text, r.get("source") or "user"))
            if old.text != text:
                conflicts.append(f"{concept}/{code}")
    if empty:
        raise DataError(f"{what}: empty query text in {len(empty)} row(s) (first: "
                        f"{first_items(empty)})")
    if unknown:
        raise DataError(f"{what}: unknown country(ies) {first_items(sorted(unknown))}")
    if conflicts:
        raise DataError(f"{what}: two different texts for {len(conflicts)} concept/country "
                        f"pair(s) (first: {first_items(conflicts)})")
    notes: dict[str, Any] = {}
    if key == "language":
        notes["keyed_by"] = "language (old format): each term applies to every country of it"
        log.info("%s is keyed by language (old format): each term is used for every country "
                 "of its language", path)
    return QueryTable("file", str(path), sha256_bytes(raw), terms, notes)


def _most_common(pairs: pd.DataFrame, key: list[str], col: str) -> tuple[dict, int]:
    """(key -> most frequent non-empty text, ties by text; number of keys with several texts)."""
    df = pairs[pairs[col].notna() & (pairs[col].astype(str).str.strip() != "")]
    counts = df.groupby(key + [col]).size().reset_index(name="n")
    counts = counts.sort_values(key + ["n", col], ascending=[True] * len(key) + [False, True])
    best = counts.drop_duplicates(key)
    several = int((counts.groupby(key).size() > 1).sum())
    return {tuple(r[:-2]): r[-2] for r in best.itertuples(index=False)}, several


def _reviewed_source(pair: tuple[str, str], text: str, fallback: str,
                     default: QueryTable | None) -> str:
    t = default.terms.get(pair) if default else None
    if t is not None and t.text == text:
        return t.source if fallback == "unmatched" or t.source == REVIEWED else fallback
    return fallback


def _default_or_none() -> QueryTable | None:
    try:
        return default_table()
    except DataError:
        return None


def from_published(meta: pd.DataFrame, origin: str) -> QueryTable:
    """The authors' ``concept_in_native`` per (concept, country) (the most frequent one where
    a pair's images disagree, counted in ``notes``); ``sha256`` over image id and term."""
    best, several = _most_common(meta, ["concept", "country"], "concept_in_native")
    default = _default_or_none()
    terms = {k: Term(v, _reviewed_source(k, v, "authors", default)) for k, v in best.items()}
    lines = sorted(f"{i}\t{t}" for i, t in zip(meta["image_id"], meta["concept_in_native"],
                                                strict=True))
    notes = {"pairs_with_several_terms": several} if several else {}
    return QueryTable("published", origin, sha256_text("\n".join(lines)), terms, notes)


def from_release(tr: pd.DataFrame, origin: str) -> QueryTable:
    """The release's ``query_text`` per (concept, country); a term's source is that of
    ``data/queries.csv`` where the table holds the same term, else ``unmatched``."""
    best, several = _most_common(tr, ["query_concept", "query_country"], "query_text")
    default = _default_or_none()
    terms = {k: Term(v, _reviewed_source(k, v, "unmatched", default)) for k, v in best.items()}
    lines = sorted(f"{i}\t{t}" for i, t in zip(tr["triplet_id"], tr["query_text"], strict=True))
    notes = {"pairs_with_several_terms": several} if several else {}
    return QueryTable("release", origin, sha256_text("\n".join(lines)), terms, notes)


def load_table(kind: str, path: Path | None) -> QueryTable:
    """The ``table`` or ``file`` source (the others are built from the dataset)."""
    return read_file(path) if kind == "file" and path is not None else default_table()


# -- using and recording them -------------------------------------------------------------------
def apply_table(tr: pd.DataFrame, table: QueryTable) -> pd.DataFrame:
    """``tr`` with ``query_text`` from the table by (query_concept, query_country); a pair
    without a term is one error line naming them."""
    keys = list(zip(tr["query_concept"], tr["query_country"], strict=True))
    missing = sorted({f"{c}/{k}" for c, k in keys if (c, k) not in table.terms})
    if missing:
        raise DataError(f"no query text in {table.origin} for {len(missing)} concept/country "
                        f"pair(s): {first_items(missing)}")
    out = tr.copy()
    out["query_text"] = [table.terms[k].text for k in keys]
    return out


def provenance(table: QueryTable, used: Any) -> dict[str, Any]:
    """What a result records about its query texts: source, origin, the table's sha256 and
    source mix, and the terms scored (``used``: their (concept, country) keys, or the
    triplets, whose query concept and country are the keys): their source mix and the share
    reviewed per country."""
    if isinstance(used, pd.DataFrame):
        used = zip(used["query_concept"], used["query_country"], strict=True)
    keys = sorted(set(used))
    src = {p: (table.terms[p].source if p in table.terms else "unmatched") for p in keys}
    per_country: dict[str, list[bool]] = {}
    for (_, k), s in src.items():
        per_country.setdefault(k, []).append(s == REVIEWED)
    order = [c.code for c in tables.countries()]
    countries = sorted(per_country, key=lambda k: (order.index(k) if k in order else len(order), k))
    return {
        "source": table.kind, "origin": table.origin, "sha256": table.sha256,
        "table_source_mix": dict(sorted(Counter(t.source for t in table.terms.values()).items())),
        "used_terms": len(keys),
        "used_source_mix": dict(sorted(Counter(src.values()).items())),
        "reviewed_share_by_country": {k: sum(per_country[k]) / len(per_country[k])
                                      for k in countries},
        "unreviewed_terms": sum(s != REVIEWED for s in src.values()),
        **table.notes,
    }


def warn_unreviewed(prov: dict[str, Any], memo: dict[Any, Any]) -> None:
    """One warning per run (``memo``: the run's shared memo) when unreviewed terms are scored."""
    if prov["unreviewed_terms"] and not memo.get(("warned", "unreviewed-queries")):
        memo[("warned", "unreviewed-queries")] = True
        log.warning("scoring with %d of %d query terms not reviewed by a native speaker "
                    "(query source %s: %s); the result records the share per country",
                    prov["unreviewed_terms"], prov["used_terms"], prov["source"], prov["origin"])


def key_in_language(table: QueryTable, concept: str, country: str,
                    language: str) -> tuple[str, str] | None:
    """The (concept, country) key of the term that writes ``concept`` in ``language`` for a
    triplet of ``country`` (``3xcm-matrix``; the rule is :func:`benchmark.tables.term_country`);
    None when no country of the language has a term."""
    code = tables.term_country(table.terms, concept, language, country)
    return None if code is None else (concept, code)


def generic_texts(table: QueryTable) -> dict[tuple[str, str], str]:
    """(concept, country) key -> the text ``3xcm-matrix`` asks for *other* countries' images
    with that key's term: the row's ``generic_term`` in ``data/queries.csv`` (a country's own
    proper name such as PRT's *Assembleia da República* becomes *parlamento*), only where
    ``table`` holds data/queries.csv's own term for the key (another source's term is kept)."""
    try:
        rows = tables.query_terms()
    except tables.TableError as e:
        log.warning("no generic terms for other countries' queries: %s", e)
        return {}
    return {k: rows[k].generic for k, t in table.terms.items()
            if k in rows and rows[k].generic != t.text and rows[k].native_term == t.text}