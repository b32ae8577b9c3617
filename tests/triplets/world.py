"""A synthetic catalog for the triplet tests: kept items with real image bytes and planted tags.

Each (concept, country) cell gets ``per_cell`` distinct PNGs (8x8, colour from a hash) stored
content-addressed in the work dir, with searches, search results, items, images and tags rows
as the crawl, dedup and tagging stages would leave them.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from collections.abc import Callable
from pathlib import Path

from benchmark import tables
from builder.catalog import Catalog
from builder.download_records import record_image
from builder.workdir import WorkDir

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
    """Write the world into a fresh work dir at ``root``; insertion order shuffled if asked."""
    countries = countries or [c.code for c in tables.countries()]
    langs = {c.code: c.language for c in tables.countries()}
    cells = [(c, k, i) for c in concepts for k in countries for i in range(per_cell)]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(cells)
    wd = WorkDir.open(root)
    with Catalog.open(wd) as cat, cat.tx() as con:
        search_ids: dict[tuple[str, str], int] = {}
        for c, k, i in cells:
            if (c, k) not in search_ids:
                cur = con.execute(
                    "INSERT INTO searches (concept, country, language, kind, query_text, backend,"
                    " status, n_results) VALUES (?,?,?,?,?,?,?,?)",
                    (c, k, langs[k], "native", f"{c} {k}", "folder", "ok", per_cell))
                search_ids[(c, k)] = int(cur.lastrowid)
                if native_terms and langs[k] != "en":
                    con.execute(
                        "INSERT INTO queries (concept, country, kind, language, text, native_term,"
                        " source) VALUES (?,?,?,?,?,?,?)",
                        (c, k, "native", langs[k], f"{c}~{langs[k]} query", f"{c}~{langs[k]}",
                         "test"))
            data = png(f"{c}|{k}|{i}")
            sha, _ = wd.store_image_bytes(data, "png")
            sid = search_ids[(c, k)]
            url = f"http://images.test/{k}/{c}/{i}.png"
            record_image(con, sha, "png", "PNG", 8, 8, len(data))
            con.execute("INSERT INTO search_results (search_id, rank, image_url, page_url, title,"
                        " raw_json) VALUES (?,?,?,?,?,?)",
                        (sid, i + 1, url, f"http://pages.test/{k}/{c}/{i}", f"{c} in {k} #{i}",
                         "{}"))
            status = status_fn(c, k, i) if status_fn else "ok"
            con.execute("INSERT INTO items (search_id, rank, concept, country, language,"
                        " query_text, url, sha256, status) VALUES (?,?,?,?,?,?,?,?,?)",
                        (sid, i + 1, c, k, langs[k], f"{c} {k}", url, sha, status))
            tags = tag_fn(c, k, i)
            if tags is not None:
                con.execute("INSERT OR REPLACE INTO tags (sha256, tags_json, status, model,"
                            " prompt_sha) VALUES (?,?,?,?,?)",
                            (sha, json.dumps(tags), "ok", "test-model", "0" * 64))
    return wd
