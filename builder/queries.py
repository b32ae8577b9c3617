"""Stage ``queries``: the text query of every kept concept in every country.

One term per concept and country (:mod:`builder.query_terms`), its english and native search
queries. docs/builder.md, "Stage queries"."""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from string import Template
from typing import NamedTuple

from pydantic import BaseModel, Field
from tqdm import tqdm

from builder import stagekit
from builder.catalog import Catalog, record_llm_request
from builder.concept_list import load_curated
from builder.llm.base import BaseLLM, LLMConfig, LLMResult, LLMSetupError
from builder.llm.client import llm_for
from builder.llm.offline import OfflineLLM
from builder.prompts import load_prompt
from builder.query_terms import (
    catalog_terms,
    english_term,
    resolve,
    resolved,
    table_terms,
    upsert_terms,
)
from builder.stagekit import StageInputError
from builder.statuses import ConceptStatus, QueryStatus
from core import datatables, query_table
from core.clikit import report
from core.options import from_args, group, option

log = logging.getLogger(__name__)

STAGE = "queries"
PROMPT = ("queries.txt", ("concept", "definition", "language", "language_name", "countries",
                          "known_terms"))
SUBCOMMANDS = ("import", "diff")
NO_TERM = "offline: no native term"


@dataclass
class QueriesConfig:
    """The stage's flags (``core.options``)."""

    countries: str = option("all or codes/names, comma-separated", "all")
    no_table: bool = option("ignore data/queries.csv (ask the LLM)", False)
    write_table: str | None = option("write the catalog's terms as a data/queries.csv and exit",
                                     None, metavar="FILE")
    llm: LLMConfig = group("LLM", LLMConfig)


class CountryTerm(BaseModel):
    country: str = Field(min_length=1, max_length=80)
    native_term: str = Field(min_length=1, max_length=120)


class TermAnswer(BaseModel):
    english_term: str = Field(min_length=1, max_length=120)
    terms: list[CountryTerm] = Field(min_length=1)


def target_concepts(catalog: Catalog) -> list[str]:
    rows = catalog.query("SELECT name FROM concepts WHERE status=? ORDER BY name",
                         (ConceptStatus.KEPT,))
    if rows:
        return [r["name"] for r in rows]
    if catalog.one("SELECT COUNT(*) FROM concepts"):
        raise StageInputError("no kept concepts: run `python -m builder.concept_dedup` first")
    log.info("no concepts in the catalog: using the curated list")
    return load_curated(None)


def _answer_country(name: str) -> datatables.Country:
    """A country as the model wrote it (``"Portugal"``, also ``"Portugal (pt-PT)"``)."""
    return datatables.country(name.split(" (")[0])


def _validator(group: list[datatables.Country]):
    want = {c.code for c in group}

    def check(ans: TermAnswer) -> str | None:
        got: set[str] = set()
        for t in ans.terms:
            try:
                got.add(_answer_country(t.country).code)
            except datatables.TableError:
                return f"unknown country {t.country!r}"
            if not t.native_term.strip():
                return f"empty native_term for {t.country}"
        if got != want:
            return f"countries {sorted(got)} != requested {sorted(want)}"
        return None if ans.english_term.strip() else "empty english_term"

    return check


@dataclass
class _Ctx:
    """What every request needs; ``known`` grows with every answer (hints, offline twin)."""

    known: dict[tuple[str, str], query_table.QueryTerm]
    llm: BaseLLM
    template: Template
    prompt_sha: str
    run_id: int
    definitions: dict[str, str] = field(default_factory=dict)  # data/concept_definitions.csv


def _same_language(concept: str, lang: str, ctx: _Ctx) -> list[tuple[datatables.Country, str]]:
    return [(c, ctx.known[(concept, c.code)].native_term) for c in datatables.countries()
            if c.language == lang and (concept, c.code) in ctx.known]


def _ask(concept: str, lang: str, group: list[datatables.Country], ctx: _Ctx) -> LLMResult:
    """One structured request for the countries of ``lang`` still without a term."""
    others = _same_language(concept, lang, ctx)

    def offline() -> dict:
        term = others[0][1] if others else concept
        return {"english_term": english_term(concept, ctx.known),
                "terms": [{"country": c.name, "native_term": term} for c in group]}

    hint = ("Terms already chosen for other countries of this language (keep them where usage "
            "is the same): " + "; ".join(f'{c.name}: "{t}"' for c, t in others)) if others else ""
    meaning = ctx.definitions.get(concept)
    prompt = ctx.template.substitute(
        concept=concept, definition=f"What it means: {meaning}." if meaning else "",
        language=lang, language_name=group[0].language_name,
        countries="; ".join(f"{c.name} ({c.locale})" for c in group), known_terms=hint)
    return ctx.llm.generate_structured(prompt, TermAnswer, template_sha=ctx.prompt_sha,
                                       validate=_validator(group), offline=offline)


def _answered(concept: str, lang: str, group: list[datatables.Country], res: LLMResult,
              ctx: _Ctx) -> list[tuple[query_table.QueryTerm, str, str | None]]:
    """(term, queries source, reason) of each country of a successful answer."""
    by_code = {_answer_country(t.country).code: t.native_term.strip() for t in res.value.terms}
    offline = ctx.llm.provider == "offline"
    others = _same_language(concept, lang, ctx)
    note, reason = "", None
    if offline:
        note = f"offline: the term of {others[0][0].code}" if others else NO_TERM
        reason = None if others else NO_TERM
    out = []
    for c in group:
        t = query_table.query_term(concept, c, by_code[c.code], res.value.english_term.strip(),
                              "generated", note)
        out.append((t, "offline" if offline else "generated", reason))
    return out


def _query_source(term: query_table.QueryTerm, origin: str) -> str:
    """``queries.source``: where the stage took the term from."""
    if origin == "table":
        return "table"
    if term.source in ("authors", "reviewed"):
        return term.source
    return "offline" if term.note.startswith("offline") else "generated"


class QueryRow(NamedTuple):
    """One row of ``queries``: the text the crawl searches for (concept, country, kind)."""

    concept: str
    country: str
    kind: str  # english / native
    language: str
    text: str
    source: str  # table / generated / reviewed / authors / offline / ...
    native_term: str | None = None
    status: str = QueryStatus.OK
    reason: str | None = None
    run_id: int | None = None


def upsert_queries(con: sqlite3.Connection, rows: Iterable[QueryRow]) -> int:
    """Insert or replace ``rows`` in ``queries``; returns how many."""
    rows = list(rows)
    con.executemany("INSERT OR REPLACE INTO queries (concept, country, kind, language, text,"
                    " source, native_term, status, reason, run_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    rows)  # the fields of QueryRow, in order
    return len(rows)


def _pair(concept: str, c: datatables.Country, english: str, native: str, source: str,
          term: str | None, status: str, reason: str | None, run_id: int) -> list[QueryRow]:
    """The ``english`` and ``native`` rows of ``queries`` of one (concept, country)."""
    return [QueryRow(concept, c.code, "english", "en", english, source, term, QueryStatus.OK,
                     None, run_id),
            QueryRow(concept, c.code, "native", c.language, native, source, term, status, reason,
                     run_id)]


def _rows(decided: list[tuple[query_table.QueryTerm, str, str | None]],
          run_id: int) -> list[QueryRow]:
    """The ``queries`` rows of decided terms."""
    rows = []
    for t, source, reason in decided:
        c = datatables.country(t.country)
        rows += _pair(t.concept, c, f"{t.english_term} {c.name}",
                      f"{t.native_term} {c.native_name}", source, t.native_term, QueryStatus.OK,
                      reason, run_id)
    return rows


def _known(concept: str, countries: list[datatables.Country], cat: dict, table: dict, ctx: _Ctx
           ) -> tuple[list[query_table.QueryTerm], list[QueryRow], dict[str, list[datatables.Country]]]:
    """Terms known without asking: (to store, ``queries`` rows, countries left by language)."""
    decided: list[tuple[query_table.QueryTerm, str, str | None]] = []
    missing: dict[str, list[datatables.Country]] = {}
    for c in countries:
        term, origin = resolve(cat.get((concept, c.code)), table.get((concept, c.code)))
        if term is None:
            missing.setdefault(c.language, []).append(c)
        else:
            reason = NO_TERM if term.note == NO_TERM else None  # an earlier offline fallback
            decided.append((term, _query_source(term, origin), reason))
    # the catalog keeps no generic_term (write_table takes it from the shipped table)
    store = [t for t, _, _ in decided if cat.get(t.key) != replace(t, generic_term="")]
    return store, _rows(decided, ctx.run_id), missing


def _asked(concept: str, lang: str, group: list[datatables.Country], ctx: _Ctx
           ) -> tuple[list[query_table.QueryTerm], list[QueryRow], tuple[str, LLMResult]]:
    """Ask for one language's countries: (terms to store, ``queries`` rows, the request)."""
    res = _ask(concept, lang, group, ctx)
    item = f"concept={concept};language={lang};countries={','.join(c.code for c in group)}"
    if res.ok:
        new = _answered(concept, lang, group, res, ctx)
        ctx.known.update({t.key: t for t, _, _ in new})
        return [t for t, _, _ in new], _rows(new, ctx.run_id), (item, res)
    source = "offline" if ctx.llm.provider == "offline" else "generated"
    english = english_term(concept, ctx.known)
    rows = [r for c in group for r in _pair(concept, c, f"{english} {c.name}", "", source, None,
                                            res.status, res.error, ctx.run_id)]
    return [], rows, (item, res)


def _write(catalog: Catalog, store: list[query_table.QueryTerm], rows: list[QueryRow],
           request: tuple[str, LLMResult] | None, ctx: _Ctx) -> None:
    """One transaction: terms, ``queries`` rows and the LLM request that gave them."""
    with catalog.tx() as con:
        upsert_terms(con, store, ctx.run_id)
        upsert_queries(con, rows)
        if request is not None:
            record_llm_request(con, STAGE, *request, ctx.llm.spec, ctx.prompt_sha, ctx.run_id)


def _definitions() -> dict[str, str]:
    """The concept definitions the prompt shows (none, with a warning, if the data has none)."""
    try:
        return datatables.concept_definitions()
    except datatables.TableError as exc:
        log.warning("queries: prompts without concept definitions: %s", exc)
        return {}


def run_queries(catalog: Catalog, llm: BaseLLM, countries: list[datatables.Country],
                concepts: list[str] | None = None, use_table: bool = True) -> dict:
    """Decide the term of every (concept, country) and fill ``queries``; returns the counts."""
    from_catalog = concepts is None
    concepts = concepts if concepts is not None else target_concepts(catalog)
    template, prompt_sha = load_prompt(*PROMPT)
    table = table_terms(use_table)
    params = {"countries": [c.code for c in countries], "n_concepts": len(concepts),
              "use_table": use_table, "llm": llm.spec, "prompt_sha": prompt_sha}
    with stagekit.stage_run(catalog, STAGE, params, inputs=concepts, llm=llm) as rec:
        if from_catalog:
            _mark_stale(catalog, concepts)
        cat = catalog_terms(catalog)
        known = resolved(cat, table)
        ctx = _Ctx(known, llm, template, prompt_sha, rec.run_id, _definitions())
        asked, fresh, ok, last = 0, 0, 0, None
        for concept in tqdm(concepts, desc="queries", unit="concept"):
            store, rows, missing = _known(concept, countries, cat, table, ctx)
            _write(catalog, store, rows, None, ctx)
            for lang, group in missing.items():  # each answer stored as it comes (resumable)
                new, rows, (item, res) = _asked(concept, lang, group, ctx)
                _write(catalog, new, rows, (item, res), ctx)
                asked += 1
                if not res.cached:  # answered now (a cached failure is no news)
                    fresh, ok, last = fresh + 1, ok + res.ok, res.error or last
        rec.counts = _counts(catalog, asked)
        rec.summary = stagekit.format_summary(
            f"queries: {rec.counts['native_ok']} native queries ok, "
            f"{rec.counts['native_not_ok']} not ok ({asked} LLM groups this run)",
            {"native by source": rec.counts["by_source"],
             "terms by source": rec.counts["terms_by_source"],
             "not ok by status": rec.counts["by_status"],
             "native ok by country": rec.counts["by_country"],
             "not ok by concept": rec.counts["not_ok_by_concept"]})
        stagekit.nothing_succeeded(STAGE, fresh, ok, last)
    log.debug("%s", rec.summary)
    return rec.counts


def _mark_stale(catalog: Catalog, concepts: list[str]) -> None:
    """Queries of concepts that are no longer kept: ``status='stale'`` (crawl skips them)."""
    keep = set(concepts)
    rows = catalog.query("SELECT DISTINCT concept FROM queries WHERE status=?",
                         (QueryStatus.OK,))
    stale = [(QueryStatus.STALE, r[0], QueryStatus.OK) for r in rows if r[0] not in keep]
    if stale:
        with catalog.tx() as con:
            con.executemany("UPDATE queries SET status=?, reason='concept no longer kept'"
                            " WHERE concept=? AND status=?", stale)
        log.info("%d concepts no longer kept: their queries marked stale", len(stale))


def _counts(catalog: Catalog, groups: int) -> dict:
    native = "FROM queries WHERE kind='native'"
    ok, stale, grouped = QueryStatus.OK, QueryStatus.STALE, catalog.pairs
    return {
        "groups_this_run": groups,
        "native_ok": catalog.one(f"SELECT COUNT(*) {native} AND status=?", (ok,)),
        "native_not_ok": catalog.one(f"SELECT COUNT(*) {native} AND status!=?", (ok,)),
        "by_source": grouped(f"SELECT source, COUNT(*) {native} GROUP BY source"),
        "terms_by_source": grouped("SELECT source, COUNT(*) FROM query_terms GROUP BY source"),
        "by_status": grouped(f"SELECT status, COUNT(*) {native} AND status!=? GROUP BY status",
                             (ok,)),
        "by_country": grouped(f"SELECT country, COUNT(*) {native} AND status=? GROUP BY country",
                              (ok,)),
        "not_ok_by_concept": grouped(f"SELECT concept, COUNT(*) {native} AND status NOT IN"
                                     " (?, ?) GROUP BY concept", (ok, stale)),
    }


def write_table(catalog: Catalog, out: str | Path) -> int:
    """Write the catalog's current terms as a ``data/queries.csv``; returns rows."""
    current = {(r[0], r[1]) for r in catalog.query(
        "SELECT concept, country FROM queries WHERE kind='native' AND status=?",
        (QueryStatus.OK,))}
    try:  # the catalog keeps no generic_term: the shipped row's where the term is the same
        shipped = query_table.query_terms()
    except datatables.TableError:
        shipped = {}
    terms = [query_table.with_shipped_generic(t, shipped) for k, t in catalog_terms(catalog).items()
             if k in current]
    return query_table.write_query_table(out, terms)


def build_parser() -> argparse.ArgumentParser:
    p = stagekit.stage_parser("builder.queries", __doc__, QueriesConfig)
    p.epilog = "other commands: import --published DATASET | diff [--dataset D] (each with --help)"
    return p


def _needs_llm(catalog: Catalog, countries: list[datatables.Country], use_table: bool) -> bool:
    """Whether some (concept, country) has no term in the catalog nor the table."""
    known = resolved(catalog_terms(catalog), table_terms(use_table))
    return any((k, c.code) not in known for k in target_concepts(catalog) for c in countries)


def _cli(args: argparse.Namespace) -> int:
    cfg = from_args(QueriesConfig, args)
    countries = datatables.resolve_countries(cfg.countries)  # bad input before the catalog opens
    with Catalog.open(args.workdir) as catalog:
        if cfg.write_table:
            n = write_table(catalog, cfg.write_table)
            report(f"wrote {n} query terms to {cfg.write_table}")
            return 0
        try:
            llm = llm_for(cfg.llm, catalog.workdir.llm_cache_path)
        except LLMSetupError:  # no key: fine while the table and catalog hold every term
            if _needs_llm(catalog, countries, not cfg.no_table):
                raise
            log.info("every term is in the table or the catalog: no LLM needed")
            llm = OfflineLLM(None)
        run_queries(catalog, llm, countries, use_table=not cfg.no_table)
        stagekit.report_run(catalog, STAGE)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        from builder import published_terms

        return published_terms.main(argv)
    return stagekit.stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
