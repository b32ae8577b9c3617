"""The sampler on synthetic catalogs: rules, planted tags, determinism, balance, statuses."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from builder.catalog import Catalog
from builder.query_terms import upsert_terms
from core import datatables, query_table
from tests.worlds import build_world
from triplets import cli
from triplets.pool import load_pool
from triplets.rules import check_triplets
from triplets.sample_run import pool_image_infos, run_sample
from triplets.sampling import SampleConfig, sample_triplets

CONCEPTS = ["train", "school", "taxi", "craft", "food", "dance"]
LANG = {c.code: c.language for c in datatables.countries()}


def _pool(wd):
    with Catalog.open(wd) as cat:
        return load_pool(cat)


def test_every_rule_holds_and_every_kept_image_anchors(tmp_path):
    wd = build_world(tmp_path / "w", CONCEPTS, per_cell=2)
    res = run_sample(wd, SampleConfig(seed=3, per_image=2))
    pool = _pool(wd)
    assert len(pool.images) == 6 * 16 * 2
    assert res.counts["triplets"] == 2 * len(pool.images)
    anchors = Counter(t.query_image_id for t in res.triplets)
    assert set(anchors.values()) == {2} and len(anchors) == len(pool.images)
    rows = [t.release_row() for t in res.triplets]
    assert check_triplets(rows, pool_image_infos(pool), tags_known=True,
                          distinct_language=True, seed=3) == []
    by_id = pool.by_id()
    for t in res.triplets:
        q, s = by_id[t.query_image_id], by_id[t.semantic_image_id]
        c, n = by_id[t.cultural_image_id], by_id[t.non_relevant_image_id]
        assert (q.concept, q.country) == (t.query_concept, t.query_country)
        assert s.concept == q.concept and LANG[s.country] != LANG[q.country]
        assert c.country == q.country and c.concept != q.concept
        assert n.country != q.country and n.concept != q.concept
        assert t.query_language == LANG[q.country]
        if LANG[q.country] == "en":  # no catalog term: the country's row of data/queries.csv
            expected = query_table.query_terms()[(q.concept, q.country)].native_term
        else:
            expected = f"{q.concept}~{LANG[q.country]}"
        assert t.query_text == expected
    # the two rounds of one anchor use different candidates where the pool allows
    per_anchor: dict[str, set] = {}
    for t in res.triplets:
        per_anchor.setdefault(t.query_image_id, set()).add(t.cultural_image_id)
    assert all(len(v) == 2 for v in per_anchor.values())


def test_planted_tags_never_give_a_cultural_or_non_relevant_candidate(tmp_path):
    """Half the images also show 'food' and every 'dance' image shows 'school'."""

    def tags(c, k, i):
        extra = ["food"] if (i == 0 and c != "food") else []
        extra += ["school"] if c == "dance" else []
        return [c, *extra]

    wd = build_world(tmp_path / "w", CONCEPTS, per_cell=2, tag_fn=tags)
    res = run_sample(wd, SampleConfig(seed=11))
    by_id = _pool(wd).by_id()
    food = [t for t in res.triplets if t.query_concept == "food"]
    school = [t for t in res.triplets if t.query_concept == "school"]
    assert len(food) == 32 and len(school) == 32
    for t in res.triplets:
        for role in ("cultural", "non_relevant"):
            assert t.query_concept not in by_id[getattr(t, f"{role}_image_id")].tags
    # for 'school' queries no 'dance' image can be cultural or non-relevant
    assert not {by_id[t.cultural_image_id].concept for t in school} & {"dance"}
    assert not {by_id[t.non_relevant_image_id].concept for t in school} & {"dance"}
    # for 'food' queries only the i=1 images of other concepts qualify
    for t in food:
        assert by_id[t.cultural_image_id].tags == (by_id[t.cultural_image_id].concept,) or \
            "school" in by_id[t.cultural_image_id].tags


def test_untagged_images_anchor_but_are_never_cultural_or_non_relevant(tmp_path):
    untagged = {("taxi", "JPN", 0), ("craft", "BRA", 1), ("food", "USA", 0)}
    wd = build_world(tmp_path / "w", CONCEPTS, per_cell=2,
                     tag_fn=lambda c, k, i: None if (c, k, i) in untagged else [c])
    res = run_sample(wd, SampleConfig(seed=5))
    pool = _pool(wd)
    assert pool.counts["tags_untagged"] == 3
    ids = {im.image_id for im in pool.images if im.tags is None}
    assert len(ids) == 3
    anchors = {t.query_image_id for t in res.triplets}
    assert ids <= anchors
    for t in res.triplets:
        assert t.cultural_image_id not in ids and t.non_relevant_image_id not in ids
    with Catalog.open(wd) as cat:
        run = cat.last_run("triplets")
    assert "untagged images (never cultural/non-relevant): 3" in run["summary"]
    assert json.loads(run["counts_json"])["counts"]["tags_untagged"] == 3


def test_same_seed_same_bytes_whatever_the_insertion_order(tmp_path):
    a = build_world(tmp_path / "a", CONCEPTS, per_cell=2)
    b = build_world(tmp_path / "b", CONCEPTS, per_cell=2, shuffle_seed=99)
    run_sample(a, SampleConfig(seed=42))
    run_sample(b, SampleConfig(seed=42))
    first = (a.exports_dir / "triplets.csv").read_bytes()
    assert first == (b.exports_dir / "triplets.csv").read_bytes()
    run_sample(a, SampleConfig(seed=42))  # re-run in place: same bytes, table replaced
    assert (a.exports_dir / "triplets.csv").read_bytes() == first
    with Catalog.open(a) as cat:
        assert cat.query("SELECT COUNT(*) FROM triplets")[0][0] == 192
        assert {r[0] for r in cat.query("SELECT DISTINCT seed FROM triplets")} == {42}
    run_sample(a, SampleConfig(seed=43))
    assert (a.exports_dir / "triplets.csv").read_bytes() != first


def test_balance_no_reuse_and_even_spread(tmp_path):
    wd = build_world(tmp_path / "w", CONCEPTS, per_cell=3)
    res = run_sample(wd, SampleConfig(seed=1))
    n = 6 * 16 * 3
    assert res.counts["triplets"] == n
    sem, cul, non = (res.balance[r] for r in ("semantic", "cultural", "non_relevant"))
    # Least-recently-used draws plus the repair pass: an image serves a role twice only when
    # no unused image is eligible for either of its triplets (at most a couple here).
    for st in (sem, cul, non):
        assert st["max_uses_per_image"] <= 2
        assert st["distinct_images"] >= n - 2
    two = run_sample(wd, SampleConfig(seed=1, per_image=2))
    for st in two.balance.values():  # two rounds: every image used, none more than 3 times
        assert st["distinct_images"] == n and st["max_uses_per_image"] <= 3
    # spread: every country gets n/16 candidates per role (+-1), every concept n/6 (+-3)
    for st in (sem, cul, non):
        assert set(st["by_country"]) == {c.code for c in datatables.countries()}
        assert max(st["by_country"].values()) - min(st["by_country"].values()) <= 2
        assert max(st["by_concept"].values()) - min(st["by_concept"].values()) <= 6
    assert sum(non["by_country"].values()) == n


def test_distinct_language_switch_and_record(tmp_path):
    wd = build_world(tmp_path / "w", ["train", "taxi"], per_cell=4)
    res_off = run_sample(wd, SampleConfig(seed=2, distinct_language=False))
    same = [t for t in res_off.triplets if LANG[t.semantic_country] == LANG[t.query_country]]
    assert same, "without the switch, same-language semantic candidates occur"
    with Catalog.open(wd) as cat:
        assert json.loads(cat.last_run("triplets")["params_json"])["distinct_language"] is False
    res_on = run_sample(wd, SampleConfig(seed=2))
    assert all(LANG[t.semantic_country] != LANG[t.query_country] for t in res_on.triplets)


def test_kept_rule_and_skip_reasons(tmp_path):
    statuses = {("train", "USA", 0): "needs_review", ("train", "USA", 1): "kept",
                ("taxi", "JPN", 0): "removed", ("taxi", "JPN", 1): "near_duplicate"}
    wd = build_world(tmp_path / "w", ["train", "taxi", "craft"], per_cell=2,
                     status_fn=lambda c, k, i: statuses.get((c, k, i), "ok"))
    with Catalog.open(wd) as cat:  # a concept found in one country only: no semantic candidate
        con = cat.con
        con.execute("UPDATE items SET status='removed' WHERE concept='craft' AND country!='THA'")
    pool = _pool(wd)
    ids = {(im.concept, im.country) for im in pool.images}
    assert ("train", "USA") in ids and ("taxi", "JPN") not in ids
    assert len(pool.images) == 3 * 16 * 2 - 3 - 15 * 2  # 'kept' stays, 3 others and craft go
    res = sample_triplets(pool, SampleConfig(seed=4))
    assert res.counts["skipped_no_semantic"] == 2  # the two THA craft images
    assert res.counts["skipped_no_cultural"] == 2  # JPN train: JPN has no other concept left
    assert res.counts["triplets"] == len(pool.images) - 4


def test_no_native_term_is_counted_not_guessed(tmp_path):
    wd = build_world(tmp_path / "w", ["train", "taxi"], per_cell=1, native_terms=False)
    pool = _pool(wd)
    pool.native_terms = {}  # no term anywhere: only English-language countries can query
    res = sample_triplets(pool, SampleConfig(seed=0))
    assert {t.query_country for t in res.triplets} == {"USA", "GBR", "AUS"}
    assert res.counts["triplets"] == 6
    assert res.counts["skipped_no_native_term"] == 2 * 13
    assert {t.query_text for t in res.triplets} == {"train", "taxi"}


def test_query_text_is_the_query_countrys_own_term(tmp_path):
    """Countries sharing a language keep their own term: PRT comboio, BRA trem, ARG colectivo;
    a term in the catalog's query_terms (e.g. a reviewed one) wins over data/queries.csv."""
    wd = build_world(tmp_path / "w", ["train", "bus", "craft"], per_cell=1, native_terms=False)
    with Catalog.open(wd) as cat, cat.tx() as con:
        upsert_terms(con, [query_table.QueryTerm(
            "craft", "ESP", "es-ES", "es", "artesanía española", "handicraft", "reviewed", 2,
            "2026-12-01T10:00:00")], None)
    res = run_sample(wd, SampleConfig(seed=1))
    text = {(t.query_concept, t.query_country): t.query_text for t in res.triplets}
    assert (text[("train", "PRT")], text[("train", "BRA")]) == ("comboio", "trem")
    assert (text[("bus", "PRT")], text[("bus", "BRA")]) == ("autocarro", "ônibus")
    assert (text[("bus", "ARG")], text[("bus", "ESP")]) == ("colectivo", "autobús")
    assert (text[("train", "USA")], text[("craft", "GBR")]) == ("train", "handicraft")
    assert text[("craft", "ESP")] == "artesanía española"
    assert text[("craft", "ARG")] == "artesanía"
    with (wd.exports_dir / "triplets.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    locale = {(r["query_concept"], r["query_country"]): r["query_locale"] for r in rows}
    assert (locale[("train", "PRT")], locale[("train", "BRA")]) == ("pt-PT", "pt-BR")
    assert {r["query_locale"] for r in rows} == {c.locale for c in datatables.countries()}


def test_an_old_format_query_table_is_one_line_not_a_silent_fallback(tmp_path, monkeypatch,
                                                                     capsys):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(datatables.data_dir(), data)
    (data / "queries.csv").write_text(
        "concept,country,language,english_query,native_query,native_term,source,reviewed\n"
        "train,PRT,pt,train Portugal,trem Portugal,trem,generated,false\n", encoding="utf-8")
    monkeypatch.setenv("XCM_DATA_DIR", str(data))
    wd = build_world(tmp_path / "w", ["train", "taxi"], per_cell=1, native_terms=False)
    assert cli.main(["sample", "--workdir", str(wd.root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a query table (missing columns" in err[0]


def test_cli_sample_prints_summary(tmp_path, capsys):
    wd = build_world(tmp_path / "w", ["train", "taxi", "craft"], per_cell=1)
    assert cli.main(["sample", "--workdir", str(wd.root), "--seed", "9"]) == 0
    out = capsys.readouterr().out
    assert "triplets: 48 from 48 kept images x 1 (seed 9, distinct language on)" in out
    assert cli.main(["sample", "--workdir", str(wd.root), "--seed", "9", "--per-image", "0"]) == 2
    # as a stage of `python -m pipeline run`: no command means sample, seed 0 by default
    import triplets

    assert triplets.main(["--workdir", str(wd.root)]) == 0
    assert "(seed 0, distinct language on)" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [0, 1])
def test_sampled_triplets_validate_from_the_workdir(tmp_path, seed, capsys):
    wd = build_world(tmp_path / "w", ["train", "taxi", "craft"], per_cell=2)
    run_sample(wd, SampleConfig(seed=seed))
    assert cli.main(["validate", "--workdir", str(wd.root)]) == 0
    assert "96 triplets: every rule holds" in capsys.readouterr().out
