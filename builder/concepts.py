"""Stage ``concepts``: the LLM's culturally distinctive concepts with an instance per country.

Rounds x batches of countries, plus the curated list. docs/builder.md, "Stage concepts"."""

from __future__ import annotations

import argparse
import json
import logging
import random
import sqlite3
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field
from tqdm import tqdm

from builder import stagekit
from builder.catalog import Catalog, record_llm_request
from builder.concept_list import load_curated, normalize_concept
from builder.llm.base import BaseLLM, LLMConfig, LLMResult
from builder.llm.client import llm_for
from builder.prompts import load_prompt
from builder.stagekit import StageInputError
from builder.statuses import ConceptStatus, LLMStatus
from builder.table_export import write_csv
from core import datatables
from core.clikit import report
from core.options import from_args, group, option
from core.text import normalize_term

log = logging.getLogger(__name__)

STAGE = "concepts"


@dataclass
class ConceptsConfig:
    """The stage's flags (``core.options``)."""

    countries: str = option("all or codes/names, comma-separated", "all")
    rounds: int = option("prompt rounds to merge (default 1)", 1)
    batch_size: int = option("countries per request", 16)
    n_concepts: int = option("concepts asked per request", 60)
    temperature: float = option("sampling temperature", 1.0)
    curated: str | None = option("curated list file (default data/concepts.txt)", None)
    no_curated: bool = option("no curated list: generated only", False)
    export_candidates: str | None = option("write candidates as CSV and exit", None,
                                           metavar="FILE")
    llm: LLMConfig = group("LLM", LLMConfig)


class CountryInstance(BaseModel):
    country: str = Field(min_length=1, max_length=80)
    instance: str = Field(min_length=1, max_length=300)


class ConceptEntry(BaseModel):
    concept: str = Field(min_length=1, max_length=80)
    instances: list[CountryInstance] = Field(min_length=1)


class ConceptAnswer(BaseModel):
    """The paper's ``{concept: {country: instance}}``, as a list (schema-expressible)."""

    concepts: list[ConceptEntry]


def answer_mapping(answer: ConceptAnswer, batch: list[datatables.Country]) -> dict[str, dict[str, str]]:
    """``{concept: {country code: instance}}``; the first instance wins on repeats."""
    codes = {c.code for c in batch}
    out: dict[str, dict[str, str]] = {}
    for entry in answer.concepts:
        name = normalize_concept(entry.concept)
        if not name:
            continue
        per = out.setdefault(name, {})
        for inst in entry.instances:
            code = _resolve(inst.country)
            if code in codes and inst.instance.strip():
                per.setdefault(code, inst.instance.strip())
    return {k: v for k, v in out.items() if v}


def _resolve(key: str) -> str | None:
    try:
        return datatables.country(key).code
    except datatables.TableError:
        return None


def _validator(batch: list[datatables.Country]):
    codes = {c.code for c in batch}

    def check(answer: ConceptAnswer) -> str | None:
        if not answer.concepts:
            return "no concepts"
        bad = sorted({i.country for e in answer.concepts for i in e.instances
                      if _resolve(i.country) not in codes})
        if bad:
            return f"countries outside the requested list: {bad[:10]}"
        if not any(normalize_concept(e.concept) for e in answer.concepts):
            return "empty concept names"
        return None

    return check


def offline_answer(curated: list[str], batch: list[datatables.Country], rnd: int, n: int) -> dict:
    """The documented offline answer: a seeded sample of the curated list."""
    pool = curated or load_curated(None)
    rng = random.Random(f"concepts|{rnd}|{','.join(c.code for c in batch)}")
    chosen = rng.sample(pool, min(n, len(pool)))
    return {"concepts": [{"concept": c, "instances": [
        {"country": k.name, "instance": f"{c} in {k.name}"} for k in batch]} for c in chosen]}


def run_concepts(catalog: Catalog, llm: BaseLLM, countries: list[datatables.Country],
                 rounds: int = 1, curated: list[str] | None = None, batch_size: int = 16,
                 n_concepts: int = 60, temperature: float = 1.0) -> dict:
    """Run the stage; returns the counts written to the stage-run record."""
    if rounds < 1:
        raise StageInputError("--rounds must be >= 1")
    template, prompt_sha = load_prompt("concepts.txt", ("countries", "n_concepts"))
    size = max(1, batch_size)
    batches = [countries[i:i + size] for i in range(0, len(countries), size)]
    params = {"countries": [c.code for c in countries], "rounds": rounds,
              "batch_size": batch_size, "n_concepts": n_concepts, "temperature": temperature,
              "llm": llm.spec, "prompt_sha": prompt_sha,
              "curated": len(curated) if curated is not None else None}
    status: Counter = Counter()
    with stagekit.stage_run(catalog, STAGE, params, inputs=curated, llm=llm) as rec:
        # an item is done when answered by the same LLM and prompt (another --llm asks again)
        done = {r["item"] for r in catalog.query(
            "SELECT item FROM llm_requests WHERE stage=? AND status=? AND llm=? AND prompt_sha=?",
            (STAGE, LLMStatus.OK, llm.spec, prompt_sha))}
        items = [(r, b) for r in range(1, rounds + 1) for b in batches]
        fresh, ok, last = 0, 0, None
        for rnd, batch in tqdm(items, desc="concepts", unit="request"):
            item = f"round={rnd};countries={','.join(c.code for c in batch)}"
            if item in done:
                status["skipped_done"] += 1
                continue
            prompt = template.substitute(countries="; ".join(c.name for c in batch),
                                         n_concepts=n_concepts)
            res = llm.generate_structured(
                prompt, ConceptAnswer, template_sha=prompt_sha,
                params={"round": rnd, "temperature": temperature}, validate=_validator(batch),
                offline=lambda b=batch, r=rnd: offline_answer(curated or [], b, r, n_concepts))
            status[res.status] += 1
            if not res.cached:  # answered now (a cached failure is no news)
                fresh, ok, last = fresh + 1, ok + res.ok, res.error or last
            _store(catalog, item, rnd, batch, res, llm.spec, prompt_sha, rec.run_id)
        if curated is not None:
            _apply_curated(catalog, curated, rec.run_id)
        rec.counts = _counts(catalog, status)
        rec.summary = _summary(rec.counts)
        stagekit.nothing_succeeded(STAGE, fresh, ok, last)
    log.debug("%s", rec.summary)
    return rec.counts


def add_concept(con: sqlite3.Connection, name: str, source: str,
                status: ConceptStatus = ConceptStatus.CANDIDATE,
                run_id: int | None = None) -> None:
    """The ``concepts`` row of ``name`` (``source``: curated / generated), unless it exists."""
    con.execute("INSERT OR IGNORE INTO concepts (name, source, status, run_id) VALUES (?,?,?,?)",
                (name, source, status, run_id))


def add_instances(con: sqlite3.Connection, concept: str, rnd: int, per: Mapping[str, str],
                  run_id: int | None = None) -> None:
    """The ``concept_instances`` rows of ``concept`` in round ``rnd`` (code -> instance)."""
    con.executemany(
        "INSERT OR REPLACE INTO concept_instances (concept, country, round, instance, run_id)"
        " VALUES (?,?,?,?,?)", [(concept, code, rnd, inst, run_id) for code, inst in per.items()])


def _store(catalog: Catalog, item: str, rnd: int, batch: list[datatables.Country],
           res: LLMResult, spec: str, prompt_sha: str, run_id: int) -> None:
    """One transaction: the answer's concepts and instances, and the request's record."""
    mapping = answer_mapping(res.value, batch) if res.ok else {}
    with catalog.tx() as con:
        for raw_name, per in mapping.items():
            name = normalize_term(raw_name)  # one identity per text: NFC in the catalog
            add_concept(con, name, "generated", run_id=run_id)
            add_instances(con, name, rnd, per, run_id)
        record_llm_request(con, STAGE, item, res, spec, prompt_sha, run_id)


def _apply_curated(catalog: Catalog, curated: list[str], run_id: int) -> None:
    """Make the curated list the catalog's curated set (idempotent, one transaction)."""
    with catalog.tx() as con:
        con.execute("UPDATE concepts SET source='generated' WHERE source='curated'")
        con.execute("DELETE FROM concepts WHERE source='generated'"
                    " AND name NOT IN (SELECT DISTINCT concept FROM concept_instances)")
        con.executemany("INSERT INTO concepts (name, source, status, run_id) VALUES (?, "
                        "'curated', ?, ?) ON CONFLICT(name) DO UPDATE SET source='curated'",
                        [(normalize_term(n), ConceptStatus.CANDIDATE, run_id) for n in curated])


def _counts(catalog: Catalog, status: Counter) -> dict:
    return {
        "requests": dict(status),
        "requests_not_ok": catalog.one("SELECT COUNT(*) FROM llm_requests WHERE stage=? AND "
                                       "status!=?", (STAGE, LLMStatus.OK)),
        "concepts_by_source": catalog.pairs("SELECT source, COUNT(*) FROM concepts "
                                            "GROUP BY source"),
        "concepts_by_country": catalog.pairs("SELECT country, COUNT(DISTINCT concept) FROM "
                                             "concept_instances GROUP BY country"),
        "instances": catalog.one("SELECT COUNT(*) FROM concept_instances"),
        "top_concepts": catalog.pairs("SELECT concept, COUNT(*) AS n FROM concept_instances "
                                      "GROUP BY concept ORDER BY n DESC, concept LIMIT 16"),
    }


def _summary(counts: dict) -> str:
    return stagekit.format_summary(
        f"concepts: {sum(counts['concepts_by_source'].values())} concepts, "
        f"{counts['instances']} instances, {counts['requests_not_ok']} requests not ok",
        {"requests this run": counts["requests"],
         "concepts by source": counts["concepts_by_source"],
         "generated concepts by country": counts["concepts_by_country"],
         "most frequent concepts (instances)": counts["top_concepts"]})


def export_candidates(catalog: Catalog, out: str | Path) -> int:
    """Write every candidate concept with its counts and instances as CSV; returns rows."""
    rows = catalog.query(
        "SELECT c.name, c.source, c.status, c.merged_into, c.similarity,"
        " COUNT(i.concept) AS n_instances, COUNT(DISTINCT i.country) AS n_countries,"
        " COUNT(DISTINCT i.round) AS n_rounds FROM concepts c LEFT JOIN concept_instances i"
        " ON i.concept = c.name GROUP BY c.name ORDER BY n_instances DESC, c.name")
    inst: dict[str, dict[str, str]] = {}
    for r in catalog.query("SELECT concept, country, instance FROM concept_instances"
                           " ORDER BY concept, round, country"):
        inst.setdefault(r["concept"], {}).setdefault(r["country"], r["instance"])
    write_csv(out, ["concept", "source", "status", "merged_into", "similarity", "n_instances",
                    "n_countries", "n_rounds", "instances_json"],
              [[r["name"], r["source"], r["status"], r["merged_into"] or "",
                "" if r["similarity"] is None else f"{r['similarity']:.4f}", r["n_instances"],
                r["n_countries"], r["n_rounds"],
                json.dumps(inst.get(r["name"], {}), ensure_ascii=False, sort_keys=True)]
               for r in rows])
    return len(rows)


def build_parser() -> argparse.ArgumentParser:
    return stagekit.stage_parser("builder.concepts", __doc__, ConceptsConfig)


def _cli(args: argparse.Namespace) -> int:
    cfg = from_args(ConceptsConfig, args)
    if cfg.curated is not None and cfg.no_curated:
        raise StageInputError("give --curated FILE or --no-curated, not both")
    countries = datatables.resolve_countries(cfg.countries)  # bad input before the catalog opens
    if not cfg.export_candidates:
        llm_for(cfg.llm, None)  # a bad --llm or no key: refused before anything is made
    with Catalog.open(args.workdir) as catalog:
        if cfg.export_candidates:
            n = export_candidates(catalog, cfg.export_candidates)
            report(f"wrote {n} candidate concepts to {cfg.export_candidates}")
            return 0
        curated = None if cfg.no_curated else load_curated(cfg.curated)
        llm = llm_for(cfg.llm, catalog.workdir.llm_cache_path)
        counts = run_concepts(catalog, llm, countries, cfg.rounds, curated, cfg.batch_size,
                              cfg.n_concepts, cfg.temperature)
        stagekit.report_run(catalog, STAGE)
        if counts["requests_not_ok"]:
            log.warning("%d requests not ok: see llm_requests", counts["requests_not_ok"])
    return 0


def main(argv: list[str] | None = None) -> int:
    return stagekit.stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
