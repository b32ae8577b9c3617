"""img2dataset's output (files, parquet or webdataset shards) into the catalog through the
crawl's checks and statuses; idempotent. docs/crawl.md, "More than one machine: img2dataset"."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import tarfile
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from builder.catalog import Catalog
from builder.crawl.download import FetchConfig, FetchResult, validate_and_store
from builder.crawl.download_records import finalize_duplicates, link_items, record_download
from builder.crawl.netguard import url_refusal
from builder.crawl.records import add_input_error
from builder.crawl.search import InputError
from builder.stagekit import StageInputError, stage_main, stage_parser, stage_run
from builder.workdir import WorkDir
from core.clikit import report
from core.options import from_args, option
from core.provenance import utcnow

log = logging.getLogger(__name__)

STAGE = "ingest"
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff")


@dataclass
class IngestConfig:
    """The stage's flags (``core.options``)."""

    img2dataset: str = option("img2dataset output folder", metavar="DIR")
    max_bytes: int = option("byte cap per image", FetchConfig.max_bytes, minimum=1)
    max_pixels: int = option("pixel cap per image", FetchConfig.max_pixels, minimum=1)
    allow_host: tuple[str, ...] = option(
        "a non-public address (or localhost) whose images are accepted; exactly what is named, "
        "as the crawl's --allow-host", (), metavar="HOST")


#: img2dataset's error text (urllib's, mostly) -> the crawl's status, first match wins. The
#: statuses are the built-in downloader's for the same failure, so ``--retry-failed`` treats
#: them alike (``download.TRANSIENT``).
FAILURES = (
    ("infinite loop", "redirect_loop"),  # urllib: "...redirect error that would lead to an infinite loop"
    ("redirection to url", "unsupported_scheme"),  # urllib refuses a redirect to ftp:// etc.
    ("unknown url type", "unsupported_scheme"),
    ("timed out", "timeout"), ("timeout", "timeout"),
    ("x-robots-tag", "opted_out"),
    ("name or service not known", "dns_error"), ("nodename nor servname", "dns_error"),
    ("temporary failure in name resolution", "dns_error"), ("getaddrinfo failed", "dns_error"),
    ("no address associated", "dns_error"),
    ("connection refused", "connection_error"), ("connection reset", "connection_error"),
    ("remote end closed", "connection_error"), ("connection aborted", "connection_error"),
    ("network is unreachable", "connection_error"), ("no route to host", "connection_error"),
    ("certificate verify failed", "connection_error"), ("ssl", "connection_error"),
    ("incompleteread", "connection_error"),
)


def failure_status(error: str | None, i2d_status: str | None) -> tuple[str, int | None]:
    """Map an img2dataset failure to one of the crawl's statuses (and the HTTP status)."""
    msg = (error or "").lower()
    for needle, status in FAILURES[:2]:
        if needle in msg:
            return status, None
    m = re.search(r"http error (\d{3})", msg)
    if m:
        return "http_error", int(m.group(1))
    for needle, status in FAILURES[2:]:
        if needle in msg:
            return status, None
    if i2d_status == "failed_to_resize":
        return "not_an_image", None
    return "fetch_error", None


def _shard_records(root: Path, counts: Counter[str]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(shard stem, record) of each sample of each finished shard (with a ``_stats.json``)."""
    import pyarrow.parquet as pq

    metas = sorted(p for p in root.glob("*.parquet"))
    finished = {p.name.split("_", 1)[0] for p in root.glob("*_stats.json")}
    if finished:
        unfinished = [m.name for m in metas if m.stem not in finished]
        if unfinished:
            log.warning("%d shard(s) without img2dataset's _stats.json skipped (unfinished): %s",
                        len(unfinished), ", ".join(unfinished[:5]))
            counts["incomplete_shard"] += len(unfinished)
        metas = [m for m in metas if m.stem in finished]
    for meta in metas:
        try:
            table = pq.read_table(meta)
        except Exception as e:  # noqa: BLE001 - a broken shard is bad input, not a crash
            raise StageInputError(f"{meta}: not a readable img2dataset metadata parquet ({e})") from e
        for rec in table.to_pylist():
            yield meta.with_suffix(""), rec
    if metas or finished:
        return
    for sidecar in sorted(root.glob("*/*.json")):  # files layout without the parquet
        yield sidecar.parent, json.loads(sidecar.read_text(encoding="utf-8"))


class _TooLarge(Exception):
    """A sample file above the byte cap, refused from its size (never read)."""

    def __init__(self, size: int):
        self.size = size


def _bytes_for(stem: Path, rec: dict[str, Any], tars: dict[Path, tarfile.TarFile],
               max_bytes: int) -> bytes | None:
    """The sample's bytes; :class:`_TooLarge`, before reading, for one over ``max_bytes``."""
    for col in IMAGE_EXTS:
        if isinstance(rec.get(col), bytes | bytearray):
            return bytes(rec[col])
    key = str(rec.get("key") or "")
    if not key:
        return None
    for ext in IMAGE_EXTS:
        f = stem / f"{key}.{ext}"
        if f.is_file():
            if (size := f.stat().st_size) > max_bytes:
                raise _TooLarge(size)
            return f.read_bytes()
    tar_path = stem.with_suffix(".tar")
    if tar_path.is_file():
        tar = tars.setdefault(tar_path, tarfile.open(tar_path))
        for ext in IMAGE_EXTS:
            try:
                info = tar.getmember(f"{key}.{ext}")
            except KeyError:
                continue
            if info.size > max_bytes:
                raise _TooLarge(info.size)
            member = tar.extractfile(info)
            if member is not None:
                return member.read()
    return None


def ingest_img2dataset(catalog: Catalog, root: Path, fetch: FetchConfig | None = None
                       ) -> dict[str, Any]:
    """Ingest one img2dataset output folder; returns counts by status."""
    fetch = fetch or FetchConfig()
    if not root.is_dir():
        raise StageInputError(f"--img2dataset: {root} is not a folder")
    counts: Counter[str] = Counter()
    with stage_run(catalog, STAGE, {"img2dataset": str(root)}) as rec:
        rec.counts = counts  # filled as it goes: an interrupted run records what it did
        tars: dict[Path, tarfile.TarFile] = {}
        try:
            _ingest(catalog, root, fetch, tars, counts, rec.run_id)
        finally:
            for t in tars.values():
                t.close()
        link_items(catalog)
        finalize_duplicates(catalog)
        rec.summary = _summary(counts)
    return dict(counts)


def _ingest(catalog: Catalog, root: Path, fetch: FetchConfig, tars: dict[Path, tarfile.TarFile],
            counts: Counter[str], run_id: int) -> None:
    """Read samples, validate and store them in threads (GIL released), record in order."""
    known = {r[0] for r in catalog.query("SELECT DISTINCT url FROM items")}
    done = {r[0] for r in catalog.query("SELECT url FROM downloads")}
    source = f"img2dataset:{root}"
    workers = max(2, os.cpu_count() or 1)
    inflight: deque[Future[FetchResult]] = deque()

    def record(res: FetchResult) -> None:
        with catalog.tx() as con:
            record_download(con, res, run_id)
        counts[res.status] += 1

    with ThreadPoolExecutor(workers, thread_name_prefix="xcm-ingest") as pool:
        for stem, rec in tqdm(_shard_records(root, counts), desc="ingest", unit="sample"):
            url = rec.get("url")
            if not isinstance(url, str) or url not in known:
                with catalog.tx() as con:
                    add_input_error(con, InputError(source, f"{stem.name}/{rec.get('key')}",
                                                    "URL is not an item of this catalog",
                                                    str(url)), run_id)
                counts["unknown_url"] += 1
                continue
            if url in done:
                counts["already_done"] += 1
                continue
            done.add(url)
            res = _prepare(url, stem, rec, tars, fetch)
            inflight.append(pool.submit(_validate, res, rec, catalog.workdir, fetch.max_pixels)
                            if res.status == "fetched" else pool.submit(lambda r=res: r))
            while len(inflight) > 2 * workers or (inflight and inflight[0].done()):
                record(inflight.popleft().result())  # our own failure (disk) raises here
        while inflight:
            record(inflight.popleft().result())


def _prepare(url: str, stem: Path, rec: dict[str, Any], tars: dict[Path, tarfile.TarFile],
             fetch: FetchConfig) -> FetchResult:
    """One sample's outcome, or ``fetched`` with its bytes (img2dataset reports no redirects,
    headers or attempts: those stay NULL, ``attempts`` 1)."""
    now = utcnow()

    def outcome(status: str, reason: str, **kw: Any) -> FetchResult:
        return FetchResult(url, status, reason, attempts=1, fetched_at=now, **kw)

    refused = url_refusal(url, fetch.allow_hosts)  # img2dataset has no address guard
    if refused:
        return outcome(refused[0], f"{refused[1]} (fetched by img2dataset, not stored)")
    if rec.get("status") != "success":
        status, http = failure_status(rec.get("error_message"), rec.get("status"))
        return outcome(status, f"img2dataset: {rec.get('error_message') or rec.get('status')}",
                       http_status=http)
    try:
        data = _bytes_for(stem, rec, tars, fetch.max_bytes)
    except _TooLarge as e:
        return outcome("too_large", f"{e.size} bytes exceeds {fetch.max_bytes}")
    if data is None:
        return outcome("missing_file", f"img2dataset sample {rec.get('key')} has no bytes")
    if len(data) > fetch.max_bytes:  # as the crawl: the refused body's size is not recorded
        return outcome("too_large", f"{len(data)} bytes exceeds {fetch.max_bytes}")
    return outcome("fetched", "", data=data)

def _validate(res: FetchResult, rec: dict[str, Any], workdir: WorkDir, max_pixels: int
              ) -> FetchResult:
    """The crawl's checks and store; the reason says what img2dataset changed, if anything."""
    served = rec.get("sha256")
    res = validate_and_store(res, workdir, max_pixels)
    ow, oh = rec.get("original_width"), rec.get("original_height")
    if res.status == "ok" and ow and oh and (ow, oh) != (res.width, res.height):
        res.reason += f" (resized by img2dataset from {ow}x{oh})"
    elif res.status == "ok" and isinstance(served, str) and served != res.sha256:
        res.reason += f" (re-encoded by img2dataset; the served bytes had sha256 {served})"
    res.reason += " via img2dataset"
    return res


def _summary(counts: Counter[str]) -> str:
    return "ingest: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing")


def build_parser() -> argparse.ArgumentParser:
    return stage_parser("builder.ingest", "Ingest img2dataset output into the catalog.",
                        IngestConfig)


def _cli(args: argparse.Namespace) -> int:
    cfg = from_args(IngestConfig, args)
    fetch = FetchConfig(max_bytes=cfg.max_bytes, max_pixels=cfg.max_pixels,
                        allow_hosts=frozenset(h.lower() for h in cfg.allow_host))
    with Catalog.open(args.workdir) as catalog:
        counts = ingest_img2dataset(catalog, Path(cfg.img2dataset).expanduser(), fetch)
    report(_summary(Counter(counts)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
