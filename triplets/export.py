"""Export a work dir's triplets as the 3XCM release folder (layout: docs/release.md, "export").

Refuses (exit 1) when a triplet rule is broken or an image's bytes are missing or do not
match their sha256. The release is built in a temporary sibling folder and swapped in, so a
killed export never leaves half a release; files get the user's umask (a release is shared).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from builder.catalog import Catalog
from builder.statuses import USABLE_ITEMS
from builder.workdir import WorkDir
from core import __version__
from core import release as fmt
from core.files import (
    FolderNotOursError,
    atomic_write_text,
    install_folder,
    may_write_into,
    sha256_bytes,
)
from core.provenance import git_commit, utcnow
from triplets.card import card_text, front_matter, licence_text
from triplets.croissant import write_croissant
from triplets.pool import Pool, PoolImage, load_pool
from triplets.release_stats import release_numbers, stage_records
from triplets.rules import Violation, check_sampled
from triplets.sample_run import pool_image_infos, read_workdir_triplets, with_locale

log = logging.getLogger(__name__)

SHARD_BYTES = 256 * 1024 * 1024
#: the kind in the marker that tells a release folder we wrote (see core.files)
RELEASE_KIND = "3xcm-release"


class ExportError(RuntimeError):
    """The work dir cannot be released as it is; ``violations`` lists rule breaks if any."""

    def __init__(self, message: str, violations: list[Violation] | None = None):
        super().__init__(message)
        self.violations = violations or []


@dataclass
class ExportResult:
    out: Path
    n_triplets: int
    n_images: int
    shards: int
    numbers: dict[str, Any]


#: a local path (``/…``, ``file:///…``) or a web URL (kept as it is) in a stored string
_PATHS = re.compile(r"(?:file://)?(?<![\w.~-])/[^\s\"'<>|,;)\]]*|[a-z][a-z0-9+.-]*://\S*", re.I)


def public(obj: Any, root: Path) -> Any:
    """``obj`` without the builder's machine: paths inside ``root`` made relative, other local
    paths cut to ``<local>/name``, URLs kept; invalid Unicode (lone surrogates) -> U+FFFD."""
    if isinstance(obj, dict):
        return {public(k, root): public(v, root) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [public(v, root) for v in obj]
    if not isinstance(obj, str):
        return obj
    obj = re.sub("[\ud800-\udfff]", "\ufffd", obj)

    def local(m: re.Match[str]) -> str:
        text = m.group(0)
        if "://" in text and not text.lower().startswith("file://"):
            return text  # a web URL
        path = Path(unquote(text[7:]) if text.lower().startswith("file://") else text)
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix() or "."
        return f"<local>/{path.name}" if path.name else text

    return _PATHS.sub(local, obj)


def image_row(im: PoolImage, data: bytes) -> dict[str, Any]:
    return {
        "image_id": im.image_id,
        "image": {"bytes": data, "path": f"{im.image_id}.{im.ext}"},
        "concept": im.concept, "country": im.country, "query_language": im.query_language,
        "search_query": im.search_query, "search_rank": im.search_rank, "source_url": im.source_url,
        "page_url": im.page_url, "title": im.title, "tags": list(im.tags or ()),
        "sha256": im.sha256, "width": im.width, "height": im.height,
    }


def _read_image(wd: WorkDir, im: PoolImage) -> bytes:
    path = wd.image_path(im.sha256, im.ext)
    if not path.is_file():
        raise ExportError(f"image bytes missing for {im.image_id}: {path}")
    data = path.read_bytes()
    if sha256_bytes(data) != im.sha256:
        raise ExportError(f"image bytes of {im.image_id} do not match their sha256: {path}")
    return data


def plan_shards(wd: WorkDir, images: list[PoolImage], shard_bytes: int) -> list[list[PoolImage]]:
    """Consecutive groups of images of at most ``shard_bytes`` bytes (at least one image each)."""
    shards: list[list[PoolImage]] = [[]]
    size = 0
    for im in images:
        path = wd.image_path(im.sha256, im.ext)
        n = path.stat().st_size if path.is_file() else 0
        if shards[-1] and size + n > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(im)
        size += n
    return shards


def provenance_records(cat: Catalog, pool: Pool) -> list[dict[str, Any]]:
    """One record per released image: its search, download, dedup, review and tagging."""
    rows = {int(r["item_id"]): dict(r) for r in cat.query(
        "SELECT i.item_id, i.status AS item_status, i.reason AS item_reason, i.group_id,"
        " s.backend, s.region, s.kind AS query_kind, s.searched_at, d.http_status, d.final_url,"
        " d.content_type, d.bytes, d.fetched_at, im.format, t.status AS tag_status,"
        " t.model AS tag_model, t.prompt_sha AS tag_prompt_sha"
        " FROM items i LEFT JOIN searches s ON s.search_id = i.search_id"
        " LEFT JOIN downloads d ON d.url = i.url LEFT JOIN images im ON im.sha256 = i.sha256"
        " LEFT JOIN tags t ON t.sha256 = i.sha256 WHERE i.status IN (?, ?)", USABLE_ITEMS)}
    reviews: dict[int, list[dict]] = {}
    for r in cat.query("SELECT item_id, kind, annotator, decision FROM reviews WHERE current=1"
                       " AND item_id IS NOT NULL ORDER BY review_id"):
        reviews.setdefault(int(r["item_id"]), []).append(
            {"kind": r["kind"], "annotator": r["annotator"], "decision": r["decision"]})
    out = []
    for im in pool.images:
        rec = {"image_id": im.image_id, "sha256": im.sha256, "item_id": im.item_id,
               "concept": im.concept, "country": im.country, "query_language": im.query_language,
               "search_query": im.search_query, "search_rank": im.search_rank,
               "source_url": im.source_url, "page_url": im.page_url, "title": im.title}
        rec.update({k: v for k, v in rows.get(im.item_id, {}).items() if k != "item_id"})
        rec["reviews"] = reviews.get(im.item_id, [])
        out.append(rec)
    return out


def export_release(
    workdir: str | Path | WorkDir | None, out: str | Path, *, shard_bytes: int = SHARD_BYTES,
) -> ExportResult:
    """Write the release folder ``out`` from the work dir's catalog (see the module docstring)."""
    out = Path(out).resolve()  # a symlinked --out: the folder it points to
    with _ours():  # refuse a folder we did not write before any work
        may_write_into(out, RELEASE_KIND)
    with Catalog.open(workdir) as cat:
        pool = load_pool(cat)
        rows, sampling = read_workdir_triplets(cat, pool)
        if not rows:
            raise ExportError("no triplets in the catalog: run `python -m triplets sample` first")
        bad = check_sampled(rows, pool_image_infos(pool), sampling)
        if bad:
            raise ExportError(f"{len(bad)} triplet rule violation(s); nothing exported", bad)
        numbers = release_numbers(cat, pool, rows, sampling)
        build = {"format": fmt.FORMAT, "format_version": fmt.FORMAT_VERSION,
                 "exported_at": utcnow(), "package_version": __version__,
                 "git_commit": git_commit(), "sampling": sampling,
                 "stage_runs": stage_records(cat), "numbers": numbers}
        provenance = provenance_records(cat, pool)
        wd = cat.workdir
    root = wd.root.resolve()
    build, numbers = public(build, root), public(numbers, root)
    provenance = [public(r, root) for r in provenance]
    out.parent.mkdir(parents=True, exist_ok=True)
    # a fresh folder of our own beside ``out`` (never one of a name a user may have made)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        n_shards = _write_files(wd, tmp, pool, rows, numbers, build, provenance, shard_bytes)
        _check_written(tmp)
        with _ours():
            install_folder(tmp, out, RELEASE_KIND)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("release written to %s: %d triplets, %d images", out, len(rows), len(pool.images))
    return ExportResult(out, len(rows), len(pool.images), n_shards, numbers)


def _write_files(wd: WorkDir, tmp: Path, pool: Pool, rows: list[dict], numbers: dict,
                 build: dict, provenance: list[dict], shard_bytes: int) -> int:
    from tqdm import tqdm

    shards = plan_shards(wd, pool.images, shard_bytes)
    root = wd.root.resolve()
    batches = ([public(image_row(im, _read_image(wd, im)), root) for im in shard]
               for shard in tqdm(shards, desc="image shards", unit="shard"))
    split_info = fmt.write_tables(tmp, with_locale(rows, pool), batches, len(shards))
    yaml_feats = fmt.yaml_features()
    meta = front_matter(yaml_feats, split_info, len(rows))
    fmt.write_metadata(tmp, card_text(meta, numbers, build), build, licence_text())
    atomic_write_text(tmp / "provenance.jsonl", "".join(
        json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in provenance))
    write_croissant(tmp, yaml_feats, build)  # last: it records the other files' sha256
    return len(shards)


def _check_written(folder: Path) -> None:
    """Validate the files as a user will read them (rules and embedded bytes) before the swap."""
    from triplets.sources import release_violations

    _, bad = release_violations(folder)
    if bad:
        raise ExportError(f"the written release breaks {len(bad)} rule(s); not installed", bad)


@contextmanager
def _ours() -> Iterator[None]:
    """``--out`` not a folder we wrote: one :class:`ExportError` line."""
    try:
        yield
    except FolderNotOursError as e:
        raise ExportError(f"--out {e}") from e
