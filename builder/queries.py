"""Stage ``queries``: English and native-language query text for every kept concept and country.

For every kept concept (``concepts.status='kept'``; with no concepts in the catalog, the curated
list ``data/concepts.txt``) and every chosen country, two rows go into the catalog's ``queries``
table: ``kind='english'`` (``"<concept> <country name>"``, the paper's "train Japan") and
``kind='native'`` (the concept and the country's name in the country's language), each carrying
``native_term``, the bare concept in the country's language that 3XCM uses as its text query.

Sources, in order:

1. ``table``: the shipped ``data/queries.csv`` row of that (concept, country).
2. ``generated``: one LLM request per (concept, language) for the countries of that language
   that the table lacks (prompt ``data/prompts/queries.txt``, structured, cached), so countries
   sharing a language share one term.
3. ``offline`` (``--llm offline``): the table's term of that (concept, language) when it has
   one, else the English concept (reason ``offline: no native term``); the country's native
   name from the table when known, else its English name.

A failed request leaves the native row ``status='failed'`` with the reason (raw text in
``llm_requests``); the next run asks again. Queries of a concept no longer kept (after a new
concept_dedup) are marked ``status='stale'``. ``--write-table FILE`` writes the catalog's queries
in the ``data/queries.csv`` format (``reviewed=false`` except table rows already reviewed).
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from string import Template

from pydantic import BaseModel, Field
from tqdm import tqdm

from benchmark import tables
from benchmark.files import atomic_write_text
from builder.catalog import Catalog, record_llm_request
from builder.curated import load_curated
from builder.llm import BaseLLM, LLMResult, add_llm_args, llm_from_args
from builder.prompts import load_prompt
from builder.stagekit import (
    StageInputError,
    format_summary,
    report,
    report_run,
    stage_main,
    stage_parser,
    stage_run,
)

log = logging.getLogger(__name__)

STAGE = "queries"
PROMPT = ("queries.txt", ("concept", "language", "language_name", "countries", "term_hint"))


class NativeQuery(BaseModel):
    country: str = Field(min_length=1, max_length=80)
    native_query: str = Field(min_length=1, max_length=200)


class QueryAnswer(BaseModel):
    native_term: str = Field(min_length=1, max_length=120)
    queries: list[NativeQuery] = Field(min_length=1)


def english_query(concept: str, country: tables.Country) -> str:
    return f"{concept} {country.name}"


def table_rows() -> dict[tuple[str, str], dict[str, str]]:
    """(concept, country code) -> row of ``data/queries.csv`` (empty when there is no table)."""
    try:
        rows = tables.queries()
    except tables.TableError as exc:
        log.warning("no query table: %s", exc)
        return {}
    return {(r["concept"], r["country"]): r for r in rows if r["native_term"] and r["native_query"]}


def native_country_names(rows: dict[tuple[str, str], dict[str, str]]) -> dict[str, str]:
    """Country code -> its name in its language, read off table rows ``"<term> <country>"``."""
    out: dict[str, str] = {}
    for (_, code), r in sorted(rows.items()):
        term, query = r["native_term"], r["native_query"]
        if query.startswith(term + " ") and code not in out:
            out[code] = query[len(term) + 1 :]
    return out


def target_concepts(catalog: Catalog) -> list[str]:
    rows = catalog.query("SELECT name FROM concepts WHERE status='kept' ORDER BY name")
    if rows:
        return [r["name"] for r in rows]
    if catalog.query("SELECT COUNT(*) FROM concepts")[0][0]:
        raise StageInputError("no kept concepts: run `python -m builder.concept_dedup` first")
    log.info("no concepts in the catalog: using the curated list")
    return load_curated(None)


def _validator(group: list[tables.Country], term: str | None = None):
    want = {c.code for c in group}

    def check(ans: QueryAnswer) -> str | None:
        got: set[str] = set()
        for q in ans.queries:
            try:
                got.add(tables.country(q.country).code)
            except tables.TableError:
                return f"unknown country {q.country!r}"
        if got != want:
            return f"countries {sorted(got)} != requested {sorted(want)}"
        if term and ans.native_term.strip() != term:
            return f"native_term must be {term!r}"
        return None if ans.native_term.strip() else "empty native_term"

    return check


def _pair(
    concept: str,
    c: tables.Country,
    lang: str,
    native: str,
    term: str | None,
    source: str,
    status: str,
    reason: str | None,
    run_id: int,
) -> list[tuple]:
    """The english and the native row of one (concept, country)."""
    common = (term, source)
    return [
        (concept, c.code, "english", "en", english_query(concept, c), *common, "ok", None, run_id),
        (concept, c.code, "native", lang, native, *common, status, reason, run_id),
    ]


@dataclass
class _Ctx:
    """What every (concept, language) group needs."""

    table: dict
    native_names: dict
    llm: BaseLLM
    template: Template
    prompt_sha: str
    run_id: int


def _resolve_rows(
    concept: str, lang: str, group: list[tables.Country], ctx: _Ctx
) -> tuple[list[tuple], tuple[str, LLMResult] | None]:
    """Query rows for one (concept, language) group, and its LLM request (item, result) if it
    asked."""
    rows: list[tuple] = []
    missing = []
    for c in group:
        t = ctx.table.get((concept, c.code))
        if t is None:
            missing.append(c)
        else:
            rows += _pair(
                concept,
                c,
                lang,
                t["native_query"],
                t["native_term"],
                "table",
                "ok",
                None,
                ctx.run_id,
            )
    if not missing:
        return rows, None
    known = next(
        (
            r["native_term"]
            for (k, _), r in ctx.table.items()
            if k == concept and r["language"] == lang
        ),
        None,
    )
    res = _ask(concept, lang, missing, known, ctx)
    source = "offline" if ctx.llm.provider == "offline" else "generated"
    if res.ok:
        term = res.value.native_term.strip()
        native = {tables.country(q.country).code: q.native_query.strip() for q in res.value.queries}
        reason = "offline: no native term" if source == "offline" and not known else None
        for c in missing:
            rows += _pair(concept, c, lang, native[c.code], term, source, "ok", reason, ctx.run_id)
    else:
        for c in missing:
            rows += _pair(concept, c, lang, "", None, source, res.status, res.error, ctx.run_id)
    item = f"concept={concept};language={lang};countries={','.join(c.code for c in missing)}"
    return rows, (item, res)


def _ask(concept: str, lang: str, missing: list[tables.Country], known: str | None, ctx: _Ctx):
    """One structured request for the countries of ``lang`` the table lacks."""

    def offline() -> dict:
        term = known or concept
        return {
            "native_term": term,
            "queries": [
                {
                    "country": c.name,
                    "native_query": f"{term} {ctx.native_names.get(c.code, c.name)}",
                }
                for c in missing
            ],
        }

    hint = (
        (
            "Use exactly this native_term, already chosen for other countries of this "
            f'language: "{known}"'
        )
        if known
        else ""
    )
    prompt = ctx.template.substitute(
        concept=concept,
        language=lang,
        language_name=missing[0].language_name,
        countries="; ".join(c.name for c in missing),
        term_hint=hint,
    )
    return ctx.llm.generate_structured(
        prompt,
        QueryAnswer,
        template_sha=ctx.prompt_sha,
        validate=_validator(missing, known),
        offline=offline,
    )


def run_queries(
    catalog: Catalog,
    llm: BaseLLM,
    countries: list[tables.Country],
    concepts: list[str] | None = None,
    use_table: bool = True,
) -> dict:
    """Fill the ``queries`` table; returns the counts of the stage-run record."""
    from_catalog = concepts is None
    concepts = concepts if concepts is not None else target_concepts(catalog)
    template, prompt_sha = load_prompt(*PROMPT)
    table = table_rows() if use_table else {}
    native_names = native_country_names(table_rows())
    langs: dict[str, list[tables.Country]] = {}
    for c in countries:
        langs.setdefault(c.language, []).append(c)
    params = {
        "countries": [c.code for c in countries],
        "n_concepts": len(concepts),
        "use_table": use_table,
        "llm": llm.spec,
        "prompt_sha": prompt_sha,
    }
    with stage_run(catalog, STAGE, params, inputs=concepts, llm=llm) as rec:
        ctx = _Ctx(table, native_names, llm, template, prompt_sha, rec.run_id)
        if from_catalog:
            _mark_stale(catalog, concepts)
        done = {
            (r[0], r[1])
            for r in catalog.query(
                "SELECT concept, country FROM queries WHERE kind='native' AND status='ok'"
            )
        }
        work = [
            (k, lang, [c for c in group if (k, c.code) not in done])
            for k in concepts
            for lang, group in langs.items()
        ]
        work = [w for w in work if w[2]]
        for concept, lang, group in tqdm(work, desc="queries", unit="group"):
            rows, req = _resolve_rows(concept, lang, group, ctx)
            with catalog.tx() as con:
                con.executemany(
                    "INSERT OR REPLACE INTO queries (concept, country, kind, language, text,"
                    " native_term, source, status, reason, run_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    rows,
                )
                if req is not None:
                    record_llm_request(con, STAGE, *req, llm.spec, prompt_sha, rec.run_id)
        rec.counts = _counts(catalog, len(work))
        rec.summary = format_summary(
            f"queries: {rec.counts['native_ok']} native queries ok, "
            f"{rec.counts['native_not_ok']} not ok ({len(work)} groups this run)",
            {
                "native by source": rec.counts["by_source"],
                "not ok by status": rec.counts["by_status"],
                "native ok by country": rec.counts["by_country"],
                "not ok by concept": rec.counts["not_ok_by_concept"],
            },
        )
    log.debug("%s", rec.summary)
    return rec.counts


def _mark_stale(catalog: Catalog, concepts: list[str]) -> None:
    """Queries of concepts that are no longer kept: ``status='stale'`` (crawl skips them)."""
    keep = set(concepts)
    rows = catalog.query("SELECT DISTINCT concept FROM queries WHERE status='ok'")
    stale = [(r[0],) for r in rows if r[0] not in keep]
    if stale:
        with catalog.tx() as con:
            con.executemany(
                "UPDATE queries SET status='stale', reason='concept no longer kept'"
                " WHERE concept=? AND status='ok'",
                stale,
            )
        log.info("%d concepts no longer kept: their queries marked stale", len(stale))


def _counts(catalog: Catalog, groups: int) -> dict:
    q = catalog.query
    return {
        "groups_this_run": groups,
        "native_ok": q("SELECT COUNT(*) FROM queries WHERE kind='native' AND status='ok'")[0][0],
        "native_not_ok": q("SELECT COUNT(*) FROM queries WHERE kind='native' AND status!='ok'")[0][
            0
        ],
        "by_source": dict(
            q("SELECT source, COUNT(*) FROM queries WHERE kind='native' GROUP BY source")
        ),
        "by_status": dict(
            q(
                "SELECT status, COUNT(*) FROM queries WHERE kind='native'"
                " AND status!='ok' GROUP BY status"
            )
        ),
        "by_country": dict(
            q(
                "SELECT country, COUNT(*) FROM queries WHERE kind='native'"
                " AND status='ok' GROUP BY country"
            )
        ),
        "not_ok_by_concept": dict(
            q(
                "SELECT concept, COUNT(*) FROM queries WHERE kind='native'"
                " AND status NOT IN ('ok', 'stale') GROUP BY concept"
            )
        ),
    }


def write_table(catalog: Catalog, out: str | Path) -> int:
    """Write the catalog's ok queries in the ``data/queries.csv`` format; returns rows."""
    reviewed = {k: r["reviewed"] for k, r in table_rows().items()}
    rows = catalog.query(
        "SELECT n.concept, n.country, n.language, e.text AS english_query, n.text AS native_query,"
        " n.native_term, n.source FROM queries n JOIN queries e ON e.concept=n.concept AND"
        " e.country=n.country AND e.kind='english' WHERE n.kind='native' AND n.status='ok'"
        " ORDER BY n.concept, n.country"
    )
    order = {c.code: i for i, c in enumerate(tables.countries())}
    rows = sorted(rows, key=lambda r: (r["concept"], order.get(r["country"], 99), r["country"]))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(tables.QUERY_COLUMNS)
    for r in rows:
        rev = (
            reviewed.get((r["concept"], r["country"]), "false")
            if r["source"] == "table"
            else "false"
        )
        w.writerow(
            [
                r["concept"],
                r["country"],
                r["language"],
                r["english_query"],
                r["native_query"],
                r["native_term"],
                r["source"],
                rev,
            ]
        )
    atomic_write_text(Path(out), buf.getvalue())  # an export: the user's umask
    return len(rows)


def build_parser() -> argparse.ArgumentParser:
    p = stage_parser("builder.queries", __doc__)
    p.add_argument("--countries", default="all", help="all or codes/names, comma-separated")
    p.add_argument("--no-table", action="store_true", help="ignore data/queries.csv (ask the LLM)")
    p.add_argument("--write-table", metavar="FILE", help="write catalog queries as CSV and exit")
    add_llm_args(p)
    return p


def _cli(args: argparse.Namespace) -> int:
    with Catalog.open(args.workdir) as catalog:
        if args.write_table:
            n = write_table(catalog, args.write_table)
            report(f"wrote {n} query rows to {args.write_table}")
            return 0
        countries = tables.resolve_countries(args.countries)
        llm = llm_from_args(args, catalog.workdir.llm_cache_path)
        run_queries(catalog, llm, countries, use_table=not args.no_table)
        report_run(catalog, STAGE)
    return 0


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
