"""3xcm-matrix: planted language-specific culture pull; the paired difference; its own-language
cells are the 3xcm scores."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.metrics.significance import paired_association
from benchmark.models.base import Adapter, ModelSpec
from benchmark.synthetic import write_release
from core import datatables, query_table
from core.vectors import l2_normalize
from tests.benchmark.synth import PlantedVectors, decode_code, planted_world

PLANTED = {"th": 1.0, "ja": 1.0}  # only Thai and Japanese texts pull towards their culture
CODES = [c.code for c in datatables.countries()]
LANG_OF = {c.code: c.language for c in datatables.countries()}


def text_vector(pv: PlantedVectors, text: str) -> np.ndarray:
    concept, lang = text.split("@")
    pull = np.mean([pv.culture[CODES.index(k)] for k in CODES if LANG_OF[k] == lang], axis=0)
    return pv.concept[int(concept.removeprefix("concept"))] + PLANTED.get(lang, 0.0) * pull


class LanguagePullModel(Adapter):
    def __init__(self, name: str = "langpull", **kw: Any):
        super().__init__(ModelSpec(name=name, family="test", checkpoint="langpull"), "cpu")
        self.pv = PlantedVectors()

    def _encode_text_batch(self, texts, role):
        return l2_normalize(np.stack([text_vector(self.pv, t) for t in texts]))

    def _encode_image_batch(self, images, role):
        return l2_normalize(np.stack([self.pv.image(*decode_code(im)) for im in images]))


def expected_cells(tr: pd.DataFrame, terms: dict) -> dict:
    pv = PlantedVectors()

    def img(iid):
        k, ci, v = iid.split("-")
        return l2_normalize(pv.image(int(ci), CODES.index(k), int(v)))

    wins: dict = {}
    for r in tr.itertuples():
        for lang in sorted({LANG_OF[k] for k in CODES}):
            if (r.query_concept, lang) not in terms:
                continue
            q = l2_normalize(text_vector(pv, terms[(r.query_concept, lang)]))
            s = [float(q @ img(i)) for i in (r.semantic_image_id, r.cultural_image_id,
                                              r.non_relevant_image_id)]
            wins.setdefault((lang, r.query_country), [0, 0, 0])[int(np.argmax(s))] += 1
    return wins


def test_matrix_shows_the_planted_cells(tmp_path):
    tr, im = planted_world(n_concepts=5, per_cell=2)
    write_release(tmp_path / "rel", tr, im, "planted")
    langs = sorted({LANG_OF[k] for k in CODES})
    rows = [{"concept": f"concept{i}", "language": lang, "text": f"concept{i}@{lang}"}
            for i in range(5) for lang in langs if not (i == 4 and lang == "yo")]
    pd.DataFrame(rows).to_csv(tmp_path / "q.csv", index=False)
    terms = {(r["concept"], r["language"]): r["text"] for r in rows}
    assert main(["run", "--model", "tests.benchmark.test_matrix:LanguagePullModel", "--task",
                 "3xcm-matrix", "--dataset", str(tmp_path / "rel"), "--query-source",
                 str(tmp_path / "q.csv"), "--output-dir", str(tmp_path / "out"), "--cache-dir",
                 str(tmp_path / "c"), "-q", "--bootstrap", "200"]) == 0
    res = json.loads((tmp_path / "out" / "langpull" / "3xcm-matrix.json").read_text())
    m = res["scores"]["matrix"]
    assert set(m) == set(langs) and len(langs) == 12
    want = expected_cells(tr, terms)
    for (lang, k), wins in want.items():
        cell = m[lang][k]
        assert [cell["wins_sem"], cell["wins_cul"], cell["wins_non"]] == wins
        assert cell["SP"] == (pytest.approx(wins[1] / wins[0]) if wins[0] else None)
    planted = {(lang, k) for lang in PLANTED for k in CODES if LANG_OF[k] == lang}
    high = [m[lang][k]["SP"] for lang, k in planted]
    others = [c["SP"] for lang, row in m.items() for k, c in row.items()
              if (lang, k) not in planted and c["SP"] is not None]
    assert min(high) > 3 * max(others)
    # the concept without a Yoruba term is skipped for Yoruba and counted
    sk = res["task"]["skipped"]["yo"]
    assert sk["concepts"] == ["concept4"] and sk["triplets"] == int((tr.query_concept == "concept4").sum())
    # own language vs English for Thailand: planted pull only in Thai
    tha = res["scores"]["summary"]["THA"]
    assert tha["own_language"]["SP"] > tha["english"]["SP"]
    d = tha["difference"]
    lo, hi = d["SP_diff_ci95"]
    assert d["SP_diff"] == pytest.approx(tha["own_language"]["SP"] - tha["english"]["SP"])
    # over 5 concepts whose triplets all behave alike, the interval of the difference of two
    # ratios (English SP 0) is wide; the test on cul / (sem + cul) (0.7 against 0) is not
    assert lo < 0 < d["SP_diff"] < hi and d["p"] < 0.05 and d["n_paired"] == 10
    usa = res["scores"]["summary"]["USA"]
    assert usa["own_language"] == usa["english"]  # English is the USA's own language


def test_paired_difference_known_difference():
    # 400 paired triplets: under a, 200 sem / 200 cul wins (SP 1.0); under b, the same
    # triplets give 300 sem / 100 cul (SP 1/3). The difference is 2/3.
    a = np.array([0] * 200 + [1] * 200)
    b = np.array([0] * 200 + [0] * 100 + [1] * 100)
    d = paired_association(a, b)["overall"]["SP"]
    assert d["a"] == 1.0 and d["b"] == pytest.approx(1 / 3)
    assert d["diff"] == pytest.approx(2 / 3)
    lo, hi = d["ci95"]
    assert lo < 2 / 3 < hi and lo > 0.4 and hi < 0.95
    # identical conditions: the paired difference is exactly zero
    z = paired_association(a, a)["overall"]["SP"]
    assert z["diff"] == 0.0 and z["ci95"] == [0.0, 0.0] and z["p"] == 1.0
    # pairing narrows the interval compared with resampling the conditions independently
    rng = np.random.default_rng(5)
    indep = []
    for _ in range(2000):
        ra, rb = rng.choice(a, a.size), rng.choice(b, b.size)
        indep.append(((ra == 1).sum() / (ra == 0).sum()) - ((rb == 1).sum() / (rb == 0).sum()))
    ilo, ihi = np.percentile(indep, [2.5, 97.5])
    assert (hi - lo) < (ihi - ilo)


class TwoTermModel(LanguagePullModel):
    """A query text ``concept@lang`` as LanguagePullModel; ``...#alt`` (a second term some
    query images of a pair carry) pulls hard towards the query's culture."""

    def __init__(self, name: str = "twoterm", **kw: Any):
        super().__init__(name)

    def _encode_text_batch(self, texts, role):
        out = []
        for t in texts:
            base, alt = t.split("#")[0], t.endswith("#alt")
            v = text_vector(self.pv, base)
            if alt:
                lang = base.split("@")[1]
                v = v + 3.0 * np.mean([self.pv.culture[CODES.index(k)] for k in CODES
                                       if LANG_OF[k] == lang], axis=0)
            out.append(v)
        return l2_normalize(np.stack(out))


def test_own_language_cells_equal_the_3xcm_scores(tmp_path):
    """A pair (concept, country) whose query images carry two different terms: 3xcm embeds
    each image's own term; the matrix's own-language cells must be those same numbers (the
    majority term for every triplet of the pair gave other numbers)."""
    tr, im = planted_world(n_concepts=4, per_cell=3)
    lang = tr["query_country"].map(LANG_OF)
    first = tr.groupby(["query_concept", "query_country"]).cumcount() == 0
    tr["query_text"] = tr["query_concept"] + "@" + lang + np.where(first, "#alt", "")
    write_release(tmp_path / "rel", tr, im, "two terms")
    common = ["--model", "tests.benchmark.test_matrix:TwoTermModel", "--dataset",
              str(tmp_path / "rel"), "--query-source", "release", "--output-dir",
              str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c"), "-q"]
    assert main(["run", "--task", "3xcm", *common]) == 0
    assert main(["run", "--task", "3xcm-matrix", "--query-languages", "en,th,de", *common]) == 0
    xcm = json.loads((tmp_path / "out" / "twoterm" / "3xcm.json").read_text())["scores"]
    mat = json.loads((tmp_path / "out" / "twoterm" / "3xcm-matrix.json").read_text())["scores"]
    checked = 0
    for k, cell in mat["matrix"]["th"].items():
        if LANG_OF[k] != "th":
            continue
        want = xcm["by_country"][k]
        assert {key: want[key] for key in cell} == cell
        checked += 1
    for k in ("USA", "GBR", "AUS", "DEU"):
        own = mat["matrix"][LANG_OF[k]][k]
        assert {key: xcm["by_country"][k][key] for key in own} == own
        assert mat["summary"][k]["own_language"] == own
    assert checked == 1
    # the alternative term moves winners: the majority-term rule would not have matched
    assert xcm["by_country"]["THA"]["wins_cul"] > 0


def named_release(path, names: dict[str, str]):
    """A planted 3-concept world (one triplet per cell) whose concepts carry real names from
    data/queries.csv, written to ``path`` as a release with query texts the table must
    replace; its triplet and image tables."""
    tr, im = planted_world(n_concepts=3, per_cell=1)
    for col in ("query_concept", "cultural_concept", "non_relevant_concept"):
        tr[col] = tr[col].map(names)
    im["concept"] = im["concept"].map(names)
    im["tags"] = [[names[t] for t in tags] for tags in im["tags"]]
    tr["query_text"] = "unused"
    write_release(path, tr, im, "planted")
    return tr, im


class RecordingModel(LanguagePullModel):
    """Records every text it is asked to encode (the matrix's query texts)."""

    texts: list[str] = []

    def __init__(self, name: str = "recording", **kw: Any):
        Adapter.__init__(self, ModelSpec(name=name, family="test", checkpoint="recording"),
                         "cpu")
        self.pv = PlantedVectors()

    def _encode_text_batch(self, texts, role):
        RecordingModel.texts.extend(texts)
        return l2_normalize(np.stack([self.pv.concept[len(t) % 3] for t in texts]))


def test_matrix_uses_per_country_terms_by_the_stated_rule(tmp_path):
    """Texts of data/queries.csv (--query-source table, per country): a PRT triplet asked in Portuguese gets
    the pt-PT term, a BRA one the pt-BR term, any other country the term of Portuguese's first
    country in countries.csv (PRT); likewise ESP/ARG for Spanish and USA/GBR/AUS for English."""
    tr, im = named_release(tmp_path / "rel-per-country",
                  {"concept0": "train", "concept1": "bus", "concept2": "gas station"})
    RecordingModel.texts = []
    assert main(["run", "--model", "tests.benchmark.test_matrix:RecordingModel", "--task",
                 "3xcm-matrix", "--dataset", str(tmp_path / "rel-per-country"), "--query-languages",
                 "en,es,pt", "--query-source", "table", "--output-dir", str(tmp_path / "out"),
                 "--cache-dir", str(tmp_path / "c"), "-q", "--bootstrap", "20"]) == 0
    assert set(RecordingModel.texts) == {
        "train", "bus", "gas station", "petrol station",  # USA (and non-English), GBR/AUS
        "tren", "autobús", "colectivo", "gasolinera", "estación de servicio",  # ESP, ARG
        "comboio", "trem", "autocarro", "ônibus", "bomba de gasolina", "posto de gasolina",
    }
    res = json.loads((tmp_path / "out" / "recording" / "3xcm-matrix.json").read_text())
    assert "first country in countries.csv" in res["task"]["query_text_rule"]
    assert res["task"]["skipped"]["pt"] == {"triplets": 0, "concepts": []}
    # the rule itself, cell by cell
    terms = {k: t.native_term for k, t in query_table.query_terms().items()}
    assert query_table.term_in_language(terms, "bus", "pt", "BRA") == "ônibus"
    assert query_table.term_in_language(terms, "bus", "pt", "PRT") == "autocarro"
    assert query_table.term_in_language(terms, "bus", "pt", "JPN") == "autocarro"
    assert query_table.term_in_language(terms, "bus", "es", "ARG") == "colectivo"
    assert query_table.term_in_language(terms, "bus", "es", "BRA") == "autobús"
    assert query_table.term_in_language(terms, "gas station", "en", "AUS") == "petrol station"
    assert query_table.term_in_language(terms, "gas station", "en", "THA") == "gas station"
    assert query_table.term_in_language(terms, "no such concept", "en", "USA") is None
