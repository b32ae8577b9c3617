"""A small synthetic catalog for the annotation tests, laid out with ``tests.worlds.World``
(the catalog's own writers).

Dedup groups (concept ``food``), each image a generated PNG stored content-addressed:

* group 1 (needs_review): images A (two items: USA and THA), B, C waiting for review (the
  representatives, status ``needs_review``) and M, a near duplicate of A already decided by
  ``image_dedup`` (not shown); kept item A
* group 2 (needs_review): D, E; kept item D
* group 3 (needs_review): F, G; kept item F
* group 4 (needs_review): H, I; kept item H
* group 5 (auto): J kept, K near duplicate (not pushed by default)
* group 6 (needs_review): one image twice (L in USA and THA): nothing to compare, not pushed

Tags: T1 [food, market], T2 [temple], T3 [dance, food] (status ok), T4 failed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image

from builder.catalog import Catalog
from builder.concepts import add_concept, add_instances
from builder.image_dedup import add_dedup_group
from builder.published_terms import PublishedTerm, add_published_terms
from builder.query_terms import upsert_terms
from builder.statuses import ConceptStatus
from core.query_table import QueryTerm
from tests.worlds import open_world

CONCEPTS = ["dance", "food", "market", "temple"]
GROUPS = {1: "ABCM", 2: "DE", 3: "FG", 4: "HI", 5: "JK", 6: "L"}
STATUS = {"M": "near_duplicate", "J": "kept", "K": "near_duplicate"}
TAGS = {"T1": ["food", "market"], "T2": ["temple"], "T3": ["dance", "food"]}


def png(seed: int) -> bytes:
    """A distinct 64x48 PNG per seed (Label Studio 1.23 fails to show 16x16 images of a task
    with a prediction: "There was an issue loading URL")."""
    img = Image.new("RGB", (64, 48), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256))
    img.putpixel((seed % 16, seed // 16 % 16), (255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def build(root: Path) -> tuple[Catalog, dict[str, str], dict[str, list[int]]]:
    """Return the open catalog, ``{letter: sha256}`` and ``{letter: [item ids]}``."""
    sha: dict[str, str] = {}
    items: dict[str, list[int]] = {}
    with open_world(root) as w:
        for name in CONCEPTS:
            w.concept(name)
        search = {country: w.search("food", country, lang, "food")
                  for country, lang in (("USA", "en"), ("THA", "th"))}
        rank = 0
        for gid, letters in GROUPS.items():
            for letter in letters:
                sha[letter] = w.image(png(ord(letter)), 64, 48, nbytes=100)
                for country in ("USA", "THA") if letter in "AL" else ("USA",):
                    rank += 1
                    items.setdefault(letter, []).append(w.item(
                        search[country], rank, f"http://example.com/{letter}{rank}.png",
                        sha[letter], status=STATUS.get(letter, "needs_review"), group_id=gid,
                        language="en"))
            w.group(gid, "food", "auto" if gid == 5 else "needs_review", items[letters[0]][0])
        for i, (name, tags) in enumerate(list(TAGS.items()) + [("T4", None)]):
            sha[name] = w.image(png(200 + i), 64, 48, nbytes=100)
            w.tag(sha[name], tags, status="ok" if tags else "failed", model="gemini-test")
    return Catalog(w.wd), sha, items


def copy_group(con, group_id: int, new_id: int) -> None:
    """Dedup group ``new_id`` like group ``group_id`` (what a rerun of image_dedup that
    renumbers a group writes; its items still name the old number)."""
    g = con.execute("SELECT * FROM dedup_groups WHERE group_id=?", (group_id,)).fetchone()
    add_dedup_group(con, g["concept"], g["status"], json.loads(g["evidence_json"]),
                    kept_item_id=g["kept_item_id"], group_id=new_id)


def snapshot(cat: Catalog) -> dict[str, list[tuple]]:
    """The rows of the tables a pull may change."""
    return {t: [tuple(r) for r in cat.query(f"SELECT * FROM {t} ORDER BY 1")]
            for t in ("items", "dedup_groups", "reviews", "ls_tasks", "ls_projects")}


# (concept, country, locale, native_term, english_term, source): the query terms of
# build_terms; "market" in PRT is reviewed already (not pushed again by default).
TERMS = [
    ("food", "USA", "en-US", "food", "food", "generated"),
    ("food", "THA", "th-TH", "อาหาร", "food", "generated"),
    ("train", "PRT", "pt-PT", "trem", "train", "generated"),
    ("bus", "PRT", "pt-PT", "ônibus", "bus", "generated"),
    ("market", "PRT", "pt-PT", "mercado", "market", "reviewed"),
    ("train", "BRA", "pt-BR", "trem", "train", "generated"),
]


def build_terms(cat: Catalog) -> None:
    """Add query terms, concept instances and an imported authors' term to a synth catalog."""
    with cat.tx() as con:
        for concept in ("train", "bus"):
            add_concept(con, concept, "curated", ConceptStatus.KEPT)
        upsert_terms(con, [
            QueryTerm(concept, country, locale, locale.split("-")[0], term, english, source,
                      2 if source == "reviewed" else 0,
                      "2026-01-01T00:00:00Z" if source == "reviewed" else "",
                      "generated by the queries stage" if concept == "train" else "")
            for concept, country, locale, term, english, source in TERMS], None)
        add_instances(con, "train", 1, {"PRT": "Alfa Pendular", "JPN": "Shinkansen bullet train",
                                        "DEU": "ICE high-speed train"})
        add_published_terms(con, "authors/3xcm", [PublishedTerm("train", "PRT", "comboio", 5)])
