"""A small synthetic catalog for the annotation tests, built with the Catalog API.

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

from benchmark.query_table import QueryTerm
from builder.catalog import Catalog, utcnow
from builder.concepts import add_concept
from builder.download_records import record_image
from builder.query_terms import upsert_terms
from builder.statuses import ConceptStatus
from builder.workdir import WorkDir

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
    wd = WorkDir.open(root)
    cat = Catalog(wd)
    sha: dict[str, str] = {}
    items: dict[str, list[int]] = {}
    with cat.tx() as con:
        for name in CONCEPTS:
            add_concept(con, name, "curated", ConceptStatus.KEPT)
        search = {}
        for country, lang in (("USA", "en"), ("THA", "th")):
            cur = con.execute(
                "INSERT INTO searches (concept, country, language, kind, query_text, backend,"
                " status) VALUES ('food', ?, ?, 'native', 'food', 'folder', 'ok')", (country, lang))
            search[country] = cur.lastrowid
        rank = 0
        for gid, letters in GROUPS.items():
            status = "auto" if gid == 5 else "needs_review"
            con.execute("INSERT INTO dedup_groups (group_id, concept, status, evidence_json)"
                        " VALUES (?, 'food', ?, '{}')", (gid, status))
            for letter in letters:
                s, _ = wd.store_image_bytes(png(ord(letter)), "png")
                sha[letter] = s
                record_image(con, s, "png", "PNG", 64, 48, 100)
                countries = ("USA", "THA") if letter in "AL" else ("USA",)
                for country in countries:
                    rank += 1
                    cur = con.execute(
                        "INSERT INTO items (search_id, rank, concept, country, language,"
                        " query_text, url, sha256, status, group_id) VALUES (?, ?, 'food', ?,"
                        " 'en', 'food', ?, ?, ?, ?)",
                        (search[country], rank, country, f"http://example.com/{letter}{rank}.png",
                         s, STATUS.get(letter, "needs_review"), gid))
                    items.setdefault(letter, []).append(int(cur.lastrowid))
            con.execute("UPDATE dedup_groups SET kept_item_id=? WHERE group_id=?",
                        (items[letters[0]][0], gid))
        for i, (name, tags) in enumerate(list(TAGS.items()) + [("T4", None)]):
            s, _ = wd.store_image_bytes(png(200 + i), "png")
            sha[name] = s
            record_image(con, s, "png", "PNG", 64, 48, 100)
            con.execute("INSERT INTO tags (sha256, tags_json, status, model) VALUES (?, ?, ?, ?)",
                        (s, json.dumps(tags) if tags else None, "ok" if tags else "failed",
                         "gemini-test"))
    return cat, sha, items


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
        con.executemany(
            "INSERT INTO concept_instances (concept, country, round, instance) VALUES (?,?,?,?)",
            [("train", "PRT", 1, "Alfa Pendular"), ("train", "JPN", 1, "Shinkansen bullet train"),
             ("train", "DEU", 1, "ICE high-speed train")])
        con.execute("INSERT INTO published_terms (dataset, concept, country, term, n_images,"
                    " imported_at) VALUES ('authors/3xcm', 'train', 'PRT', 'comboio', 5, ?)",
                    (utcnow(),))
