"""``python -m builder.queries import --published`` and ``diff`` on a generated miniature of the
published ``image_metadata`` config (parquet shard + dataset card, loaded offline)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from builder import queries
from builder.catalog import Catalog
from builder.workdir import WorkDir

CARD = """---
configs:
- config_name: {config}
  data_files:
  - split: train
    path: {config}/train-*.parquet
---
# miniature of a published 3XCM release
"""
# (country as the authors name it, concept, concept_in_native), one row per image
ROWS = [
    ("Portugal", "train", "trem"), ("Portugal", "train", "trem"), ("Portugal", "train", "comboio"),
    ("Brazil", "train", "trem"), ("Brazil", "bus", "ônibus"),
    ("Argentina", "bus", "autobús"), ("Argentina", "bicycle", "bicicleta"),
    ("Japan", "game", "遊び"), ("Japan", "game", "ゲーム"),  # a tie: the term sorting first wins
    ("Atlantis", "bus", "x"), ("Spain", "bus", ""),
]


def write_published(root: Path, rows=ROWS, config: str = "image_metadata") -> Path:
    """A published-layout folder: ``<config>/train-00000-of-00001.parquet`` + README card."""
    import datasets
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (10, 20, 30)).save(buf, "PNG")
    s = datasets.Value("string")
    feats = datasets.Features({"image_id": s, "image": datasets.Image(), "concept_id": s,
                               "concept": s, "concept_in_native": s, "concept_country": s,
                               "country": s, "title": s})
    data = [{"image_id": f"{k.lower()}-{i}-0", "image": {"bytes": buf.getvalue(), "path": None},
             "concept_id": str(i), "concept": c, "concept_in_native": t, "concept_country": "",
             "country": k, "title": ""} for i, (k, c, t) in enumerate(rows)]
    (root / config).mkdir(parents=True)
    datasets.Dataset.from_list(data, features=feats).to_parquet(
        str(root / config / "train-00000-of-00001.parquet"))
    (root / "README.md").write_text(CARD.format(config=config), encoding="utf-8")
    return root


def test_import_stores_the_majority_and_fills_only_what_we_lack(tmp_path, capsys):
    pub = write_published(tmp_path / "pub")
    wd = tmp_path / "w"
    assert queries.main(["import", "--published", str(pub), "--workdir", str(wd)]) == 0
    out = capsys.readouterr().out
    assert "imported 6 published terms" in out and "(9 images)" in out
    assert "2 (concept, country) whose images disagree" in out
    assert "train/PRT=1" in out and "skipped_unknown_country=1" in out
    assert "skipped_empty=1" in out
    with Catalog(WorkDir.open(wd)) as cat:
        pt = {(r["concept"], r["country"]): (r["term"], r["n_images"]) for r in cat.query(
            "SELECT * FROM published_terms")}
        assert pt[("train", "PRT")] == ("trem", 2)
        assert pt[("game", "JPN")] == ("ゲーム", 1)  # 1 image each: the term that sorts first
        assert ("bus", "SAU") not in pt and len(pt) == 6
        assert {r["dataset"] for r in cat.query("SELECT dataset FROM published_terms")} == {
            str(pub.resolve())}
        # only 'bicycle' (not in data/queries.csv) becomes a query term, source=authors
        qt = cat.query("SELECT * FROM query_terms")
        assert [(r["concept"], r["country"], r["native_term"], r["source"], r["locale"])
                for r in qt] == [("bicycle", "ARG", "bicicleta", "authors", "es-AR")]
        assert "1 of 1 images" in qt[0]["note"]
        counts = json.loads(cat.last_run("queries_import")["counts_json"])
        assert counts["disagreeing"] == {"train/PRT": {"trem": 2, "comboio": 1},
                                         "game/JPN": {"ゲーム": 1, "遊び": 1}}
    # importing again replaces the dataset's terms (idempotent)
    assert queries.main(["import", "--published", str(pub), "--workdir", str(wd)]) == 0
    with Catalog(WorkDir.open(wd)) as cat:
        assert cat.query("SELECT COUNT(*) FROM published_terms")[0][0] == 6
        assert cat.query("SELECT COUNT(*) FROM query_terms")[0][0] == 1


def test_diff_counts_equal_terms_per_country_and_lists_the_rest(tmp_path, capsys):
    pub = write_published(tmp_path / "pub")
    wd = tmp_path / "w"
    assert queries.main(["diff", "--workdir", str(wd)]) == 2
    assert "run `python -m builder.queries import --published DATASET` first" in \
        capsys.readouterr().err
    assert queries.main(["import", "--published", str(pub), "--workdir", str(wd)]) == 0
    capsys.readouterr()
    assert queries.main(["diff", "--workdir", str(wd)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = {ln.split()[0]: ln.split()[1:] for ln in lines[3:] if ln[:3].isupper()
           and len(ln.split()) == 7}
    # country locale compared equal differ only-ours only-theirs
    assert row["BRA"] == ["pt-BR", "2", "2", "0", "1", "0"]  # trem, ônibus equal ours
    assert row["PRT"] == ["pt-PT", "1", "0", "1", "2", "0"]  # ours comboio, theirs trem
    assert row["ARG"] == ["es-AR", "1", "0", "1", "2", "1"]  # colectivo vs autobús; bicycle
    assert row["JPN"] == ["ja-JP", "1", "1", "0", "2", "0"]
    assert "SAU" not in row
    assert any(ln.startswith("total") and ln.split()[1:] == ["5", "3", "2"] for ln in lines)
    side = [ln.split() for ln in lines if ln.startswith("  train") or ln.startswith("  bus")]
    assert ["train", "comboio", "(generated)", "trem", "(2)"] in side
    assert ["bus", "colectivo", "(generated)", "autobús", "(1)"] in side
    assert "only theirs: bicycle" in out  # our only term for it is the authors' own


def test_bad_published_input_is_one_line(tmp_path, capsys):
    wd = tmp_path / "w"
    other = write_published(tmp_path / "other", config="benchmark")
    assert queries.main(["import", "--published", str(other), "--workdir", str(wd)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "no 'image_metadata' config" in err[0]
    assert queries.main(["import", "--published", str(tmp_path / "none"), "--workdir",
                         str(wd)]) == 2
    assert "cannot read its 'image_metadata' config" in capsys.readouterr().err
    empty = write_published(tmp_path / "empty", rows=[("Atlantis", "bus", "x")])
    assert queries.main(["import", "--published", str(empty), "--workdir", str(wd)]) == 2
    assert "no usable (concept, country, concept_in_native) rows" in capsys.readouterr().err
    a = write_published(tmp_path / "a" / "pub")
    b = write_published(tmp_path / "b" / "pub", rows=ROWS[:4])  # same folder name, other data
    for d in (a, b):
        assert queries.main(["import", "--published", str(d), "--workdir", str(wd)]) == 0
    with Catalog(WorkDir.open(wd)) as cat:
        n = dict(cat.query("SELECT dataset, COUNT(*) FROM published_terms GROUP BY dataset"))
    assert n == {str(a.resolve()): 6, str(b.resolve()): 2}
    capsys.readouterr()
    assert queries.main(["diff", "--workdir", str(wd)]) == 2
    assert "several imported datasets: pass --dataset" in capsys.readouterr().err
    assert queries.main(["diff", "--workdir", str(wd), "--dataset", str(tmp_path / "c")]) == 2
    assert "not imported" in capsys.readouterr().err
    assert queries.main(["diff", "--workdir", str(wd), "--dataset", str(b)]) == 0
    assert f"concept_in_native of {b.resolve()}" in capsys.readouterr().out


def test_a_new_import_refreshes_the_terms_an_earlier_import_filled(tmp_path):
    """A term that only an earlier import gave us (source=authors) is the authors', not ours:
    importing a revised release replaces it."""
    wd = tmp_path / "w"
    first = write_published(tmp_path / "v1", rows=[("Argentina", "bicycle", "bicicleta")])
    second = write_published(tmp_path / "v2", rows=[("Argentina", "bicycle", "bici")])
    for pub in (first, second):
        assert queries.main(["import", "--published", str(pub), "--workdir", str(wd)]) == 0
    with Catalog(WorkDir.open(wd)) as cat:
        rows = cat.query("SELECT native_term, source FROM query_terms WHERE concept='bicycle'"
                         " AND country='ARG'")
        assert [(r["native_term"], r["source"]) for r in rows] == [("bici", "authors")]
