"""The authors' published 3XCM layout, read from generated miniatures of it.

The same images and triplets, given as (a) a folder in the hub's layout (configs
``image_metadata`` + ``benchmark``, loaded through ``datasets.load_dataset`` offline, as a hub
id is), (b) a plain folder of ``image_metadata`` parquet files with the triplets as
``--triplets-csv``, and (c) the authors' CSV with a folder of ``<image_id>.png`` and the same
query terms as a CSV, must give the same scores.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmark.cli import main
from core import datatables
from tests.benchmark.published import VARIANT, all_layouts, write_published_3xcm


def run(tmp: Path, name: str, *args: str, task: str = "3xcm") -> dict:
    out = tmp / f"out-{name}"
    rc = main(["run", "--model", "hash", "--task", task, *args, "--output-dir", str(out),
               "--cache-dir", str(tmp / f"cache-{name}"), "-q", "--bootstrap", "50",
               "--save-per-triplet"])
    assert rc == 0
    return json.loads((out / "hash" / f"{task}.json").read_text())


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return all_layouts(tmp_path_factory.mktemp("published"), 40, seed=3)


def test_miniature_is_the_hub_layout(mini):
    hub, *_ = mini
    meta = pq.read_table(next((hub / "image_metadata").glob("*.parquet")))
    assert meta.column_names == ["image", "image_id", "concept_id", "concept",
                                 "concept_in_native", "concept_country", "country", "title"]
    bench = pq.read_table(next((hub / "benchmark").glob("*.parquet"))).to_pandas()
    authors = pd.read_csv(datatables.data_path("authors/xcm-bench.csv"), dtype=str)
    assert list(bench.columns) == list(authors.columns) and len(bench) == 40
    # rows and ids are the authors' own
    assert set(bench["query_image_id"]) <= set(authors["query_image_id"])
    ids = set(meta.column("image_id").to_pylist())
    for c in ("query_image_id", "semantically_relevant_candidate_image_id"):
        assert set(bench[c]) <= ids
    # native terms in their own scripts
    terms = dict(zip(meta.column("country").to_pylist(),
                     meta.column("concept_in_native").to_pylist(), strict=False))
    if "Thailand" in terms:
        assert any("\u0e00" <= ch <= "\u0e7f" for ch in terms["Thailand"])
    if "Japan" in terms:
        assert any(ord(ch) > 0x3000 for ch in terms["Japan"])


def test_three_layouts_give_the_same_scores(mini, tmp_path):
    hub, plain, csv, images, queries = mini
    for task in ("3xcm", "3xcm-i2i"):
        a = run(tmp_path, f"hub-{task}", "--dataset", str(hub), task=task)
        b = run(tmp_path, f"plain-{task}", "--dataset", str(plain), "--triplets-csv", str(csv),
                task=task)
        c = run(tmp_path, f"folder-{task}", "--triplets-csv", str(csv), "--images", str(images),
                "--query-source", str(queries), task=task)
        assert a["task"]["n"] == b["task"]["n"] == c["task"]["n"] == 40
        assert a["scores"] == b["scores"] == c["scores"]
        assert a["task"]["data_fingerprint"] == b["task"]["data_fingerprint"] \
            == c["task"]["data_fingerprint"]
        assert [r["task"]["source_format"] for r in (a, b, c)] == ["published", "published",
                                                                    "authors-csv"]
        assert [r["task"]["query_texts"]["source"] for r in (a, b, c)] == ["published",
                                                                           "published", "file"]
    assert a["task"]["notes"]["triplets_source"].endswith("config benchmark")
    assert b["task"]["notes"]["triplets_source"] == str(csv)


def test_query_text_is_the_query_images_concept_in_native(mini, tmp_path):
    hub, *_ = mini
    res = run(tmp_path, "texts", "--dataset", str(hub))
    per = pd.read_parquet(tmp_path / "out-texts" / "hash" / "3xcm.per_triplet.parquet")
    meta = pq.read_table(next((hub / "image_metadata").glob("*.parquet"))).to_pandas()
    bench = pq.read_table(next((hub / "benchmark").glob("*.parquet"))).to_pandas()
    term = dict(zip(meta["image_id"], meta["concept_in_native"], strict=True))
    want = [term[i] for i in bench["query_image_id"]]
    assert per["query_text"].tolist() == want
    qt = res["task"]["query_texts"]
    assert qt["source"] == "published" and qt["origin"] == str(hub)
    assert sum(qt["used_source_mix"].values()) == qt["used_terms"] > 0
    assert set(qt["used_source_mix"]) <= {"authors", "reviewed"}
    assert set(qt["reviewed_share_by_country"]) == set(per["query_country"])
    # the table instead of the published terms: recorded as such
    res2 = run(tmp_path, "table", "--dataset", str(hub), "--query-source", "table")
    assert res2["task"]["query_texts"]["source"] == "table"
    assert res2["task"]["query_texts"]["origin"] == "data/queries.csv"
    assert len(res2["task"]["query_texts"]["sha256"]) == 64


def test_each_triplet_embeds_its_own_query_images_term(tmp_path):
    """Images of one (concept, country) with different concept_in_native: by default each
    triplet uses its own query image's term (the authors' evaluator reads it at the query
    image's index); --query-term majority gives the pair's most frequent; both record how
    many triplets' text differs (exactly the 3 query images given a term of their own)."""
    hub = write_published_3xcm(tmp_path / "hub", n_triplets=30, seed=5, own_terms=3)
    meta = pq.read_table(next((hub / "image_metadata").glob("*.parquet"))).to_pandas()
    bench = pq.read_table(next((hub / "benchmark").glob("*.parquet"))).to_pandas()
    term = dict(zip(meta["image_id"], meta["concept_in_native"], strict=True))
    own = [term[i] for i in bench["query_image_id"]]
    assert sum(t.endswith(VARIANT) for t in own) == 3
    res = run(tmp_path, "own", "--dataset", str(hub))
    per = pd.read_parquet(tmp_path / "out-own" / "hash" / "3xcm.per_triplet.parquet")
    assert per["query_text"].tolist() == own
    qt = res["task"]["query_texts"]
    assert qt["query_term"] == "own" and qt["triplets_own_term_not_majority"] == 3
    assert qt["pairs_with_several_terms"] == 3
    # every text scored is a term: the 3 variants are 3 terms of their own, none reviewed
    assert qt["used_terms"] == len(set(zip(bench["query_concept"], bench["query_country"],
                                           own, strict=True)))
    assert sum(qt["used_source_mix"].values()) == qt["used_terms"]
    assert qt["used_source_mix"].get("authors", 0) >= 3
    maj = run(tmp_path, "maj", "--dataset", str(hub), "--query-term", "majority")
    per_m = pd.read_parquet(tmp_path / "out-maj" / "hash" / "3xcm.per_triplet.parquet")
    want = [t.removesuffix(VARIANT) for t in own]
    assert per_m["query_text"].tolist() == want
    assert maj["task"]["query_texts"]["query_term"] == "majority"
    assert maj["task"]["query_texts"]["triplets_own_term_not_majority"] == 3
    assert maj["task"]["data_fingerprint"] != res["task"]["data_fingerprint"]


def test_without_benchmark_config_the_shipped_triplets_are_used(tmp_path, capsys):
    hub = write_published_3xcm(tmp_path / "nobench", n_triplets=12, benchmark_config=False,
                               seed=1)
    assert not (hub / "benchmark").exists()
    # the shipped file names ~11,700 images the miniature does not have: one line naming them
    rc = main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(hub),
               "--output-dir", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error:")
    assert "data/authors/xcm-bench.csv not found in" in err[-1] and "first:" in err[-1]
    assert "image_metadata" in err[-1]


def test_a_folder_in_no_3xcm_layout_is_one_line(tmp_path, capsys):
    d = tmp_path / "other"
    d.mkdir()
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(d / "train-00000.parquet")
    rc = main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(d), "--output-dir",
               str(tmp_path / "o"), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "not a 3XCM layout" in err[0]


def test_query_source_choices_are_checked(mini, tmp_path, capsys):
    hub, plain, csv, images, queries = mini
    base = ["run", "--model", "hash", "--task", "3xcm", "--output-dir", str(tmp_path / "o"),
            "--cache-dir", str(tmp_path / "c")]
    assert main([*base, "--triplets-csv", str(csv), "--images", str(images),
                 "--query-source", "published"]) == 2
    assert "not in the published layout" in capsys.readouterr().err
    assert main([*base, "--dataset", str(hub), "--query-source", "nonsense"]) == 2
    assert "none of auto" in capsys.readouterr().err
    assert main([*base, "--dataset", str(hub), "--triplets-csv", str(csv), "--images",
                 str(images)]) == 2
    assert "not both" in capsys.readouterr().err
    a = run(tmp_path, "qs", "--dataset", str(hub), "--query-source", str(queries))
    assert a["task"]["query_texts"]["source"] == "file"


def test_one_warning_per_run_for_unreviewed_terms(mini, tmp_path, capsys):
    hub, *_ = mini
    base = ["run", "--model", "hash", "--dataset", str(hub), "--output-dir", str(tmp_path / "o"),
            "--cache-dir", str(tmp_path / "c"), "-q", "--bootstrap", "20"]
    assert main([*base, "--task", "3xcm", "--task", "3xcm-matrix", "--task", "3xcm-i2i"]) == 0
    err = capsys.readouterr().err
    assert err.count("not reviewed by a native speaker") == 1
    matrix = json.loads((tmp_path / "o" / "hash" / "3xcm-matrix.json").read_text())
    qt = matrix["task"]["query_texts"]
    assert qt["source"] == "published" and qt["used_terms"] >= 40
    assert sum(qt["used_source_mix"].values()) == qt["used_terms"]
    assert qt["unreviewed_terms"] == qt["used_terms"] - qt["used_source_mix"].get("reviewed", 0)
    # image queries score no term: no warning
    assert main([*base, "--task", "3xcm-i2i"]) == 0
    assert "not reviewed" not in capsys.readouterr().err


def _configs_only(folder: Path) -> Path:
    """Keep only the card's ``configs`` (a card with no ``dataset_info``, as many have)."""
    import yaml

    card = (folder / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(card.split("---")[1])
    (folder / "README.md").write_text("---\n" + yaml.safe_dump({"configs": meta["configs"]})
                                      + "---\n", encoding="utf-8")
    return folder


def test_two_snapshots_of_the_same_name_are_not_confused(tmp_path):
    """datasets 5.2 keys its cache of a local folder by base name, config and card only: a
    second snapshot named like the first (another parent folder, other triplets) must be read
    as itself, and so must a snapshot whose files changed in place."""
    a = _configs_only(write_published_3xcm(tmp_path / "a" / "snapshot", n_triplets=12, seed=1))
    b = _configs_only(write_published_3xcm(tmp_path / "b" / "snapshot", n_triplets=20, seed=2))
    ra = run(tmp_path, "a", "--dataset", str(a))
    rb = run(tmp_path, "b", "--dataset", str(b))
    assert (ra["task"]["n"], rb["task"]["n"]) == (12, 20)
    assert ra["task"]["data_fingerprint"] != rb["task"]["data_fingerprint"]
    shutil.rmtree(a)
    _configs_only(write_published_3xcm(a, n_triplets=16, seed=4))  # the same path, new files
    assert run(tmp_path, "a2", "--dataset", str(a))["task"]["n"] == 16
