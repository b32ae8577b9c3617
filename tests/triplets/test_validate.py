"""The validator: planted violations in the authors' file and in a work dir, exactly reported."""

from __future__ import annotations

import csv

from builder.catalog import Catalog
from core import datatables
from tests.worlds import build_world
from triplets import cli
from triplets.sample_run import run_sample
from triplets.sampling import SampleConfig

AUTHORS = datatables.data_path("authors/xcm-bench.csv")  # copied into data/ with its source


def _reported(out: str) -> dict[str, set[str]]:
    """row id -> rules, from the validator's tab-separated violation lines."""
    rows: dict[str, set[str]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            rows.setdefault(parts[0], set()).add(parts[1])
    return rows


def test_authors_file_is_clean_and_counted(capsys):
    assert cli.main(["validate", "--authors-csv", str(AUTHORS)]) == 0
    out = capsys.readouterr().out
    assert "11723 triplets, 16 countries, 137 concepts" in out
    assert "  USA      609" in out and "  JPN      943" in out
    assert "11723 triplets: every rule holds" in out


def test_planted_violations_in_a_copy_of_the_authors_file(tmp_path, capsys):
    with AUTHORS.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    planted = {}
    r = rows[10]  # semantic from the query country
    r["semantically_relevant_candidate_country"] = r["query_country"]
    planted[r["query_index"]] = {"semantic_same_country", "image_id_country"}
    r = rows[500]  # cultural of the query concept
    r["culturally_relevant_candidate_concept"] = r["query_concept"]
    planted[r["query_index"]] = {"cultural_same_concept", "image_id_concept"}
    r = rows[5000]  # non-relevant from the query country
    r["non_relevant_candidate_country"] = r["query_country"]
    planted[r["query_index"]] = {"non_relevant_same_country", "image_id_country"}
    r = rows[11000]  # a candidate index naming another row's image
    r["semantically_relevant_candidate_index"] = rows[0]["query_index"]
    planted[r["query_index"]] = {"candidate_index_mismatch"}
    copy = tmp_path / "xcm-bench-planted.csv"
    with copy.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    assert cli.main(["validate", "--authors-csv", str(copy)]) == 1
    out = capsys.readouterr().out
    assert _reported(out) == planted
    assert "7 violation(s)" in out


def test_bad_input_is_exit_2(tmp_path, capsys):
    assert cli.main(["validate", "--authors-csv", str(tmp_path / "nope.csv")]) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert cli.main(["validate", "--authors-csv", str(bad)]) == 2
    assert "not the authors' triplet format" in capsys.readouterr().err
    assert cli.main(["validate", "--release", str(tmp_path)]) == 2


def test_planted_violations_in_a_workdir(tmp_path, capsys):
    wd = build_world(tmp_path / "w", ["train", "taxi", "craft", "food"], per_cell=2)
    res = run_sample(wd, SampleConfig(seed=8))
    t0, t1, t2 = res.triplets[0], res.triplets[1], res.triplets[2]
    with Catalog.open(wd) as cat:
        con = cat.con
        # t0: the cultural candidate becomes an image of the query concept (and country)
        other = con.execute(
            "SELECT item_id FROM items WHERE concept=? AND country=? AND item_id != ?",
            (t0.query_concept, t0.query_country, t0.query_item_id)).fetchone()[0]
        con.execute("UPDATE triplets SET cultural_item_id=? WHERE triplet_id=?",
                    (other, t0.triplet_id))
        # t1: the non-relevant item no longer exists in the pool
        con.execute("UPDATE triplets SET non_relevant_item_id=999999 WHERE triplet_id=?",
                    (t1.triplet_id,))
        # t2's cultural image loses its tags: every triplet using it as a candidate breaks
        sha = con.execute("SELECT sha256 FROM items WHERE item_id=?",
                          (t2.cultural_item_id,)).fetchone()[0]
        con.execute("DELETE FROM tags WHERE sha256=?", (sha,))
    users = {t.triplet_id for t in res.triplets
             if t.cultural_item_id == t2.cultural_item_id
             or t.non_relevant_item_id == t2.cultural_item_id}
    assert cli.main(["validate", "--workdir", str(wd.root)]) == 1
    got = _reported(capsys.readouterr().out)
    assert got[t0.triplet_id] == {"cultural_same_concept", "cultural_tagged_with_query_concept"}
    assert got[t1.triplet_id] == {"unknown_non_relevant_image_id"}
    assert set(got) == {t0.triplet_id, t1.triplet_id} | users
    for tid in users - {t0.triplet_id, t1.triplet_id}:
        assert got[tid] <= {"cultural_untagged", "non_relevant_untagged"}


def test_empty_workdir_has_nothing_to_validate(tmp_path, capsys):
    wd = build_world(tmp_path / "w", ["train"], per_cell=1)
    assert cli.main(["validate", "--workdir", str(wd.root)]) == 0
    assert "0 triplets: every rule holds" in capsys.readouterr().out
