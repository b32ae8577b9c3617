"""The authors' published query terms beside ours.

``python -m builder.queries import --published DATASET [--revision R]`` stores per (concept,
country) the majority of the authors' ``concept_in_native`` (of a published release's
``image_metadata``) in ``published_terms``, and in ``query_terms`` where we have no term.

``python -m builder.queries diff [--dataset D]`` prints per country how many of our terms equal
theirs and lists the others side by side (docs/queries.md)."""

from __future__ import annotations

import argparse
import logging
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.catalog import Catalog
from builder.query_terms import english_term, our_terms, upsert_terms
from builder.stagekit import StageInputError, format_summary, stage_main, stage_parser, stage_run
from core import datatables, query_table
from core.clikit import report
from core.options import from_args, option
from core.provenance import utcnow
from core.text import majority_terms, normalize_term, same_term

log = logging.getLogger(__name__)

STAGE = "queries_import"
CONFIG = "image_metadata"
COLUMNS = ["concept", "concept_in_native", "country"]


@dataclass
class PublishedTerm:
    """The authors' term of one (concept, country): the majority over its images."""

    concept: str
    country: str  # ISO alpha-3
    term: str
    n_images: int  # images carrying ``term``
    others: Counter = field(default_factory=Counter)  # the other terms and their images


def add_published_terms(con: sqlite3.Connection, dataset: str, terms: Iterable[PublishedTerm],
                        imported_at: str | None = None) -> None:
    """The ``published_terms`` rows of ``terms``, the authors' terms of ``dataset``."""
    now = imported_at or utcnow()
    con.executemany(
        "INSERT INTO published_terms (dataset, concept, country, term, n_images, imported_at)"
        " VALUES (?,?,?,?,?,?)", [(dataset, t.concept, t.country, t.term, t.n_images, now)
                                  for t in terms])


def dataset_key(dataset: str) -> str:
    """A dataset's name in ``published_terms``: a local folder's absolute path, or the hub id."""
    path = Path(dataset).expanduser()
    return str(path.resolve()) if path.exists() else dataset


def read_published(dataset: str, revision: str | None = None) -> list[dict[str, Any]]:
    """The ``concept, concept_in_native, country`` rows of ``image_metadata``."""
    import datasets

    from core.hub import cache_kwargs

    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        dd = datasets.load_dataset(dataset, CONFIG, columns=COLUMNS, revision=revision,
                                   **cache_kwargs(dataset))
        rows: list[dict[str, Any]] = []
        for split in dd.values():
            rows += split.to_list()
        return rows
    except Exception as exc:  # noqa: BLE001 - any loading failure is a fault of the input
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if "BuilderConfig" in first or CONFIG in first:
            raise StageInputError(f"{dataset}: no '{CONFIG}' config of a published 3XCM "
                                  f"release ({first[:200]})") from exc
        raise StageInputError(f"{dataset}: cannot read its '{CONFIG}' config with columns "
                              f"{', '.join(COLUMNS)} ({first[:200]})") from exc
    finally:
        if bars:
            datasets.enable_progress_bars()


def _norm(text: Any) -> str:
    return normalize_term(text or "")


def aggregate(rows: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], PublishedTerm], Counter]:
    """Per (concept, country): the majority term and the others; counts of rows left out."""
    counts: Counter = Counter()
    codes: dict[str, str | None] = {}
    terms: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in rows:
        name = _norm(r.get("country"))
        if name not in codes:
            try:
                codes[name] = datatables.country(name).code
            except datatables.TableError:
                codes[name] = None
                log.warning("published country %r is not one of countries.csv: left out", name)
        concept, term = _norm(r.get("concept")), _norm(r.get("concept_in_native"))
        if codes[name] is None:
            counts["skipped_unknown_country"] += 1
        elif not concept or not term:
            counts["skipped_empty"] += 1
        else:
            terms[(concept, codes[name])][term] += 1
            counts["images"] += 1
    out = {}
    for (concept, code), seen in terms.items():
        term = majority_terms(seen) or ""
        n = seen[term]
        out[(concept, code)] = PublishedTerm(concept, code, term, n,
                                             Counter({t: k for t, k in seen.items() if t != term}))
    return out, counts


def import_published(catalog: Catalog, dataset: str, revision: str | None = None) -> dict:
    """Store the authors' terms of ``dataset`` (module docstring); returns the run's counts."""
    key = dataset_key(dataset)
    published, counts = aggregate(read_published(dataset, revision))
    if not published:
        raise StageInputError(f"{dataset}: no usable (concept, country, concept_in_native) rows "
                              f"in '{CONFIG}' ({dict(counts) or 'empty'})")
    # terms an earlier import filled are the authors', not ours: a new import refreshes them
    ours = our_terms(catalog)
    params = {"dataset": key, "revision": revision}
    with stage_run(catalog, STAGE, params, inputs=sorted(published)) as rec:
        now = utcnow()
        filled = []
        for (concept, code), p in sorted(published.items()):
            if (concept, code) in ours:
                continue
            note = (f"authors' concept_in_native of {key} ({p.n_images} of "
                    f"{p.n_images + sum(p.others.values())} images)")
            filled.append(query_table.query_term(concept, datatables.country(code), p.term,
                                            english_term(concept, ours), "authors", note))
        with catalog.tx() as con:
            con.execute("DELETE FROM published_terms WHERE dataset=?", (key,))
            add_published_terms(con, key, published.values(), now)
            upsert_terms(con, filled, rec.run_id)
        disagree = {f"{p.concept}/{p.country}": {p.term: p.n_images, **p.others}
                    for p in published.values() if p.others}
        rec.counts = {"pairs": len(published), **counts, "filled_query_terms": len(filled),
                      "disagreeing_pairs": len(disagree), "disagreeing": disagree}
        rec.summary = format_summary(
            f"imported {len(published)} published terms of {key} ({counts['images']} images); "
            f"{len(filled)} filled a (concept, country) we had no term for; "
            f"{len(disagree)} (concept, country) whose images disagree (majority stored)",
            {"left out": {k: v for k, v in counts.items() if k != "images"},
             "disagreeing (images of the other terms)": {
                 k: sum(v.values()) - max(v.values()) for k, v in disagree.items()}})
    return rec.counts


@dataclass
class CountryDiff:
    locale: str
    equal: int = 0
    differ: list[tuple[str, str, str, str, int]] = field(default_factory=list)
    only_ours: int = 0
    only_theirs: list[str] = field(default_factory=list)

    @property
    def compared(self) -> int:
        return self.equal + len(self.differ)


def _pick_dataset(catalog: Catalog, dataset: str | None) -> str:
    have = [r[0] for r in catalog.query(
        "SELECT DISTINCT dataset FROM published_terms ORDER BY dataset")]
    if not have:
        raise StageInputError("no published terms in this work dir: run `python -m "
                              "builder.queries import --published DATASET` first")
    if dataset is None:
        if len(have) > 1:
            raise StageInputError(f"several imported datasets: pass --dataset (one of "
                                  f"{', '.join(have)})")
        return have[0]
    key = dataset_key(dataset)
    if key not in have:
        raise StageInputError(f"--dataset {dataset}: not imported (imported: {', '.join(have)})")
    return key


def diff_terms(catalog: Catalog, dataset: str | None = None) -> tuple[str, dict[str, CountryDiff]]:
    """(dataset, per country code the comparison of our terms with the authors')."""
    key = _pick_dataset(catalog, dataset)
    theirs = {(r["concept"], r["country"]): r for r in catalog.query(
        "SELECT concept, country, term, n_images FROM published_terms WHERE dataset=?", (key,))}
    ours = our_terms(catalog)
    concepts = {k for k, _ in theirs}
    out: dict[str, CountryDiff] = {}
    for c in datatables.countries():
        d = CountryDiff(c.locale)
        for concept in sorted(concepts):
            mine, their = ours.get((concept, c.code)), theirs.get((concept, c.code))
            if their is None:
                d.only_ours += mine is not None
            elif mine is None:
                d.only_theirs.append(concept)
            elif same_term(mine.native_term, their["term"]):
                d.equal += 1
            else:
                d.differ.append((concept, mine.native_term, mine.source, their["term"],
                                 int(their["n_images"])))
        if d.compared or d.only_theirs:
            out[c.code] = d
    return key, out


def format_diff(key: str, diff: dict[str, CountryDiff]) -> str:
    """The diff as a table per country, then the differing terms side by side."""
    lines = [f"our terms vs the authors' concept_in_native of {key}",
             "(equal: the same after Unicode NFC, case folding and collapsing spaces)",
             f"{'country':<8}{'locale':<7}{'compared':>9}{'equal':>7}{'differ':>7}"
             f"{'only ours':>10}{'only theirs':>12}"]
    for code, d in diff.items():
        lines.append(f"{code:<8}{d.locale:<7}{d.compared:>9}{d.equal:>7}{len(d.differ):>7}"
                     f"{d.only_ours:>10}{len(d.only_theirs):>12}")
    tot = [sum(x) for x in zip(*((d.compared, d.equal, len(d.differ)) for d in diff.values()),
                               strict=True)] if diff else [0, 0, 0]
    lines.append(f"{'total':<15}{tot[0]:>9}{tot[1]:>7}{tot[2]:>7}")
    for code, d in diff.items():
        if not d.differ and not d.only_theirs:
            continue
        lines.append(f"\n{code} ({d.locale}): {len(d.differ)} differ")
        width = max([len(x[0]) for x in d.differ] + [7]) + 2
        lines.append(f"  {'concept':<{width}}{'ours (source)':<36}theirs (images)")
        for concept, mine, source, their, n in d.differ:
            lines.append(f"  {concept:<{width}}{f'{mine} ({source})':<36}{their} ({n})")
        if d.only_theirs:
            lines.append(f"  only theirs: {', '.join(d.only_theirs)}")
    return "\n".join(lines)


@dataclass
class ImportConfig:
    """``import``'s flags."""

    published: str = option("a published release: local folder (parquet + card) or hub id",
                            metavar="DATASET")
    revision: str | None = option("hub revision (commit, tag or branch)", None)


@dataclass
class DiffConfig:
    """``diff``'s flags."""

    dataset: str | None = option("the imported dataset to compare with (needed when several "
                                 "were imported)", None)


CONFIGS = {"import": ImportConfig, "diff": DiffConfig}


def build_parser(command: str) -> argparse.ArgumentParser:
    doc = __doc__.split("\n\n")[1 if command == "import" else 2]
    return stage_parser(f"builder.queries {command}", doc, CONFIGS[command])


def _cli(args: argparse.Namespace) -> int:
    cfg = from_args(CONFIGS[args.command], args)
    with Catalog.open(args.workdir) as catalog:
        if isinstance(cfg, ImportConfig):
            import_published(catalog, cfg.published, cfg.revision)
            run = catalog.last_run(STAGE)
            report(run["summary"] if run is not None else "imported")
        else:
            report(format_diff(*diff_terms(catalog, cfg.dataset)))
    return 0


def main(argv: list[str]) -> int:
    """``import ...`` or ``diff ...`` (``argv[0]`` is the command)."""
    command, rest = argv[0], argv[1:]

    def body(args: argparse.Namespace) -> int:
        args.command = command
        return _cli(args)

    return stage_main(build_parser(command), body, rest)
