"""img2dataset interop: export the crawl's URLs, ingest img2dataset's output into the catalog
with the crawl's validation and provenance.

``python -m builder.ingest --img2dataset DIR [--workdir W]``

For crawls too large for one machine: ``python -m builder.crawl --export-urls urls.parquet``
writes the pending URLs; img2dataset (Spark / Ray / multiprocessing) downloads them, e.g.::

    img2dataset --url_list urls.parquet --input_format parquet --url_col url \\
        --save_additional_columns '["item_id","concept","country","language","rank"]' \\
        --output_format files --output_folder DIR --resize_mode no --encode_format jpg

and this command brings the result back. It reads every shard's metadata (``DIR/NNNNN.parquet``,
or the ``.json`` sidecars when the parquet is missing) and takes the bytes from the ``files``
layout (``DIR/NNNNN/<key>.<ext>``), the ``parquet`` layout (a ``jpg``/``png``/``webp`` column)
or the ``webdataset`` layout (``DIR/NNNNN.tar``). The bytes go through the same checks as a
download (byte cap, Pillow decode under the pixel cap, content-addressed atomic store), each
URL gets one status and reason, and URLs already in ``downloads`` are skipped (idempotent).
Keep ``--resize_mode no``: resized images are accepted but their reason says so.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import tarfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from builder.catalog import Catalog, utcnow
from builder.download import FetchConfig, FetchResult, validate_and_store
from builder.items import finalize_duplicates, link_items, record_download
from builder.stagekit import StageInputError, report, stage_main, stage_parser, stage_run

log = logging.getLogger(__name__)

STAGE = "ingest"
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff")


def failure_status(error: str | None, i2d_status: str | None) -> tuple[str, int | None]:
    """Map an img2dataset failure to one of the crawl's statuses (and the HTTP status)."""
    msg = (error or "").lower()
    m = re.search(r"http error (\d{3})", msg)
    if m:
        return "http_error", int(m.group(1))
    if "timed out" in msg or "timeout" in msg:
        return "timeout", None
    if "x-robots-tag" in msg or ("opt" in msg and "out" in msg):
        return "opted_out", None
    if i2d_status == "failed_to_resize":
        return "not_an_image", None
    return "fetch_error", None


def _shard_records(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(shard path stem, metadata record) for every sample img2dataset wrote."""
    import pyarrow.parquet as pq

    metas = sorted(p for p in root.glob("*.parquet"))
    for meta in metas:
        try:
            table = pq.read_table(meta)
        except Exception as e:  # noqa: BLE001 - a broken shard is bad input, not a crash
            raise StageInputError(f"{meta}: not a readable img2dataset metadata parquet ({e})") from e
        for rec in table.to_pylist():
            yield meta.with_suffix(""), rec
    if metas:
        return
    for sidecar in sorted(root.glob("*/*.json")):  # files layout without the parquet
        yield sidecar.parent, json.loads(sidecar.read_text(encoding="utf-8"))


def _bytes_for(stem: Path, rec: dict[str, Any], tars: dict[Path, tarfile.TarFile]) -> bytes | None:
    for col in IMAGE_EXTS:
        if isinstance(rec.get(col), bytes | bytearray):
            return bytes(rec[col])
    key = str(rec.get("key") or "")
    if not key:
        return None
    for ext in IMAGE_EXTS:
        f = stem / f"{key}.{ext}"
        if f.is_file():
            return f.read_bytes()
    tar_path = stem.with_suffix(".tar")
    if tar_path.is_file():
        tar = tars.setdefault(tar_path, tarfile.open(tar_path))
        for ext in IMAGE_EXTS:
            try:
                member = tar.extractfile(f"{key}.{ext}")
            except KeyError:
                continue
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
    known = {r[0] for r in catalog.query("SELECT DISTINCT url FROM items")}
    done = {r[0] for r in catalog.query("SELECT url FROM downloads")}
    source = f"img2dataset:{root}"
    for stem, rec in tqdm(list(_shard_records(root)), desc="ingest", unit="sample"):
        url = rec.get("url")
        if not isinstance(url, str) or url not in known:
            with catalog.tx() as con:
                con.execute("INSERT OR IGNORE INTO crawl_input_errors (source, line, reason, "
                            "raw, run_id) VALUES (?, ?, ?, ?, ?)",
                            (source, f"{stem.name}/{rec.get('key')}",
                             "URL is not an item of this catalog", str(url), run_id))
            counts["unknown_url"] += 1
            continue
        if url in done:
            counts["already_done"] += 1
            continue
        res = _result(url, stem, rec, tars, fetch, catalog)
        with catalog.tx() as con:
            record_download(con, res, run_id)
        done.add(url)
        counts[res.status] += 1


def _result(url: str, stem: Path, rec: dict[str, Any], tars: dict[Path, tarfile.TarFile],
            fetch: FetchConfig, catalog: Catalog) -> FetchResult:
    now = utcnow()
    if rec.get("status") != "success":
        status, http = failure_status(rec.get("error_message"), rec.get("status"))
        return FetchResult(url, status, f"img2dataset: {rec.get('error_message') or rec.get('status')}",
                           http_status=http, attempts=1, fetched_at=now)
    data = _bytes_for(stem, rec, tars)
    if data is None:
        return FetchResult(url, "missing_file", f"img2dataset sample {rec.get('key')} has no bytes",
                           attempts=1, fetched_at=now)
    if len(data) > fetch.max_bytes:
        return FetchResult(url, "too_large", f"{len(data)} bytes exceeds {fetch.max_bytes}",
                           attempts=1, fetched_at=now, nbytes=len(data))
    res = FetchResult(url, "fetched", "", attempts=1, fetched_at=now, data=data,
                      final_url=url)
    res = validate_and_store(res, catalog.workdir, fetch.max_pixels)
    ow, oh = rec.get("original_width"), rec.get("original_height")
    if res.status == "ok" and ow and oh and (ow, oh) != (res.width, res.height):
        res.reason += f" (resized by img2dataset from {ow}x{oh})"
    res.reason += " via img2dataset"
    return res


def _summary(counts: Counter[str]) -> str:
    return "ingest: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing")


def build_parser() -> argparse.ArgumentParser:
    p = stage_parser("builder.ingest", "Ingest img2dataset output into the catalog.")
    p.add_argument("--img2dataset", required=True, metavar="DIR", help="img2dataset output folder")
    p.add_argument("--max-bytes", type=int, default=20 * 1024 * 1024, help="byte cap per image")
    p.add_argument("--max-pixels", type=int, default=89_478_485, help="pixel cap per image")
    return p


def _cli(args: argparse.Namespace) -> int:
    fetch = FetchConfig(max_bytes=args.max_bytes, max_pixels=args.max_pixels)
    with Catalog.open(args.workdir) as catalog:
        counts = ingest_img2dataset(catalog, Path(args.img2dataset).expanduser(), fetch)
    report(_summary(Counter(counts)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
