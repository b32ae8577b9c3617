"""Image-search backends of the crawl (``--search``): ``ddgs`` (:class:`DdgsSearch`, paced,
with bounded retries by the policy of ``core.net``), ``folder:PATH`` and ``urls:FILE`` (bad
rows become :class:`InputError` records). docs/crawl.md, "Search backends"."""

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
#: Reason prefix of an ``empty`` search whose answer may have been a block.
AMBIGUOUS = "ddgs said 'No results found.'"
PROBE_QUERY = "flower"  # a query with images in every region: the block check
BASE_URL_ENV = "XCM_DDG_BASE_URL"  # DuckDuckGo's address (tests: a fake on 127.0.0.1)
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
    stop: str | None = None  # why the run must stop here (rate limit, run wait spent)


@dataclass
class _Try:
    """One request's result: a final outcome, or (``out`` None) why another try may help."""

    out: Outcome | None
    why: str = ""
    no_results: bool = False
    limited: float | None = None  # rate-limited: the server's wait (0: none given)


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


def _engine_class() -> type:
    """ddgs's image engine (at ``$XCM_DDG_BASE_URL``) that sees the HTTP status ddgs drops."""
    from ddgs.engines.duckduckgo_images import DuckduckgoImages
    from ddgs.exceptions import DDGSException, RatelimitException
    from ddgs.utils import _extract_vqd

    from core import net

    class _Engine(DuckduckgoImages):
        failure: BaseException | None = None  # what ended the last search (ddgs hides it)

        def __init__(self, *a: Any, **kw: Any):
            super().__init__(*a, **kw)
            self.base = os.environ.get(BASE_URL_ENV, "https://duckduckgo.com").rstrip("/")
            self.search_url = f"{self.base}/i.js"

        def _checked(self, *args: Any, **kwargs: Any) -> Any:
            resp = self.http_client.request(*args, **kwargs)
            kind, code = net.classify(status=resp.status_code), resp.status_code
            if code == 200:
                return resp
            if kind == net.RATE_LIMIT:
                from builder.retry import parse_retry_after

                e = RatelimitException(f"HTTP {code} (rate limit)")
                e.wait = parse_retry_after(resp._resp.headers.get("retry-after"))
                raise e
            raise DDGSException(f"HTTP {code}" + (" (refused)" if kind == net.PERMANENT
                                                  else ""))

        def request(self, *args: Any, **kwargs: Any) -> Any:
            return self._checked(*args, **kwargs).text

        def _get_vqd(self, query: str) -> str:
            return _extract_vqd(self._checked("GET", self.base, params={"q": query}).content,
                                query)

        def search(self, *args: Any, **kwargs: Any) -> Any:
            self.failure = None
            try:
                return super().search(*args, **kwargs)
            except Exception as e:
                self.failure = e
                raise

    return _Engine


class DdgsSearch:
    """Paced, retrying DuckDuckGo image search through ``ddgs`` (one request at a time)."""

    backend = DDGS_BACKEND

    def __init__(self, per_query: int = 10, min_interval: float = 2.0, jitter: float = 1.5,
                 retries: int = 4, backoff: float = 15.0, max_backoff: float = 300.0,
                 timeout: int = 10, safesearch: str = "moderate", empty_retries: int = 1,
                 deadline: float | None = 60.0, run_wait: float | None = 90.0,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.per_query = per_query
        self.min_interval, self.jitter = min_interval, jitter
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self.empty_retries = min(empty_retries, retries)
        self.timeout, self.safesearch = timeout, safesearch
        self.deadline = deadline  # the waits between one query's attempts add up to at most
        self.run_wait = run_wait or None  # and the waits since the last answer, at most
        self.waited = 0.0  # retry waits since the last answered query
        self.sleep, self.clock = sleep, clock
        self._last: float | None = None
        self.requests = 0

    def search(self, s: Search) -> Outcome:
        """Run one query, paced, with bounded retries; never raises for ddgs errors (docs/crawl.md,
        "Blocks and empty answers")."""
        from builder.retry import Backoff, call

        left = None if self.run_wait is None else max(0.0, self.run_wait - self.waited)
        bound = min((b for b in (self.deadline, left) if b is not None), default=None)
        policy = Backoff(self.retries, self.backoff, self.max_backoff, max_server_wait=bound,
                         deadline=bound)

        first = self.requests  # self.requests - first: this query's attempts so far

        def again(t: _Try) -> bool:
            return t.out is None and (not t.no_results
                                      or self.requests - first <= self.empty_retries)

        def log_retry(t: _Try, attempt: int, delay: float) -> None:
            self.waited += delay
            log.warning("search %r (%s): %s; retry %d in %.0fs", s.search_query, s.region,
                        t.why, attempt, delay)

        tried = call(lambda: self._attempt(s), policy, again,
                     server_wait=lambda t: t.limited or None, on_retry=log_retry, sleep=self.sleep)
        t, n = tried.result, tried.attempts
        if t.out is not None:
            t.out.attempts = n
            if t.out.status != "failed":
                self.waited = 0.0
            return t.out
        if t.no_results:
            return Outcome("empty", f"{AMBIGUOUS} on {n} attempt(s): no images for this query, "
                           "or a block (ddgs 9.x answers both the same way)", [], n,
                           ambiguous=True)
        out = Outcome("failed", f"{t.why}; gave up after {n} attempts", [], n)
        if t.limited is not None:
            until = time.strftime("%H:%M", time.localtime(time.time() + (t.limited or 0)))
            wait = (f"wait {t.limited:.0f} s, until {until} (its Retry-After)" if t.limited
                    else "wait (an hour or more)")
            out.stop = f"DuckDuckGo rate-limits this machine ({t.why}): {wait}"
        elif tried.gave_up == "deadline" and left is not None and left <= (bound or 0):
            out.stop = (f"the search backend has not answered through {self.waited:.0f} s of "
                        f"retry waits, and the next would pass --search-run-wait "
                        f"{self.run_wait:g} (last: {t.why}): check the network or wait")
        return out

    def probe(self) -> bool:
        """One request for :data:`PROBE_QUERY` (images everywhere): True when it has results."""
        t = self._attempt(Search("probe", "", "en", "probe", PROBE_QUERY, self.backend, None))
        return t.out is not None and t.out.status == "ok"

    def _attempt(self, s: Search) -> _Try:
        """One paced request: a final outcome, or why another try may help."""
        from ddgs import DDGS
        from ddgs.engines.duckduckgo_images import DuckduckgoImages
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        from core import net

        if self._last is not None:  # the pacing: min_interval and jitter since the last request
            wait = (self.min_interval + random.uniform(0.0, self.jitter)
                    - (self.clock() - self._last))
            if wait > 0:
                self.sleep(wait)
        self._last = self.clock()
        self.requests += 1
        ddgs = DDGS(timeout=self.timeout)
        engine = _engine_class()(timeout=self.timeout)
        if isinstance(getattr(ddgs, "_engines_cache", None), dict):  # ddgs's engine cache
            ddgs._engines_cache[DuckduckgoImages] = engine
        try:
            raw = ddgs.images(
                s.search_query, region=s.region or "wt-wt", safesearch=self.safesearch,
                max_results=self.per_query, backend="duckduckgo")
        except (RatelimitException, TimeoutException, DDGSException) as e:
            e = engine.failure or e  # the engine's own error: ddgs words it "No results found."
            msg, kind = str(e) or type(e).__name__, type(e).__name__
            if isinstance(e, RatelimitException):
                return _Try(None, f"{kind}: {msg}", limited=getattr(e, "wait", None) or 0.0)
            if net.classify(msg) == net.PERMANENT or msg.endswith("(refused)"):
                return _Try(Outcome("failed", f"{kind}: {msg} (not retried)", [], 0))
            if not isinstance(e, TimeoutException) and "no results found" in msg.lower():
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
    """``ddgs`` / ``folder:PATH`` / ``urls:FILE`` -> (kind, path), or StageInputError."""
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
                                   "folder", normalize_term(rel), source, None, hits))
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
