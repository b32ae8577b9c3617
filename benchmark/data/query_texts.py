"""The text queries one evaluation scores, and the record of them in every result.

One term per (concept, country), from ``--query-source`` (:data:`SOURCE_HELP`) as a
:class:`QueryTexts`, each term with its review status; :func:`provenance` is what a result
records.
"""

from __future__ import annotations

import io
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from core import datatables, query_table
from core.errors import DataError
from core.files import sha256_bytes, sha256_file, sha256_text
from core.rules import first_items, query_text_violations, raise_on_violations
from core.text import StrictDictReader, majority_terms, normalize_term, term_counts

if TYPE_CHECKING:
    from benchmark.data.dataset import XCMDataset

log = logging.getLogger(__name__)

KINDS = ("published", "release", "table")
DEFAULT_FOR_LAYOUT = {"release": "release", "published": "published", "authors-csv": "table"}
SOURCE_HELP = (
    "query texts: auto (default: the dataset's own: concept_in_native for the authors' "
    "published layout, query_text for a release, data/queries.csv for --triplets-csv with "
    "--images), published, release, table (native_term of data/queries.csv by concept and "
    "country), or a CSV FILE")
QUERY_TERMS = ("own", "majority")
QUERY_TERM_HELP = (
    "where a dataset gives a (concept, country) several texts (the authors' published layout: "
    "each image's concept_in_native; a release: each triplet's query_text): own (default; "
    "the authors' evaluator: each triplet embeds its own query image's term) or majority (the "
    "most frequent text of the pair for all of its triplets). The result records how many "
    "triplets' text differs between the two")


@dataclass(frozen=True)
class Term:
    text: str
    source: str  # generated / authors / reviewed / user / unmatched ...


@dataclass
class QueryTexts:
    """(concept, ISO country) -> :class:`Term`, and where the terms came from."""

    kind: str  # published / release / table / file
    origin: str  # data/queries.csv, the file, the dataset
    sha256: str
    terms: dict[tuple[str, str], Term]
    notes: dict[str, Any] = field(default_factory=dict)
    # (concept, country, text) -> source of every text the dataset gives a pair (published and
    # release sources, whose pairs may have several texts; ``terms`` holds the majority one)
    text_sources: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # (concept, country, text) -> native speakers who reviewed it, where the source says
    text_reviewers: dict[tuple[str, str, str], int] = field(default_factory=dict)
    status_from: str = "the table"  # where review statuses come from (recorded)

    def source_of(self, concept: str, country: str, text: str | None = None) -> str:
        """The review status of ``text`` for (concept, country) (``None``: the pair's term)."""
        if text is not None and (concept, country, text) in self.text_sources:
            return self.text_sources[(concept, country, text)]
        t = self.terms.get((concept, country))
        if t is None or (text is not None and t.text != text):
            return "unmatched"
        return t.source


def resolve_source(query_source: str | None, layout: str) -> tuple[str, Path | None]:
    """(kind, file) from ``--query-source`` for a dataset ``layout``."""
    spec = (query_source or "auto").strip()
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
def default_table() -> QueryTexts:
    """``native_term`` of ``data/queries.csv`` by (concept, country), with each row's source."""
    try:  # the one reader of the table (validated: locales, sources, reviewers)
        path = datatables.data_path("queries.csv")
        rows = query_table.query_terms()
    except datatables.TableError as e:
        raise DataError(f"no query texts: {e}; pass --query-source FILE") from e
    if not rows:
        raise DataError(f"{path}: no rows")
    terms = {k: Term(t.native_term, t.source) for k, t in rows.items() if t.native_term.strip()}
    reviewers = {(*k, t.native_term): int(t.reviewers) for k, t in rows.items()
                 if t.native_term.strip()}
    return QueryTexts("table", "data/queries.csv", sha256_file(path), terms,
                      text_reviewers=reviewers)


def read_file(path: Path) -> QueryTexts:
    """A user's CSV: ``concept,country,text`` or ``concept,language,text`` (every country of
    that language); an optional ``source`` column gives each term's review status."""
    what = f"--query-source {path}"
    if not path.is_file():
        raise DataError(f"{what}: no such file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{what}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                        f"{e.start}); save it as UTF-8") from e
    reader = StrictDictReader(io.StringIO(text, newline=""), what, DataError)
    cols = list(reader.fieldnames or [])
    key = "country" if "country" in cols else "language" if "language" in cols else None
    if key is None or "concept" not in cols or "text" not in cols:
        raise DataError(f"{what}: expected columns concept,country,text (or concept,language,"
                        f"text); found {','.join(cols) or 'none'}")
    rows = list(reader)
    if not rows:
        raise DataError(f"{what}: no query texts (a header and no rows)")
    by_lang: dict[str, list[str]] = {}
    for c in datatables.countries():
        by_lang.setdefault(c.language, []).append(c.code)
    terms: dict[tuple[str, str], Term] = {}
    empty, conflicts, unknown = [], [], set()
    for n, r in enumerate(rows, 2):
        concept, text = normalize_term(r.get("concept")), normalize_term(r.get("text"))
        k = normalize_term(r.get(key))
        if not text:
            empty.append(f"line {n}")
            continue
        if key == "country":
            try:
                codes = [datatables.country(k).code]
            except datatables.TableError:
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
    return QueryTexts("file", str(path), sha256_bytes(raw), terms, notes)


def _reviewed_source(pair: tuple[str, str], text: str, fallback: str,
                     default: QueryTexts | None) -> str:
    t = default.terms.get(pair) if default else None
    if t is not None and t.text == text:
        return t.source if fallback == "unmatched" or t.source == query_table.REVIEWED else fallback
    return fallback


def choose_term(tr: pd.DataFrame, table: QueryTexts, choice: str) -> tuple[pd.DataFrame,
                                                                           dict[str, Any]]:
    """(``tr`` with ``--query-term`` own or majority applied, the notes a result records)."""
    if choice not in QUERY_TERMS:
        raise DataError(f"--query-term {choice!r}: choose one of {', '.join(QUERY_TERMS)}")
    keys = zip(tr["query_concept"], tr["query_country"], strict=True)
    majority = [table.terms[k].text if k in table.terms else None for k in keys]
    differ = int(sum(m is not None and m != t for m, t in zip(majority, tr["query_text"],
                                                                strict=True)))
    notes = {"query_term": choice, "triplets_own_term_not_majority": differ}
    return (apply_table(tr, table) if choice == "majority" else tr), notes


def _dataset_texts(df: pd.DataFrame, key: list[str], col: str, id_col: str
                   ) -> tuple[dict, dict[str, Any], str]:
    """(pair -> its majority text, notes: pairs with several, sha256 of every item's text)."""
    texts: dict[tuple, list[Any]] = {}
    for *k, t in df[key + [col]].itertuples(index=False):
        texts.setdefault(tuple(k), []).append(
            None if t is None or (isinstance(t, float) and t != t) else t)
    best, several = {}, 0
    for k, ts in texts.items():
        if counts := term_counts(ts):
            best[k] = majority_terms(counts)
            several += len(counts) > 1
    lines = sorted(f"{i}\t{t}" for i, t in zip(df[id_col], df[col], strict=True))
    return best, {"pairs_with_several_terms": several} if several else {}, sha256_text(
        "\n".join(lines))


def _matched(kind: str, origin: str, df: pd.DataFrame, key: list[str], col: str, id_col: str,
             fallback: str, why: str) -> QueryTexts:
    """A dataset's texts, each with its status matched against data/queries.csv."""
    best, notes, sha = _dataset_texts(df, key, col, id_col)
    try:
        default: QueryTexts | None = default_table()
    except DataError:
        default = None
    terms = {k: Term(v, _reviewed_source(k, v, fallback, default)) for k, v in best.items()}
    rows = df[key + [col]].dropna().astype(str).drop_duplicates()
    texts = {(c, k, t): _reviewed_source((c, k), t, fallback, default)
             for c, k, t in rows.itertuples(index=False) if t.strip()}
    return QueryTexts(kind, origin, sha, terms, notes, texts,
                      status_from=f"the text matched against data/queries.csv ({why})")


def from_release(tr: pd.DataFrame, origin: str) -> QueryTexts:
    """The release's ``query_text`` per (concept, country), with its recorded review status."""
    key = ["query_concept", "query_country"]
    if not {"query_term_source", "query_term_reviewers"} <= set(tr.columns):
        return _matched("release", origin, tr, key, "query_text", "triplet_id", "unmatched",
                        "the release has no query_term_source column")
    best, notes, sha = _dataset_texts(tr, key, "query_text", "triplet_id")
    rows = tr[[*key, "query_text", "query_term_source", "query_term_reviewers"]].drop_duplicates(
        [*key, "query_text"])
    texts = {(c, k, t): str(s) for c, k, t, s, _ in rows.itertuples(index=False)}
    reviewers = {(c, k, t): int(n) for c, k, t, _, n in rows.itertuples(index=False)}
    terms = {k: Term(v, texts.get((*k, v), "unmatched")) for k, v in best.items()}
    return QueryTexts("release", origin, sha, terms, notes, texts, reviewers,
                      "release columns query_term_source, query_term_reviewers")


def table_for(ds: XCMDataset, query_source: str | None) -> QueryTexts:
    """The query texts ``--query-source`` chooses for ``ds``."""
    kind, path = resolve_source(query_source, ds.source_format)
    if kind == "published":  # each image's concept_in_native; the most frequent per pair
        return _matched("published", ds.dataset_id, ds.image_meta, ["concept", "country"],
                        "concept_in_native", "image_id", "authors",
                        "the authors' layout records none")
    if kind == "release":
        return from_release(ds.triplets, ds.dataset_id)
    return read_file(path) if path is not None else default_table()  # file, or table


# -- using and recording them -------------------------------------------------------------------
def with_query_table(ds: XCMDataset, table: QueryTexts, query_term: str = "own") -> XCMDataset:
    """``ds`` with the query texts of ``table`` (or its own, by ``query_term``) and their provenance."""
    tr = ds.triplets
    notes: dict[str, Any] = {}
    if table.kind in ("table", "file"):
        tr = apply_table(tr, table)
    else:
        tr, notes = choose_term(tr, table, query_term)
    return replace(ds, triplets=tr, query_texts={**provenance(table, tr), **notes})


def with_texts(ds: XCMDataset, query_source: str | None, query_term: str = "own") -> XCMDataset:
    """``ds`` with the texts ``query_source`` chooses applied, no triplet left without one."""
    table = table_for(ds, query_source)
    texted = with_query_table(ds, table, query_term)
    raise_on_violations(query_text_violations(texted.triplets), table.origin)
    return texted


def apply_table(tr: pd.DataFrame, table: QueryTexts) -> pd.DataFrame:
    """``tr`` with ``query_text`` from the table; pairs without a term are one error line."""
    keys = list(zip(tr["query_concept"], tr["query_country"], strict=True))
    missing = sorted({f"{c}/{k}" for c, k in keys if (c, k) not in table.terms})
    if missing:
        raise DataError(f"no query text in {table.origin} for {len(missing)} concept/country "
                        f"pair(s): {first_items(missing)}")
    out = tr.copy()
    out["query_text"] = [table.terms[k].text for k in keys]
    return out


def provenance(table: QueryTexts, used: Any) -> dict[str, Any]:
    """What a result records about its query texts and of the terms scored (``used``: the
    triplets, or (concept, country) keys): source mixes, the share reviewed per country."""
    if isinstance(used, pd.DataFrame):
        used = zip(used["query_concept"], used["query_country"], used["query_text"], strict=True)
    else:
        used = ((c, k, None) for c, k in used)
    terms = sorted(set(used), key=lambda x: (x[0], x[1], x[2] or ""))
    src = {p: table.source_of(*p) for p in terms}
    per_country: dict[str, list[bool]] = {}
    for (_, k, _), s in src.items():
        per_country.setdefault(k, []).append(s == query_table.REVIEWED)
    order = [c.code for c in datatables.countries()]
    countries = sorted(per_country, key=lambda k: (order.index(k) if k in order else len(order), k))
    return {
        "source": table.kind, "origin": table.origin, "sha256": table.sha256,
        "table_source_mix": dict(sorted(Counter(t.source for t in table.terms.values()).items())),
        "used_terms": len(terms),
        "used_source_mix": dict(sorted(Counter(src.values()).items())),
        "reviewed_share_by_country": {k: sum(per_country[k]) / len(per_country[k])
                                      for k in countries},
        "unreviewed_terms": sum(s != query_table.REVIEWED for s in src.values()),
        "review_status_from": table.status_from,
        **_reviewer_counts(table, terms),
        **table.notes,
    }


def _reviewer_counts(table: QueryTexts, terms: list[tuple[str, str, str | None]]
                     ) -> dict[str, Any]:
    """``used_reviewer_counts``: reviewers -> number of used terms, where the source records them."""
    if not table.text_reviewers:
        return {}
    counts: Counter = Counter()
    for c, k, t in terms:  # t None: the pair's term
        text = t if t is not None else getattr(table.terms.get((c, k)), "text", None)
        counts[str(table.text_reviewers.get((c, k, text), "unknown"))] += 1
    return {"used_reviewer_counts": dict(sorted(counts.items()))}


def warn_unreviewed(prov: dict[str, Any], memo: dict[Any, Any]) -> None:
    """One warning per run (``memo``: the run's shared memo) when unreviewed terms are scored."""
    if prov["unreviewed_terms"] and not memo.get(("warned", "unreviewed-queries")):
        memo[("warned", "unreviewed-queries")] = True
        log.warning("scoring with %d of %d query terms not reviewed by a native speaker "
                    "(query source %s: %s); the result records the share per country",
                    prov["unreviewed_terms"], prov["used_terms"], prov["source"], prov["origin"])


def generic_texts(table: QueryTexts) -> dict[tuple[str, str], str]:
    """(concept, country) -> the ``generic_term`` ``3xcm-matrix`` asks other countries' images."""
    try:
        rows = query_table.query_terms()
    except datatables.TableError as e:
        log.warning("no generic terms for other countries' queries: %s", e)
        return {}
    return {k: rows[k].generic for k, t in table.terms.items()
            if k in rows and rows[k].generic != t.text and rows[k].native_term == t.text}