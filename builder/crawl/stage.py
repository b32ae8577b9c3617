"""Stage ``crawl``: image search for every kept concept, country and query kind, then the
download of the top results, one status and reason per URL."""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from builder import stagekit
from builder.catalog import Catalog
from builder.crawl.download import Downloader, FetchConfig, FetchResult
from builder.crawl.download_records import (
    export_urls,
    finalize_duplicates,
    link_items,
    pending_urls,
    record_download,
    reset_transient,
)
from builder.crawl.records import add_input_error, add_item, add_result, add_search
from builder.crawl.search import (
    AMBIGUOUS,
    PROBE_QUERY,
    DdgsSearch,
    InputError,
    Outcome,
    Search,
    parse_source,
)
from builder.stagekit import StageInputError
from builder.statuses import ConceptStatus, QueryStatus, SearchStatus
from core import datatables
from core.clikit import report
from core.options import add_options, from_args, option
from core.provenance import utcnow

log = logging.getLogger(__name__)

STAGE = "crawl"
KINDS = ("english", "native")


@dataclass
class CrawlConfig:
    """One crawl run's parameters (recorded; no secrets); the ``option`` fields are flags."""

    countries: str = option("all or a comma-separated list (codes, labels)", "all")
    concepts: str = option("all or a comma-separated list of concepts", "all")
    languages: tuple[str, ...] = KINDS  # the flag --languages (comma-separated): build_parser
    per_query: int = option("top results kept per query", 10, minimum=1)
    search: str = option("ddgs | folder:PATH | urls:FILE", "ddgs")
    retry_failed: bool = option("search failed and ambiguous-empty queries again and refetch "
                                "transient download failures", False)
    skip_download: bool = option("search only", False)
    export_urls: str | None = option("write pending URLs for img2dataset instead of downloading",
                                     None, metavar="F.parquet")
    search_interval: float = option("minimum seconds between search requests (jitter is "
                                    "added)", 2.0, minimum=0)
    search_retries: int = option("retries of timeouts and ddgs errors: extra searches after "
                                 "the first", 4, minimum=0)
    search_backoff: float = option("first backoff in seconds after a block, doubled per retry",
                                   15.0, minimum=0)
    search_deadline: float = option("seconds of retry waits per query, at most (default "
                                    "%(default)s; docs/crawl.md)", 60.0, minimum=0)
    search_run_wait: float = option("seconds of retry waits in a row without an answered "
                                    "query before the run stops, resumable (default "
                                    "%(default)s; 0: no bound)", 90.0, minimum=0)
    max_failed_searches: int = option("stop after this many consecutive failed searches "
                                      "(0: never)", 5, minimum=0)
    fetch: FetchConfig = field(default_factory=FetchConfig)


@dataclass
class CrawlResult:
    run_id: int
    counts: dict[str, Any]
    summary: str


def _check_concepts(wanted: set[str] | None, known: set[str]) -> None:
    unknown = sorted((wanted or set()) - known)
    if unknown:
        raise StageInputError(f"--concepts: no queries or images for {', '.join(unknown)}")


def plan_ddgs(catalog: Catalog, cfg: CrawlConfig) -> list[Search]:
    """Searches from the ``queries`` table: kept concepts x countries x query kinds."""
    codes = [c.code for c in datatables.resolve_countries(cfg.countries)]
    kinds = list(cfg.languages)
    has_concepts = catalog.one("SELECT COUNT(*) FROM concepts") > 0
    rows = catalog.query(
        f"SELECT concept, country, kind, language, text FROM queries WHERE status=? "
        f"AND country IN ({','.join('?' * len(codes))}) AND kind IN ({','.join('?' * len(kinds))})"
        + (" AND concept IN (SELECT name FROM concepts WHERE status=?)" if has_concepts else "")
        + " ORDER BY concept, country, kind",
        (QueryStatus.OK, *codes, *kinds, *([ConceptStatus.KEPT] if has_concepts else [])))
    if not rows:
        raise StageInputError("no queries in the catalog for these countries and languages: run "
                              "`python -m builder.queries` first (or use --search folder:PATH / "
                              "urls:FILE)")
    wanted = stagekit.concept_filter(cfg.concepts)
    _check_concepts(wanted, {r["concept"] for r in rows})
    english = {(r["concept"], r["country"]): r["text"] for r in rows if r["kind"] == "english"}
    out = []
    for r in rows:
        if wanted is not None and r["concept"] not in wanted:
            continue
        s = Search(r["concept"], r["country"], r["language"], r["kind"], r["text"], DdgsSearch.backend,
                   datatables.country(r["country"]).search_region)
        if r["kind"] != "english" and english.get((r["concept"], r["country"])) == r["text"]:
            s.skip = "same text as the english query"
        out.append(s)
    return out


def plan_local(kind: str, path: Path, cfg: CrawlConfig) -> tuple[list[Search], list[InputError]]:
    """Searches from a folder tree or a URL CSV, filtered by ``--countries`` / ``--concepts``."""
    from builder.crawl.search import folder_searches, urls_searches

    searches, errors = folder_searches(path) if kind == "folder" else urls_searches(path)
    codes = {c.code for c in datatables.resolve_countries(cfg.countries)}
    wanted = stagekit.concept_filter(cfg.concepts)
    _check_concepts(wanted, {s.concept for s in searches})
    keep = [s for s in searches if s.country in codes and (wanted is None or s.concept in wanted)]
    return keep, errors


def register(catalog: Catalog, searches: list[Search], errors: list[InputError],
             run_id: int) -> None:
    """Insert the planned searches (``pending``) and the rejected input rows, idempotently."""
    with catalog.tx() as con:
        for s in searches:
            add_search(con, s, run_id)
        for e in errors:
            add_input_error(con, e, run_id)
    for e in errors:
        log.warning("%s line %s: %s", e.source, e.line, e.reason)
    done = {(r[0], r[1], r[2], r[3]): r[4] for r in catalog.query(
        "SELECT concept, country, kind, backend, search_query FROM searches")}
    changed = [s for s in searches
               if done.get((s.concept, s.country, s.kind, s.backend), s.search_query) != s.search_query]
    if changed:
        log.warning("%d queries changed since they were searched; the earlier searches are kept "
                    "(e.g. %s/%s %s)", len(changed), changed[0].concept, changed[0].country,
                    changed[0].kind)


class SearchUnavailable(StageInputError):
    """Too many consecutive failed searches: the backend is unreachable or blocking us."""


def _todo(catalog: Catalog, searches: list[Search], retry_failed: bool) -> list[tuple[int, Search]]:
    """(search_id, search) of every pending (``retry_failed``: failed, ambiguous) search."""
    ids = {(r["concept"], r["country"], r["kind"], r["backend"]): (r["search_id"], r["status"],
                                                                  r["reason"] or "")
           for r in catalog.query("SELECT search_id, concept, country, kind, backend, status, "
                                  "reason FROM searches")}

    def wanted(status: str, reason: str) -> bool:
        if status == "pending":
            return True
        return retry_failed and (status == "failed" or (
            status == "empty" and reason.startswith(AMBIGUOUS)))

    return [(ids[k][0], s) for s in searches
            if (k := (s.concept, s.country, s.kind, s.backend)) in ids and wanted(*ids[k][1:])]


def run_searches(catalog: Catalog, searches: list[Search], backend: Any, run_id: int,
                 retry_failed: bool = False, failure_limit: int = 0) -> Counter[str]:
    """Run every search :func:`_todo` gives once, one transaction each; ``failure_limit``
    failed or ambiguous ones in a row (0: no limit) stop the run unless the probe has results."""
    counts: Counter[str] = Counter()
    streak: list[tuple[int, Outcome]] = []
    outcomes: list[tuple[int, Outcome]] = []  # of the queries the backend was asked
    todo = _todo(catalog, searches, retry_failed)
    bar = tqdm(todo, desc="search", unit="query", disable=not todo,
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
    pace = _Pace(len(todo))
    for search_id, s in bar:
        t0 = time.monotonic()
        if s.skip:
            out = Outcome("skipped", s.skip, [], 0)
        elif s.hits is not None:
            out = Outcome("ok" if s.hits else "empty", f"{len(s.hits)} results", s.hits, 1)
        else:
            out = backend.search(s)
        if out.stop:
            _stop_searching(catalog, [*streak, (search_id, out)], why=out.stop)
        _record_search(catalog, search_id, s, out, run_id)
        counts[out.status] += 1
        bar.set_postfix_str(pace.eta(out.status != "failed" and not s.skip,
                                     time.monotonic() - t0), refresh=False)
        if s.hits is not None or s.skip:
            continue  # not asked: neither breaks nor resets the streak
        outcomes.append((search_id, out))
        suspect = out.status == "failed" or out.ambiguous
        streak = [*streak, (search_id, out)] if suspect else []
        if failure_limit and len(streak) >= failure_limit:
            if all(o.ambiguous for _, o in streak) and _probe_ok(backend):
                log.info("%d queries in a row got 'No results found.', but the probe query "
                         "has results: not a block, they stay empty", len(streak))
                streak = []
                continue
            _stop_searching(catalog, streak)
    _none_succeeded(catalog, todo, outcomes, backend)
    return counts


def _none_succeeded(catalog: Catalog, todo: list[tuple[int, Search]],
                    outcomes: list[tuple[int, Outcome]], backend: Any) -> None:
    """No query answered, now or before: the searches back to pending, SearchUnavailable."""
    if not outcomes or any(o.status not in ("failed", "empty") for _, o in outcomes):
        return
    if catalog.query("SELECT 1 FROM searches WHERE status=? LIMIT 1", (SearchStatus.OK,)):
        return  # an earlier run's searches got results: this crawl has something to fetch
    if any(o.status == "empty" and not o.ambiguous for _, o in outcomes):
        return  # a definite "no results" is an answer
    if all(o.ambiguous for _, o in outcomes) and _probe_ok(backend):
        return
    log.debug("no search of %d succeeded", len(todo))
    _stop_searching(catalog, outcomes, every=True)


def _probe_ok(backend: Any) -> bool:
    probe = getattr(backend, "probe", None)
    return bool(probe()) if callable(probe) else False


class _Pace:
    """The search bar's ETA from the queries answered so far (a failed one's waits say nothing)."""

    def __init__(self, total: int):
        self.total, self.done, self.answered, self.seconds = total, 0, 0, 0.0

    def eta(self, answered: bool, seconds: float) -> str:
        self.done += 1
        if answered:
            self.answered, self.seconds = self.answered + 1, self.seconds + seconds
        if not self.answered:
            return "no query answered yet"
        left = self.seconds / self.answered * (self.total - self.done)
        return f"eta {tqdm.format_interval(left)} at {self.seconds / self.answered:.1f}s/query"


def _stop_searching(catalog: Catalog, streak: list[tuple[int, Outcome]],
                    every: bool = False, why: str | None = None) -> None:
    """Put the streak's searches back to ``pending`` and stop (``every``: the whole run's)."""
    with catalog.tx() as con:
        con.executemany("UPDATE searches SET status=? WHERE search_id=?",
                        [(SearchStatus.PENDING, i) for i, _ in streak])
    last = streak[-1][1]
    if why:
        raise SearchUnavailable(f"{why}; the queries stay pending: run the same command "
                                "again then")
    if every:
        raise SearchUnavailable(
            f"no search succeeded: all {len(streak)} queries of this run failed or got no "
            f"answer (last: {last.reason}); check the network or wait out the rate limit, "
            "then run the same command again (the queries stay pending)")
    if all(o.ambiguous for _, o in streak):
        raise SearchUnavailable(
            f"the search backend answered 'No results found.' to {len(streak)} queries in a "
            f"row and to the probe query {PROBE_QUERY!r}: ddgs reports a block this way, so "
            "this is most likely a rate limit; the queries stay pending: wait (an hour or "
            "more), then run the same command again")
    raise SearchUnavailable(
        f"the search backend failed {len(streak)} queries in a row (last: {last.reason}); "
        "check the network or wait out the rate limit, then run the same command again")


def _record_search(catalog: Catalog, search_id: int, s: Search, out: Outcome,
                   run_id: int) -> None:
    with catalog.tx() as con:
        con.execute(
            "UPDATE searches SET status=?, reason=?, n_results=?, attempts=attempts+?, "
            "searched_at=?, run_id=? WHERE search_id=?",
            (out.status, out.reason, len(out.hits), out.attempts, utcnow(), run_id, search_id))
        for h in out.hits:
            add_result(con, search_id, h)
            add_item(con, search_id, h.rank, s, h.image_url)


def download_pending(catalog: Catalog, fetch: FetchConfig, run_id: int | None) -> int:
    """Fetch every pending URL once; each outcome is committed as soon as it is known."""
    urls = pending_urls(catalog)
    if not urls:
        return 0
    with tqdm(total=len(urls), desc="download", unit="url") as bar:

        def on_result(res: FetchResult) -> None:
            with catalog.tx() as con:
                record_download(con, res, run_id)

        Downloader(fetch, catalog.workdir).run(urls, on_result, bar.update)
    return len(urls)


def crawl_counts(catalog: Catalog) -> dict[str, Any]:
    """Counts by search status, URL status, item status, and items by country and concept."""
    pairs = catalog.pairs
    by_cc: dict[str, dict[str, dict[str, int]]] = {"country": {}, "concept": {}}
    for col in by_cc:
        for r in catalog.query(f"SELECT {col} AS k, status, COUNT(*) AS n FROM items "
                               f"GROUP BY {col}, status ORDER BY {col}, status"):
            by_cc[col].setdefault(r["k"], {})[r["status"]] = r["n"]
    return {
        "searches": pairs("SELECT status, COUNT(*) FROM searches GROUP BY status ORDER BY 1"),
        "urls": pairs("SELECT status, COUNT(*) FROM downloads GROUP BY status ORDER BY 1"),
        "items": pairs("SELECT status, COUNT(*) FROM items GROUP BY status ORDER BY 1"),
        "input_errors": catalog.one("SELECT COUNT(*) FROM crawl_input_errors"),
        "images": catalog.one("SELECT COUNT(*) FROM images"),
        "by_country": by_cc["country"],
        "by_concept": by_cc["concept"],
    }


def crawl_summary(counts: dict[str, Any]) -> str:
    """The one-screen summary: statuses, then items ok/failed/pending by country and concept."""
    def line(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"

    out = []
    ours = counts["urls"].get("internal_error", 0)
    if ours:
        out.append(f"internal errors (ours, not the servers'): {ours} URL(s), fetched again by "
                   "the next run; the log has the tracebacks")
    out += [f"searches: {line(counts['searches'])}",
           f"urls:     {line(counts['urls'])}",
           f"items:    {line(counts['items'])}",
           f"images stored: {counts['images']}; rejected input rows: {counts['input_errors']}"]
    for key in ("by_country", "by_concept"):
        out.append(f"{key.replace('_', ' ')}: " + "  ".join(
            f"{k} {v.get('ok', 0)}/{sum(v.values())}" for k, v in counts[key].items()))
    return "\n".join(out)


def crawl(catalog: Catalog, cfg: CrawlConfig, backend: Any = None) -> CrawlResult:
    """Run (or resume) the crawl stage; returns the run id, counts and summary."""
    kind, path = parse_source(cfg.search)
    fetch = cfg.fetch
    if kind == "folder" and path is not None:
        fetch = FetchConfig(**{**asdict(fetch), "local_roots": (*fetch.local_roots, path)})
    params = {**asdict(cfg), "fetch": {k: (sorted(v) if isinstance(v, frozenset) else v)
                                       for k, v in asdict(fetch).items()}}
    with stagekit.stage_run(catalog, STAGE, params) as rec:
        try:
            _crawl(catalog, cfg, kind, path, fetch, backend, rec.run_id)
        finally:  # whatever ended the run, the record counts what it left behind
            try:
                rec.counts = crawl_counts(catalog)
                rec.summary = crawl_summary(rec.counts)
            except Exception:  # noqa: BLE001 - e.g. the disk that ended the run: keep its error
                log.exception("could not count the crawl's outcome")
    return CrawlResult(rec.run_id, rec.counts, rec.summary)


def _crawl(catalog: Catalog, cfg: CrawlConfig, kind: str, path: Path | None, fetch: FetchConfig,
           backend: Any, run_id: int) -> None:
    for stale in catalog.workdir.images_dir.glob("*/.*.tmp"):  # left by a kill mid-write
        stale.unlink(missing_ok=True)
    if kind == "ddgs":
        searches, errors = plan_ddgs(catalog, cfg), []
        backend = backend or DdgsSearch(
            per_query=cfg.per_query, min_interval=cfg.search_interval,
            retries=cfg.search_retries, backoff=cfg.search_backoff,
            deadline=cfg.search_deadline, run_wait=cfg.search_run_wait)
    else:
        assert path is not None
        searches, errors = plan_local(kind, path, cfg)
    register(catalog, searches, errors, run_id)
    run_searches(catalog, searches, backend, run_id, cfg.retry_failed, cfg.max_failed_searches)
    reset_transient(catalog, transient=cfg.retry_failed)  # our own errors: always again
    link_items(catalog)
    if cfg.export_urls:
        n = export_urls(catalog, Path(cfg.export_urls), allow_hosts=fetch.allow_hosts)
        log.info("wrote %d URLs to %s", n, cfg.export_urls)
    elif not cfg.skip_download:
        download_pending(catalog, fetch, run_id)
    link_items(catalog)
    finalize_duplicates(catalog)


def build_parser() -> argparse.ArgumentParser:
    p = stagekit.stage_parser("builder.crawl.stage", __doc__)
    seen: set[str] = set()
    add_options(p, CrawlConfig, seen=seen)
    p.add_argument("--languages", dest="kinds", default=",".join(KINDS),
                   help="query kinds to search: english, native or both (ddgs only)")
    add_options(p, FetchConfig, seen=seen, title="downloads")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="host allowed even if it resolves to a private/loopback address")
    return p


def config_from_args(a: argparse.Namespace) -> CrawlConfig:
    """The CLI values as a :class:`CrawlConfig` (StageInputError on bad input)."""
    kinds = tuple(k.strip() for k in a.kinds.split(",") if k.strip())
    if not kinds or any(k not in KINDS for k in kinds):
        raise StageInputError(f"--languages takes english, native or both, got {a.kinds!r}")
    datatables.resolve_countries(a.countries)
    stagekit.concept_filter(a.concepts)
    parse_source(a.search)
    fetch = replace(from_args(FetchConfig, a), connect_timeout=min(10.0, a.timeout),
                    allow_hosts=frozenset(h.lower() for h in a.allow_host))
    return replace(from_args(CrawlConfig, a), languages=kinds, fetch=fetch)


def _cli(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if cfg.search == "ddgs":  # folder: and urls: sources need no earlier stage
        stagekit.built_before(args.workdir, "python -m builder.queries (or --search folder:PATH)")
    with Catalog.open(args.workdir) as catalog:
        res = crawl(catalog, cfg)
        report(res.summary)
    # 1: the run ended, but some URLs hit an internal error of ours (the next run retries them)
    return 1 if res.counts["urls"].get("internal_error") else 0


def main(argv: list[str] | None = None) -> int:
    return stagekit.stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
