"""Image-search backends of the crawl stage (``--search``): ``ddgs`` (:class:`DdgsSearch`:
paced, bounded retries; its ambiguous "No results found." is told from a block by a probe
query, :data:`AMBIGUOUS`), ``folder:PATH`` (:func:`folder_searches`) and ``urls:FILE``
(:func:`urls_searches`), whose bad rows are :class:`InputError`\ s. docs/crawl.md."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.stagekit import StageInputError
from core import datatables
from core.text import StrictDictReader, normalize_term

log = logging.getLogger(__name__)

DDGS_BACKEND = "ddgs:duckduckgo"
#: Reason prefix of an ``empty`` search whose answer may have been a block (see module doc).
AMBIGUOUS = "ddgs said 'No results found.'"
PROBE_QUERY = "flower"  # a query with images in every region: the block check
URL_COLUMNS = ["concept", "country", "language", "rank", "image_url", "page_url", "title"]


@dataclass
class Hit:
    """One search result at its raw 1-based rank, with every field the backend returned."""

    rank: int
    image_url: str
    page_url: str | None = None
    title: str | None = None
    width: int | None = None
    height: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def raw_json(self) -> str:
        return json.dumps(self.raw, ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class Search:
    """One planned search: a (concept, country, kind) query against one backend."""

    concept: str
    country: str
    language: str
    kind: str  # english / native / folder / urls:<language>
    search_query: str
    backend: str
    region: str | None = None
    hits: list[Hit] | None = None  # known up front for folder: and urls: sources
    skip: str | None = None  # recorded as ``skipped`` with this reason, never searched


@dataclass
class Outcome:
    status: str  # ok / empty / failed
    reason: str
    hits: list[Hit]
    attempts: int
    ambiguous: bool = False  # "empty" that may have been a block (ddgs "No results found.")


@dataclass
class _Try:
    """One request's result: a final outcome, or (``out`` None) why another try may help."""

    out: Outcome | None
    why: str = ""
    no_results: bool = False
    n: int = 0  # the attempt number of this query


@dataclass
class InputError:
    source: str
    line: str
    reason: str
    raw: str = ""


def _int_or_none(v: Any) -> int | None:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


class DdgsSearch:
    """Paced, retrying DuckDuckGo image search through ``ddgs`` (one request at a time)."""

    backend = DDGS_BACKEND

    def __init__(self, per_query: int = 10, min_interval: float = 2.0, jitter: float = 1.5,
                 retries: int = 4, backoff: float = 15.0, max_backoff: float = 300.0,
                 timeout: int = 10, safesearch: str = "moderate", empty_retries: int = 1,
                 deadline: float | None = 60.0,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.per_query = per_query
        self.min_interval, self.jitter = min_interval, jitter
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self.empty_retries = min(empty_retries, retries)
        self.timeout, self.safesearch = timeout, safesearch
        self.deadline = deadline  # the waits between one query's attempts add up to at most
        self.sleep, self.clock = sleep, clock
        self._last: float | None = None
        self.requests = 0

    def _pace(self) -> None:
        if self._last is None:
            return
        wait = self.min_interval + random.uniform(0.0, self.jitter) - (self.clock() - self._last)
        if wait > 0:
            self.sleep(wait)

    def search(self, s: Search) -> Outcome:
        """Run one query with pacing and bounded retries (``builder.retry``); never raises for
        ddgs errors. "No results found." is retried ``empty_retries`` times, then ``empty``
        (ambiguous); other errors ``retries`` times, then ``failed``."""
        from builder.retry import Backoff, call

        policy = Backoff(self.retries, self.backoff, self.max_backoff, deadline=self.deadline)

        def again(t: _Try) -> bool:
            return t.out is None and (not t.no_results or t.n <= self.empty_retries)

        def log_retry(t: _Try, attempt: int, delay: float) -> None:
            log.warning("search %r (%s): %s; retry %d in %.0fs", s.search_query, s.region,
                        t.why, attempt, delay)

        count = 0

        def attempt() -> _Try:
            nonlocal count
            count += 1
            t = self._attempt(s)
            t.n = count
            return t

        tried = call(attempt, policy, again, on_retry=log_retry, sleep=self.sleep)
        t, n = tried.result, tried.attempts
        if t.out is not None:
            t.out.attempts = n
            return t.out
        if t.no_results:
            return Outcome("empty", f"{AMBIGUOUS} on {n} attempt(s): no images for this query, "
                           "or a block (ddgs 9.x answers both the same way)", [], n,
                           ambiguous=True)
        return Outcome("failed", f"{t.why}; gave up after {n} attempts", [], n)

    def probe(self) -> bool:
        """One paced request for :data:`PROBE_QUERY` (images everywhere): True when it gets
        results, so that a run of "No results found." answers was not a block."""
        t = self._attempt(Search("probe", "", "en", "probe", PROBE_QUERY, self.backend, None))
        return t.out is not None and t.out.status == "ok"

    def _attempt(self, s: Search) -> _Try:
        """One paced request: a final outcome, or why another try may help."""
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        self._pace()
        self._last = self.clock()
        self.requests += 1
        try:
            raw = DDGS(timeout=self.timeout).images(
                s.search_query, region=s.region or "wt-wt", safesearch=self.safesearch,
                max_results=self.per_query, backend="duckduckgo")
        except (RatelimitException, TimeoutException, DDGSException) as e:
            msg, kind = str(e) or type(e).__name__, type(e).__name__
            if not isinstance(e, (RatelimitException, TimeoutException)) and (
                    "no results found" in msg.lower()):
                return _Try(None, f"{kind}: {msg}", no_results=True)
            return _Try(None, f"{kind}: {msg}")
        except ModuleNotFoundError:
            raise  # a missing library (of ddgs's own) is ours to fix, not the query's
        except Exception as e:  # noqa: BLE001 - a backend bug must not end the crawl
            return _Try(Outcome("failed", f"{type(e).__name__}: {e}", [], 0))
        hits = self._hits(raw)
        if not hits:
            return _Try(Outcome("empty", "the backend returned no usable results", [], 0))
        return _Try(Outcome("ok", f"{len(hits)} results", hits, 0))

    def _hits(self, raw: Any) -> list[Hit]:
        hits: list[Hit] = []
        for i, r in enumerate(list(raw or [])[: self.per_query], start=1):
            r = dict(r) if isinstance(r, dict) else {"value": r}
            url = r.get("image")
            hits.append(Hit(rank=i, image_url=url if isinstance(url, str) else "",
                            page_url=r.get("url") if isinstance(r.get("url"), str) else None,
                            title=str(r["title"]) if r.get("title") is not None else None,
                            width=_int_or_none(r.get("width")),
                            height=_int_or_none(r.get("height")), raw=r))
        return hits


def parse_source(spec: str) -> tuple[str, Path | None]:
    """``ddgs`` / ``folder:PATH`` / ``urls:FILE`` -> (kind, path); StageInputError when malformed."""
    if spec == "ddgs":
        return "ddgs", None
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("folder", "urls") or not rest:
        raise StageInputError(f"--search must be ddgs, folder:PATH or urls:FILE, got {spec!r}")
    path = Path(rest).expanduser()
    if kind == "folder" and not path.is_dir():
        raise StageInputError(f"--search folder: {path} is not a folder")
    if kind == "urls" and not path.is_file():
        raise StageInputError(f"--search urls: {path} is not a file")
    return kind, path.resolve()


def folder_searches(root: Path) -> tuple[list[Search], list[InputError]]:
    """One search per ``root/<concept>/<country>/`` folder; its files (sorted) are the hits."""
    source = f"folder:{root}"
    searches: list[Search] = []
    errors: list[InputError] = []

    def utf8(p: Path, rel: str) -> bool:  # a name that is not UTF-8: an error naming it
        try:
            p.name.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(p.name).decode("utf-8", "backslashreplace")
            errors.append(InputError(source, rel + shown, "name is not valid UTF-8; rename it"))
            return False
        return True

    for cdir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if not utf8(cdir, ""):
            continue
        for kdir in sorted(p for p in cdir.iterdir() if not p.name.startswith(".")):
            rel = f"{cdir.name}/{kdir.name}"
            if not utf8(kdir, f"{cdir.name}/"):
                continue
            if not kdir.is_dir():
                errors.append(InputError(source, rel, "expected a country folder"))
                continue
            try:
                country = datatables.country(kdir.name)
            except datatables.TableError as e:
                errors.append(InputError(source, rel, str(e)))
                continue
            files = sorted(p for p in kdir.iterdir() if p.is_file() and not p.name.startswith(".")
                           and utf8(p, f"{rel}/"))
            hits = [Hit(rank=i, image_url=f.resolve().as_uri(), title=f.name,
                        raw={"path": f"{rel}/{f.name}"}) for i, f in enumerate(files, start=1)]
            # NFC: macOS writes folder names in NFD ("cafe" + U+0301), a keyboard types NFC
            searches.append(Search(normalize_term(cdir.name), country.code, country.language,
                                   "folder", normalize_term(rel),
                                   source, None, hits))
    return searches, errors


def urls_searches(path: Path) -> tuple[list[Search], list[InputError]]:
    """Group a URL CSV's valid rows into one search per (concept, country, language)."""
    source = f"urls:{path}"
    errors: list[InputError] = []
    groups: dict[tuple[str, str, str], dict[int, Hit]] = {}
    with path.open(newline="", encoding="utf-8") as f:
        reader = StrictDictReader(f, str(path), StageInputError)
        missing = [c for c in URL_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise StageInputError(f"{path}: missing columns {missing} (need {','.join(URL_COLUMNS)})")
        for line, row in enumerate(reader, start=2):
            raw = json.dumps(row, ensure_ascii=False, sort_keys=True)
            concept, lang = normalize_term(row["concept"]), normalize_term(row["language"])
            url, rank = (row["image_url"] or "").strip(), _int_or_none(row["rank"])
            problem = None
            try:
                code = datatables.country(row["country"] or "").code
            except datatables.TableError as e:
                problem, code = str(e), ""
            if not concept:
                problem = "empty concept"
            elif not lang:
                problem = "empty language"
            elif not url:
                problem = "empty image_url"
            elif rank is None or rank < 1:
                problem = f"rank must be a positive integer, got {row['rank']!r}"
            elif rank in groups.get((concept, code, lang), {}):
                problem = f"duplicate rank {rank} for {concept}/{code}/{lang}"
            if problem:
                errors.append(InputError(source, str(line), problem, raw))
                continue
            groups.setdefault((concept, code, lang), {})[rank] = Hit(
                rank=rank, image_url=url, page_url=(row["page_url"] or None),
                title=(row["title"] or None), raw=dict(row))
    searches = [
        Search(concept, code, lang, f"urls:{lang}", f"urls:{path.name}", source, None,
               [hits[r] for r in sorted(hits)])
        for (concept, code, lang), hits in sorted(groups.items())
    ]
    return searches, errors
