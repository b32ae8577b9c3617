"""One identity per text (issue 22): a concept folder named in NFD, as macOS writes "café",
is the same concept as the NFC "café" of the tables and of ``--concepts``."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from builder.catalog import Catalog
from builder.crawl.stage import CrawlConfig, crawl
from tests.builder.test_crawl import fetch_cfg
from tests.fakes.image_server import image_bytes

NFD, NFC = "cafe\u0301", "caf\u00e9"


def nfd_world(root: Path) -> Path:
    for i, k in enumerate(("THA", "JPN")):
        (root / NFD / k).mkdir(parents=True)
        (root / NFD / k / "a.png").write_bytes(image_bytes("PNG", seed=i + 1))
    (root / "tea" / "THA").mkdir(parents=True)
    (root / "tea" / "THA" / "a.png").write_bytes(image_bytes("PNG", seed=7))
    # the file system keeps the NFD name (as macOS writes it)
    assert sorted(p.name for p in root.iterdir()) == sorted([NFD, "tea"])
    return root


@pytest.mark.parametrize("concepts", ["all", NFC, NFD])
def test_an_nfd_concept_folder_is_one_nfc_concept(concepts, tmp_path):
    root = nfd_world(tmp_path / "photos")
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{root}", concepts=concepts, fetch=fetch_cfg()))
        names = sorted({r["concept"] for r in cat.query("SELECT concept FROM searches")})
        ok = cat.query("SELECT COUNT(*) AS n FROM downloads WHERE status='ok'")[0]["n"]
    want = [NFC, "tea"] if concepts == "all" else [NFC]
    assert names == want and all(unicodedata.is_normalized("NFC", n) for n in names)
    assert ok == (3 if concepts == "all" else 2)


def test_a_catalog_with_nfd_concepts_samples_every_anchor(tmp_path):
    """A work dir crawled from an NFD folder before names were normalised: its items say
    "café" in NFD, its query terms in NFC. `triplets sample` dropped 39 of 48 anchors as
    `no_native_term`; the pool reads every name as NFC, so each anchor finds its term."""
    from tests.worlds import build_world
    from triplets.sample_run import run_sample
    from triplets.sampling import SampleConfig

    wd = build_world(tmp_path / "w", [NFC, "tea", "rice"], per_cell=2)
    with Catalog.open(wd) as cat, cat.tx() as con:
        con.execute("UPDATE items SET concept=? WHERE concept=?", (NFD, NFC))
        con.execute("UPDATE tags SET tags_json=? WHERE tags_json=?",
                    (f'["{NFD}"]', f'["{NFC}"]'))
    res = run_sample(wd, SampleConfig(seed=1))
    assert res.counts["skipped_no_native_term"] == 0
    concepts = {t.query_concept for t in res.triplets}
    assert concepts == {NFC, "tea", "rice"}
    assert len({t.query_image_id for t in res.triplets}) == 3 * 16 * 2


def test_a_tagger_answer_in_nfd_is_a_valid_nfc_tag():
    from builder.tagging.rules import GroupAnswer, ImageTags, TagAnswer, judge

    ans = GroupAnswer(TagAnswer(images=[ImageTags(index=0, concepts=[NFD, " tea"])]), "{}")
    (v,) = judge(ans, 1, {NFC, "tea"}, final=True)
    assert (v.status, v.tags) == ("ok", [NFC, "tea"])
