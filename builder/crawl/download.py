"""Image downloads, untrusted input: :class:`Downloader` fetches through the address guard
under deadlines, retries and caps, and stores only bytes that decode. Every URL ends with one
status and reason. docs/crawl.md, "Downloads are untrusted input"."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections import defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from builder.crawl.netguard import (
    BLOCK_PREFIX,
    DNS_PREFIX,
    INVALID_PREFIX,
    GuardedBackend,
    host_problem,
)
from builder.retry import parse_retry_after
from builder.workdir import WorkDir
from core import __version__
from core.clikit import local_failure
from core.options import option
from core.provenance import utcnow

log = logging.getLogger(__name__)

USER_AGENT = (
    f"xcm3-builder/{__version__} (3XCM research benchmark dataset builder; "
    "honours X-Robots-Tag noai/noimageai/noindex)"
)
#: Statuses worth another try later (``--retry-failed``).
TRANSIENT = ("timeout", "connection_error", "http_error", "dns_error", "internal_error")
#: Our failures, not the URL's: fetched again by every run, flag or not.
OURS = ("internal_error",)
#: Pillow format -> file extension of the stored original.
FORMATS = {"JPEG": "jpg", "MPO": "jpg", "PNG": "png", "WEBP": "webp", "GIF": "gif",
           "BMP": "bmp", "TIFF": "tif"}
OPT_OUT = frozenset({"noai", "noimageai", "noindex"})
ROBOTS_AGENTS = frozenset({"*", "xcm3", "xcm3-builder", "3xcm"})
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class FetchConfig:
    """Limits of one download run (the ``option`` fields are the crawl's flags)."""

    concurrency: int = option("downloads in flight overall", 16, minimum=1)
    per_host: int = option("downloads in flight per host", 4, minimum=1)
    timeout: float = option("seconds per download attempt, all of it: connect, headers, body",
                            30.0, above=0)
    connect_timeout: float = 10.0
    retries: int = option("retries of 429/5xx/timeouts: extra attempts after the first", 3,
                          minimum=0)
    backoff: float = 1.0  # first backoff in seconds, doubled per attempt, jittered
    max_backoff: float = 60.0
    max_retry_after: float = 120.0  # a longer Retry-After gives up instead of waiting
    max_bytes: int = option("byte cap per image", 20 * 1024 * 1024, minimum=1)
    max_pixels: int = option("pixel cap per image (Pillow's own bomb threshold)", 89_478_485,
                             minimum=1)
    max_redirects: int = option("redirects followed per URL", 5, minimum=0)
    allow_hosts: frozenset[str] = frozenset()
    http2: bool = option("negotiate HTTP/2 where offered", False)
    user_agent: str = USER_AGENT
    local_roots: tuple[Path, ...] = ()  # folders that file:// URLs may read (folder: search)


@dataclass
class FetchResult:
    """The outcome of one URL; ``data`` only while the bytes travel to validation."""

    url: str
    status: str
    reason: str
    http_status: int | None = None
    final_url: str | None = None
    content_type: str | None = None
    x_robots_tag: str | None = None
    attempts: int = 0
    retry_after: float | None = None
    data: bytes | None = field(default=None, repr=False)
    sha256: str | None = None
    nbytes: int | None = None
    ext: str | None = None
    format: str | None = None
    width: int | None = None
    height: int | None = None
    fetched_at: str | None = None


POOL_SIZE = 4  # connections per client (see Downloader._run)


def make_client(cfg: FetchConfig, connections: int | None = None,
                ssl_context: Any = None) -> Any:
    """An ``httpx.AsyncClient`` whose every connection goes through :class:`GuardedBackend`."""
    import httpcore
    import httpx

    transport = httpx.AsyncHTTPTransport(http2=cfg.http2, trust_env=False)
    # httpx has no public hook for the network backend: rebuild its pool with ours.
    n = connections or max(cfg.concurrency, 1)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context or httpx.create_ssl_context(), max_connections=n,
        max_keepalive_connections=n, http1=True, http2=cfg.http2,
        network_backend=GuardedBackend(cfg.allow_hosts))
    timeout = httpx.Timeout(cfg.timeout, connect=cfg.connect_timeout)
    return httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False,
                             trust_env=False, headers={"User-Agent": cfg.user_agent,
                                                       "Accept": "image/*,*/*;q=0.5",
                                                       "Accept-Encoding": "identity"})


def robots_opt_out(value: str | None) -> str | None:
    """The opt-out directive of an ``X-Robots-Tag`` value that applies to us, else None."""
    if not value:
        return None
    agent = None
    for part in value.split(","):
        token = part.strip().lower()
        if ":" in token:
            head, _, token = token.partition(":")
            agent, token = head.strip(), token.strip()
        if token in OPT_OUT and (agent is None or agent in ROBOTS_AGENTS):
            return token
    return None


def inspect_image(data: bytes, max_pixels: int) -> tuple[str, str, dict[str, Any]]:
    """(status, reason, info) of bytes that claim to be an image: the header's pixel count,
    then a full decode by the evaluator's decoder."""
    from PIL import Image, UnidentifiedImageError

    from core.decode import ImageRefused, open_image, to_rgb, upright
    from core.errors import DataError

    try:
        im = open_image(data, "", max_pixels)
    except ImageRefused as e:
        status = "decompression_bomb" if e.kind == "decompression_bomb" else "corrupt_image"
        return status, e.detail, {}
    except DataError as e:
        head = data[:32].decode("latin-1", "replace").strip()
        cause = e.__cause__
        kind = "cannot identify an image format" if isinstance(
            cause, UnidentifiedImageError) else f"{type(cause).__name__}: {cause}"
        return "not_an_image", f"{kind}; first bytes {head!r}", {}
    with im, warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        width, height = im.size
        info = {"format": im.format, "width": width, "height": height}
        if im.format not in FORMATS:
            return "unsupported_format", f"format {im.format} is not stored", info
        try:
            im.load()
            width, height = to_rgb(upright(im)).size
        except Image.DecompressionBombError as e:
            return "decompression_bomb", str(e), info
        except Exception as e:  # noqa: BLE001 - any decoder failure means a broken image
            return "corrupt_image", f"{im.format} does not decode: {type(e).__name__}: {e}", info
    info.update(width=width, height=height)
    return "ok", f"{im.format} {width}x{height}", info


def validate_and_store(res: FetchResult, workdir: WorkDir, max_pixels: int) -> FetchResult:
    """Decode-check ``res.data`` and store it; sets status, hash, size, format. Drops ``data``."""
    data, res.data = res.data or b"", None
    res.nbytes = len(data)
    status, reason, info = inspect_image(data, max_pixels)
    res.format, res.width, res.height = info.get("format"), info.get("width"), info.get("height")
    res.status, res.reason = status, reason
    if status == "ok":
        res.ext = FORMATS[res.format or ""]
        res.sha256, _ = workdir.store_image_bytes(data, res.ext)
    return res


async def _until_first_error(jobs: list[Awaitable[None]]) -> None:
    """Run the workers; the first that raises stops the others, then its exception is raised."""
    tasks = [asyncio.ensure_future(j) for j in jobs]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]


class Downloader:
    """Fetches, validates and stores a list of URLs; calls ``on_result`` once per URL."""

    def __init__(self, cfg: FetchConfig, workdir: WorkDir,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.cfg = cfg
        self.workdir = workdir
        self.sleep = sleep  # the wait between attempts (tests may pass a fake)

    def run(self, urls: list[str], on_result: Callable[[FetchResult], None],
            progress: Callable[[int], None] | None = None) -> None:
        """Blocking entry point: downloads ``urls`` (host-interleaved) and reports each."""
        asyncio.run(self._run(interleave_hosts(urls), on_result, progress))

    async def _run(self, urls: list[str], on_result: Callable[[FetchResult], None],
                   progress: Callable[[int], None] | None) -> None:
        cfg = self.cfg
        host_sems: dict[str, asyncio.Semaphore] = defaultdict(
            lambda: asyncio.Semaphore(max(cfg.per_host, 1)))
        todo = iter(urls)
        loop = asyncio.get_running_loop()
        # validation is CPU-bound but the store ends in an fsync: enough threads to overlap those
        with ThreadPoolExecutor(max_workers=max(4, cfg.concurrency),
                                thread_name_prefix="xcm-validate") as pool:
            # small clients of POOL_SIZE connections: httpcore's pool costs O(connections^2)
            # per request (docs/crawl.md, "Benchmarks")
            n = max(cfg.concurrency, 1)
            import httpx

            ssl_context = httpx.create_ssl_context()
            async with AsyncExitStack() as stack:
                clients = [await stack.enter_async_context(make_client(cfg, POOL_SIZE, ssl_context))
                           for _ in range(-(-n // POOL_SIZE))]

                async def worker(client: Any) -> None:
                    for url in todo:
                        try:
                            async with host_sems[_host_key(url)]:
                                res = await self.fetch(client, url, pool)
                            if res.status == "fetched":
                                res = await loop.run_in_executor(
                                    pool, validate_and_store, res, self.workdir, cfg.max_pixels)
                        except ModuleNotFoundError:
                            raise  # a missing library is ours to fix, not the URL's fault
                        except Exception as e:  # noqa: BLE001 - one bad URL never ends the run
                            if local_failure(e):
                                raise  # a full or read-only disk: stop, the URL stays pending
                            log.exception("internal error on %s (ours; fetched again by the "
                                          "next run)", url)
                            res = FetchResult(url, "internal_error",
                                              f"internal error: {type(e).__name__}: {e}")
                        res.fetched_at = res.fetched_at or utcnow()
                        on_result(res)
                        if progress:
                            progress(1)

                await _until_first_error([worker(clients[k // POOL_SIZE]) for k in range(n)])

    async def fetch(self, client: Any, url: str, pool: ThreadPoolExecutor | None = None
                    ) -> FetchResult:
        """All attempts for one URL; status ``fetched`` means bytes await validation."""
        if url.startswith("file:"):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(pool, self.read_local, url)
        from builder.retry import Backoff, call_async

        cfg = self.cfg
        policy = Backoff(cfg.retries, cfg.backoff, cfg.max_backoff, cfg.max_retry_after)

        def log_retry(res: FetchResult, attempt: int, delay: float) -> None:
            log.debug("retry %s in %.2fs (%s: %s)", url, delay, res.status, res.reason)

        tried = await call_async(lambda: self._attempt(client, url), policy, _retryable,
                                 server_wait=lambda r: r.retry_after, on_retry=log_retry,
                                 sleep=self.sleep)
        res = tried.result
        res.attempts = tried.attempts
        if tried.gave_up == "server_wait":
            res.reason += (f"; Retry-After {res.retry_after:.0f}s exceeds the cap "
                           f"{cfg.max_retry_after:.0f}s")
        elif tried.attempts > 1 and res.status != "fetched":
            res.reason += f" (after {tried.attempts} attempts)"
        return res

    async def _attempt(self, client: Any, url: str) -> FetchResult:
        import httpx

        try:
            async with asyncio.timeout(self.cfg.timeout):
                return await self._follow(client, url)
        except TimeoutError:
            return FetchResult(url, "timeout", f"no complete response within {self.cfg.timeout}s")
        except httpx.TimeoutException as e:
            return FetchResult(url, "timeout", f"{type(e).__name__}: {e}")
        except httpx.InvalidURL as e:
            return FetchResult(url, "invalid_url", str(e))
        except httpx.ConnectError as e:
            msg = str(e)
            for prefix, status in ((BLOCK_PREFIX, "blocked_host"), (INVALID_PREFIX, "invalid_url"),
                                   (DNS_PREFIX, "dns_error")):  # the address guard's refusals
                if prefix in msg:
                    return FetchResult(url, status, msg.split(prefix, 1)[1])
            return FetchResult(url, "connection_error", f"ConnectError: {msg}")
        except httpx.HTTPError as e:
            return FetchResult(url, "connection_error", f"{type(e).__name__}: {e}")

    async def _follow(self, client: Any, url: str) -> FetchResult:
        import httpx

        seen: set[str] = set()
        current = url
        for _hop in range(self.cfg.max_redirects + 1):
            try:
                parsed = httpx.URL(current)
            except (httpx.InvalidURL, TypeError, ValueError) as e:
                return FetchResult(url, "invalid_url", f"{current!r}: {e}", final_url=current)
            if not parsed.scheme:
                return FetchResult(url, "invalid_url", f"not an absolute URL: {current!r}")
            if parsed.scheme not in ("http", "https"):
                return FetchResult(url, "unsupported_scheme",
                                   f"only http/https are fetched, got {parsed.scheme!r}",
                                   final_url=current)
            if not parsed.host:
                return FetchResult(url, "invalid_url", f"no host in {current!r}")
            problem = host_problem(parsed.host)
            if problem:
                return FetchResult(url, "invalid_url", problem, final_url=current)
            if current in seen:
                return FetchResult(url, "redirect_loop", f"{current} was already visited",
                                   final_url=current)
            seen.add(current)
            resp = await client.send(client.build_request("GET", parsed), stream=True)
            try:
                if resp.status_code in REDIRECT_CODES:
                    loc = resp.headers.get("location")
                    if not loc:
                        return FetchResult(url, "http_error", "redirect without Location",
                                           http_status=resp.status_code, final_url=current)
                    current = str(parsed.join(loc))
                    continue
                return await self._read(resp, url, current)
            finally:
                await resp.aclose()
        return FetchResult(url, "too_many_redirects",
                           f"more than {self.cfg.max_redirects} redirects", final_url=current)

    async def _read(self, resp: Any, url: str, final: str) -> FetchResult:
        ctype = resp.headers.get("content-type")
        robots = resp.headers.get("x-robots-tag")
        base = dict(http_status=resp.status_code, final_url=final, content_type=ctype,
                    x_robots_tag=robots)
        if resp.status_code != 200:
            return FetchResult(url, "http_error", f"HTTP {resp.status_code} {resp.reason_phrase}",
                               retry_after=parse_retry_after(resp.headers.get("retry-after")),
                               **base)
        directive = robots_opt_out(robots)
        if directive:
            return FetchResult(url, "opted_out", f"X-Robots-Tag: {robots}", **base)
        cap = self.cfg.max_bytes
        declared = resp.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap:
            return FetchResult(url, "too_large", f"Content-Length {declared} exceeds {cap} bytes",
                               **base)
        buf = bytearray()
        async for chunk in resp.aiter_bytes():  # decoded; the cap bounds what we hold
            buf += chunk
            if len(buf) > cap:
                return FetchResult(url, "too_large", f"body exceeds {cap} bytes (stopped reading)",
                                   **base)
        return FetchResult(url, "fetched", "bytes received", data=bytes(buf), **base)

    def read_local(self, url: str) -> FetchResult:
        """A ``file://`` URL from the folder backend: same caps and validation as downloads."""

        def local(status: str, reason: str, data: bytes | None = None) -> FetchResult:
            return FetchResult(url, status, reason, final_url=url, attempts=1, data=data)

        try:
            real = Path(unquote(urlsplit(url).path)).resolve(strict=True)
        except OSError as e:
            return local("missing_file", str(e))
        if not any(real.is_relative_to(r.resolve()) for r in self.cfg.local_roots):
            return local("blocked_host", f"{real} is outside the search folder")
        if (size := real.stat().st_size) > self.cfg.max_bytes:
            return local("too_large", f"{size} bytes exceeds {self.cfg.max_bytes}")
        try:
            data = real.read_bytes()
        except OSError as e:  # the user's file, not our disk
            return local("missing_file", f"cannot read {real}: {e.strerror or e}")
        return validate_and_store(local("fetched", "local file", data), self.workdir,
                                  self.cfg.max_pixels)

def _retryable(res: FetchResult) -> bool:
    if res.status in ("timeout", "connection_error"):
        return True
    return res.status == "http_error" and res.http_status is not None and (
        res.http_status == 429 or res.http_status >= 500)


def _host_key(url: str) -> str:
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:
        return ""


def interleave_hosts(urls: list[str]) -> list[str]:
    """Round-robin over hosts so one slow host does not hold every worker (order kept within)."""
    by_host: dict[str, list[str]] = defaultdict(list)
    for u in urls:
        by_host[_host_key(u)].append(u)
    return [u for turn in zip_longest(*by_host.values()) for u in turn if u is not None]
