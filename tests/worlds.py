"""Synthetic work dirs for the tests: a catalog as the stages would leave it.

Every row goes through the writer the stages use themselves (``builder.crawl.records``,
``builder.crawl.download_records``, ``builder.queries``, ``builder.tagging.rules``,
``builder.image_dedup``, ``builder.concepts``), so a change of the schema or of how a stage
writes a table reaches the test worlds too.

* :class:`World`: one open transaction on a work dir with a call per kind of row (search,
  image, item, tag, dedup group, query, concept); :func:`open_world` yields one.
* :func:`build_world`: the regular world of the triplet, tagging and sampling tests: each
  (concept, country) cell gets ``per_cell`` distinct PNGs (8x8, colour from a hash) stored
  content-addressed, with searches, search results, items, images, native queries and tags.

``tests/annotation/synth.py`` lays out its dedup groups with :class:`World` too.
"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.catalog import Catalog
from builder.concepts import add_concept
from builder.crawl.download_records import record_image
from builder.crawl.records import add_item, add_result, add_search
from builder.crawl.search import Hit, Search
from builder.image_dedup import add_dedup_group
from builder.queries import QueryRow, upsert_queries
from builder.statuses import ConceptStatus
from builder.tagging.rules import record_tag
from builder.workdir import WorkDir
from core import datatables

TagFn = Callable[[str, str, int], list[str] | None]


def png(key: str, size: int = 8) -> bytes:
    """A small PNG whose pixels come from sha256(key): distinct keys, distinct bytes."""
    from PIL import Image

    h = hashlib.sha256(key.encode()).digest()
    im = Image.new("RGB", (size, size))
    im.putdata([tuple(h[(3 * i) % 30:(3 * i) % 30 + 3]) for i in range(size * size)])
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


class World:
    """Rows of one work dir's catalog, written in the open transaction ``con``."""

    def __init__(self, wd: WorkDir, con):
        self.wd = wd
        self.con = con
        self._searches: dict[int, Search] = {}

    def concept(self, name: str, status: ConceptStatus = ConceptStatus.KEPT,
                source: str = "curated") -> None:
        add_concept(self.con, name, source, status)

    def search(self, concept: str, country: str, language: str, search_query: str, *,
               kind: str = "native", backend: str = "folder", status: str = "ok",
               n_results: int | None = None) -> int:
        """A searched query; returns its ``search_id``."""
        s = Search(concept, country, language, kind, search_query, backend)
        sid = add_search(self.con, s, status=status, n_results=n_results)
        self._searches[sid] = s
        return sid

    def image(self, data: bytes, width: int, height: int, *, ext: str = "png",
              fmt: str = "PNG", nbytes: int | None = None, store: bool = True,
              sha256: str | None = None, phash: str | None = None,
              first_seen: str | None = None) -> str:
        """An image (its bytes stored content-addressed unless ``store`` is false: then
        ``sha256`` names it); returns its sha256."""
        if store:
            sha256, _ = self.wd.store_image_bytes(data, ext)
        assert sha256 is not None
        record_image(self.con, sha256, ext, fmt, width, height,
                     len(data) if nbytes is None else nbytes, first_seen, phash)
        return sha256

    def item(self, search_id: int, rank: int, url: str, sha256: str | None, *,
             status: str = "ok", group_id: int | None = None, language: str | None = None,
             page_url: str | None = None, title: str | None = None,
             result: bool = False) -> int:
        """The item at ``rank`` of a search (with its ``search_results`` row if ``result``);
        ``language`` overrides the search's. Returns its ``item_id``."""
        s = self._searches[search_id]
        if language is not None:
            s = Search(s.concept, s.country, language, s.kind, s.search_query, s.backend)
        if result:
            add_result(self.con, search_id, Hit(rank, url, page_url, title))
        return add_item(self.con, search_id, rank, s, url, status=status, sha256=sha256,
                        group_id=group_id)

    def tag(self, sha256: str, tags: list[str] | None, *, status: str = "ok",
            model: str = "test-model", prompt_sha: str | None = None) -> None:
        record_tag(self.con, sha256, tags, status, model=model, prompt_sha=prompt_sha)

    def group(self, group_id: int, concept: str, status: str, kept_item_id: int | None) -> None:
        """A dedup group of that number (its items name it by ``group_id``)."""
        add_dedup_group(self.con, concept, status, {}, kept_item_id=kept_item_id,
                        group_id=group_id)

    def query(self, concept: str, country: str, kind: str, language: str, text: str, *,
              native_term: str | None = None, source: str = "test") -> None:
        upsert_queries(self.con, [QueryRow(concept, country, kind, language, text, source,
                                           native_term)])


@contextmanager
def open_world(root: Path | WorkDir) -> Iterator[World]:
    """A :class:`World` on the work dir at ``root`` (created), committed on leaving."""
    wd = root if isinstance(root, WorkDir) else WorkDir.open(root)
    with Catalog.open(wd) as cat, cat.tx() as con:
        yield World(wd, con)


def own_tag(concept: str, country: str, i: int) -> list[str] | None:
    return [concept]


def build_world(
    root: Path,
    concepts: list[str],
    countries: list[str] | None = None,
    per_cell: int = 2,
    tag_fn: TagFn = own_tag,
    status_fn: Callable[[str, str, int], str] | None = None,
    shuffle_seed: int | None = None,
    native_terms: bool = True,
) -> WorkDir:
    """Write the regular world into a fresh work dir at ``root``: per (concept, country) a
    ``native`` search of ``per_cell`` results, each an item (status ``ok`` or
    ``status_fn``'s) with its image and tags (``tag_fn``'s; None: untagged); a native query
    with its term for each non-English country if ``native_terms``. Insertion order
    shuffled if asked."""
    countries = countries or [c.code for c in datatables.countries()]
    langs = {c.code: c.language for c in datatables.countries()}
    cells = [(c, k, i) for c in concepts for k in countries for i in range(per_cell)]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(cells)
    with open_world(root) as w:
        search_ids: dict[tuple[str, str], int] = {}
        for c, k, i in cells:
            if (c, k) not in search_ids:
                search_ids[(c, k)] = w.search(c, k, langs[k], f"{c} {k}", n_results=per_cell)
                if native_terms and langs[k] != "en":
                    w.query(c, k, "native", langs[k], f"{c}~{langs[k]} query",
                            native_term=f"{c}~{langs[k]}")
            sha = w.image(png(f"{c}|{k}|{i}"), 8, 8)
            w.item(search_ids[(c, k)], i + 1, f"http://images.test/{k}/{c}/{i}.png", sha,
                   status=status_fn(c, k, i) if status_fn else "ok",
                   page_url=f"http://pages.test/{k}/{c}/{i}", title=f"{c} in {k} #{i}",
                   result=True)
            tags = tag_fn(c, k, i)
            if tags is not None:
                w.tag(sha, tags, prompt_sha="0" * 64)
        return w.wd
