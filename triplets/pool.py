"""The image pool the sampler draws from: one row per kept (concept, country, sha256) of a
work dir (``items.status`` ``ok`` or ``kept``, with an image row); an untagged image is never
a cultural or non-relevant candidate."""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from builder.catalog import Catalog
from builder.query_terms import catalog_terms, table_terms
from builder.statuses import USABLE_ITEMS, QueryStatus
from core import datatables
from core.text import normalize_term

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolImage:
    """One kept image of one concept and country, with its provenance and tags."""

    image_id: str
    item_id: int
    sha256: str
    concept: str
    country: str  # ISO 3166-1 alpha-3
    query_language: str  # BCP-47 of the query that found it
    search_query: str  # the search string that found it
    search_rank: int
    source_url: str
    page_url: str | None
    title: str | None
    width: int
    height: int
    ext: str
    tags: tuple[str, ...] | None  # None: no valid tags (untagged, failed, refused)

    @property
    def tagged(self) -> bool:
        return self.tags is not None


@dataclass
class Pool:
    """The kept images (sorted by image id) plus what was left out and why."""

    images: list[PoolImage]
    counts: Counter = field(default_factory=Counter)
    native_terms: dict[tuple[str, str], str] = field(default_factory=dict)
    # (concept, country) -> (source, reviewers) of the term in native_terms
    term_provenance: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)

    def term_source(self, concept: str, country: str, text: str) -> tuple[str, int]:
        """(source, reviewers) of ``text`` as the query of (concept, country): the term's own,
        ``concept label``, or ``unmatched`` (the term changed since sampling)."""
        if self.native_terms.get((concept, country)) == text:
            return self.term_provenance.get((concept, country), ("unmatched", 0))
        if not self.native_terms.get((concept, country)) and text == concept:
            return (CONCEPT_LABEL, 0)
        return ("unmatched", 0)

    def by_id(self) -> dict[str, PoolImage]:
        return {im.image_id: im for im in self.images}

    def by_item(self) -> dict[int, PoolImage]:
        return {im.item_id: im for im in self.images}


def slug(text: str) -> str:
    """ASCII slug of a concept name for image ids (``historical image`` -> ``historical_image``)."""
    norm = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "_", norm.lower()).strip("_") or "concept"


def make_image_id(country: str, concept: str, sha256: str) -> str:
    """``<country>-<concept slug>-<sha256[:12]>``: readable, stable, content-derived."""
    return f"{country.lower()}-{slug(concept)}-{sha256[:12]}"


_POOL_SQL = """
SELECT i.item_id, i.concept, i.country, i.language, i.search_query, i.url, i.sha256, i.rank,
       im.width, im.height, im.ext, sr.page_url, sr.title,
       t.status AS tag_status, t.tags_json
FROM items i
JOIN images im ON im.sha256 = i.sha256
LEFT JOIN search_results sr ON sr.search_id = i.search_id AND sr.rank = i.rank
LEFT JOIN tags t ON t.sha256 = i.sha256
WHERE i.status IN (?, ?) AND i.sha256 IS NOT NULL
"""


def parse_tags(status: str | None, tags_json: str | None) -> tuple[tuple[str, ...] | None, str]:
    """(tags or None, state) from a ``tags`` row; state is ``ok``/``untagged``/``failed``/``bad_json``."""
    if status is None:
        return None, "untagged"
    if status != "ok":
        return None, "failed"
    try:
        value = json.loads(tags_json or "")
    except json.JSONDecodeError:
        return None, "bad_json"
    if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
        return None, "bad_json"
    return tuple(normalize_term(x) for x in value), "ok"


def load_pool(cat: Catalog) -> Pool:
    """Read the kept images of ``cat`` into a :class:`Pool` (deterministic order)."""
    counts: Counter = Counter()
    codes = {c.code for c in datatables.countries()}
    best: dict[tuple[str, str, str], tuple] = {}
    for r in cat.query(_POOL_SQL, USABLE_ITEMS):
        counts["kept_items"] += 1
        country = r["country"]
        if country not in codes:
            try:
                country = datatables.country(country).code
            except datatables.TableError:
                counts["skipped_unknown_country"] += 1
                log.warning("item %s: unknown country %r, left out", r["item_id"], r["country"])
                continue
        key = (normalize_term(r["concept"]), country, r["sha256"])  # NFC: one identity
        rank_key = (int(r["rank"]), r["language"], r["search_query"], int(r["item_id"]))
        if key in best:
            counts["merged_occurrences"] += 1
            if rank_key >= best[key][0]:
                continue
        best[key] = (rank_key, r, country)
    counts["kept_without_image_row"] = _count_missing_image_rows(cat)

    images: list[PoolImage] = []
    for (concept, country, sha), (_, r, _c) in best.items():
        tags, state = parse_tags(r["tag_status"], r["tags_json"])
        counts[f"tags_{state}"] += 1
        images.append(
            PoolImage(
                image_id=make_image_id(country, concept, sha),
                item_id=int(r["item_id"]),
                sha256=sha,
                concept=concept,
                country=country,
                query_language=r["language"],
                search_query=normalize_term(r["search_query"]),
                search_rank=int(r["rank"]),
                source_url=r["url"],
                page_url=r["page_url"],
                title=r["title"],
                width=int(r["width"]),
                height=int(r["height"]),
                ext=r["ext"],
                tags=tags,
            )
        )
    images = _unique_ids(images)
    images.sort(key=lambda im: im.image_id)
    counts["images"] = len(images)
    terms = load_terms(cat)
    return Pool(images=images, counts=counts,
                native_terms={k: text for k, (text, _, _) in terms.items()},
                term_provenance={k: (src, n) for k, (_, src, n) in terms.items()})


def _count_missing_image_rows(cat: Catalog) -> int:
    row = cat.query(
        "SELECT COUNT(*) AS n FROM items i LEFT JOIN images im ON im.sha256 = i.sha256"
        " WHERE i.status IN (?, ?) AND i.sha256 IS NOT NULL AND im.sha256 IS NULL", USABLE_ITEMS
    )
    return int(row[0]["n"])


def _unique_ids(images: list[PoolImage]) -> list[PoolImage]:
    """Give colliding ids (equal slug and sha prefix) the full sha and the item id."""
    seen = Counter(im.image_id for im in images)
    out = []
    for im in images:
        if seen[im.image_id] > 1:
            new_id = f"{im.country.lower()}-{slug(im.concept)}-{im.sha256}-{im.item_id}"
            im = PoolImage(**{**im.__dict__, "image_id": new_id})
        out.append(im)
    return out


CONCEPT_LABEL = "concept label"  # an English-speaking country's query without a term


def load_terms(cat: Catalog) -> dict[tuple[str, str], tuple[str, str, int]]:
    """(concept, country) -> (its text query, source, reviewers): the catalog's ``query_terms``,
    else the ``native_term`` of its ``queries`` rows, else the country's row of
    ``data/queries.csv``; never another country's term."""
    out = {(normalize_term(k[0]), k[1]): (normalize_term(t.native_term), t.source,
                                          int(t.reviewers))
           for k, t in catalog_terms(cat).items() if t.native_term}
    for r in cat.query(
        "SELECT concept, country, native_term FROM queries WHERE kind='native' AND status=?"
        " AND native_term IS NOT NULL AND native_term != ''", (QueryStatus.OK,)
    ):
        out.setdefault((normalize_term(r["concept"]), r["country"]),
                       (normalize_term(r["native_term"]), "generated", 0))
    for key, term in table_terms().items():
        out.setdefault(key, (term.native_term, term.source, int(term.reviewers)))
    return out


def native_term(pool: Pool, concept: str, country: str) -> str | None:
    """The query text of (concept, country): its term, else (English countries) the label."""
    term = pool.native_terms.get((concept, country))
    if term:
        return term
    if datatables.country(country).language == "en":
        return concept
    return None
