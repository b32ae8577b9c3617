"""Issue 23: generic terms for other countries' images (the column, its use by term_in_language
and 3xcm-matrix) and the concept definitions file, read through core.query_table and core.datatables."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from benchmark.cli import main
from benchmark.data import query_texts
from benchmark.tasks.matrix import language_plan
from core import datatables, query_table
from tests.benchmark.test_matrix import RecordingModel, named_release


def test_shipped_generic_terms_and_the_rule():
    terms = query_table.query_terms()
    assert all(t.generic_term for t in terms.values())  # filled on every shipped row
    gen = query_table.generic_terms()
    assert gen[("congress", "pt")] == "parlamento"
    assert gen[("congress", "es")] == "parlamento"
    assert gen[("congress", "ar")] == "البرلمان"
    assert gen[("prime minister", "es")] == "primer ministro"
    assert gen[("bus", "pt")] == "autocarro"  # not country-specific: the native term
    texts = {k: t.native_term for k, t in terms.items()}
    # the country's own term for its own images, the generic one for everyone else's
    assert query_table.term_in_language(texts, "congress", "pt", "PRT", gen) == \
        "Assembleia da República"
    assert query_table.term_in_language(texts, "congress", "pt", "BRA", gen) == "congresso nacional"
    assert query_table.term_in_language(texts, "congress", "pt", "USA", gen) == "parlamento"
    assert query_table.term_in_language(texts, "congress", "en", "USA", gen) == "congress"
    assert query_table.term_in_language(texts, "congress", "en", "DEU", gen) == "parliament"
    assert query_table.term_in_language(texts, "prime minister", "es", "GBR", gen) == "primer ministro"
    assert query_table.term_in_language(texts, "prime minister", "es", "ESP", gen) == \
        "presidente del gobierno"
    assert query_table.term_in_language(texts, "congress", "pt", "USA") == "Assembleia da República"


def test_matrix_asks_other_countries_with_the_generic_term(tmp_path):
    tr, im = named_release(tmp_path / "rel",
                  {"concept0": "congress", "concept1": "bus", "concept2": "prime minister"})
    RecordingModel.texts = []
    assert main(["run", "--model", "tests.benchmark.test_matrix:RecordingModel", "--task",
                 "3xcm-matrix", "--dataset", str(tmp_path / "rel"), "--query-languages", "pt,es",
                 "--query-source", "table", "--output-dir", str(tmp_path / "out"),
                 "--cache-dir", str(tmp_path / "c"), "-q", "--bootstrap", "20"]) == 0
    asked = set(RecordingModel.texts)
    assert {"parlamento", "primer ministro", "Assembleia da República", "presidente del gobierno",
            "congresso nacional", "autocarro", "autobús"} <= asked
    # row by row: own country -> its own term; any other country -> the generic term
    rows, texts, _, used = language_plan(query_texts.default_table(), tr, ["pt", "es"])
    got = {(tr["query_concept"].iloc[i], tr["query_country"].iloc[i], lang): t
           for lang in ("pt", "es") for i, t in zip(rows[lang], texts[lang], strict=True)}
    assert got[("congress", "USA", "pt")] == "parlamento"
    assert got[("congress", "JPN", "pt")] == "parlamento"
    assert got[("congress", "PRT", "pt")] == "Assembleia da República"
    assert got[("congress", "BRA", "pt")] == "congresso nacional"
    assert got[("prime minister", "USA", "es")] == "primer ministro"
    assert got[("prime minister", "ESP", "es")] == "presidente del gobierno"
    assert got[("bus", "USA", "pt")] == "autocarro"
    assert ("congress", "PRT") in used  # provenance: the generic form comes from PRT's row
    res = json.loads((tmp_path / "out" / "recording" / "3xcm-matrix.json").read_text())
    assert "generic_term" in res["task"]["query_text_rule"]


def _copy_data(tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(datatables.data_dir(), data)
    monkeypatch.setenv("XCM_DATA_DIR", str(data))
    return data / "concept_definitions.csv"


def test_concept_definitions_one_per_concept(tmp_path, monkeypatch):
    d = datatables.concept_definitions()
    assert list(d) == datatables.concepts()
    assert d["hot pot concept"].startswith("the dish: a pot of broth simmering at the table")
    path = _copy_data(tmp_path, monkeypatch)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))

    def write(rs):
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=datatables.DEFINITION_COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerows(rs)

    for rs, why in [(rows[1:], "no definition of 'train'"),
                    ([*rows, {**rows[0], "concept": "spaceship"}], "'spaceship' is not a concept"),
                    ([*rows, rows[0]], "line 141: second definition of 'train'"),
                    ([{**rows[0], "definition": ""}, *rows[1:]], "line 2: 'train' has an empty")]:
        write(rs)
        with pytest.raises(datatables.TableError, match=why):
            datatables.concept_definitions()
    path.unlink()
    with pytest.raises(datatables.TableError, match="missing table"):
        datatables.concept_definitions()
