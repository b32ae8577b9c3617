"""The paper comparison on hand-made results: exact cells, tolerances, missing cells, banner."""

from __future__ import annotations

import csv
import io

import pytest

from benchmark.report.collect import collect
from benchmark.reproduce import paper, render
from benchmark.reproduce.cells import TOLERANCES, Cell
from benchmark.reproduce.compare import compare, merge
from benchmark.reproduce.provenance import why_not_real
from core import datatables
from tests.benchmark.reproduce_data import group, spec, write_result


def _authors(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(datatables.data_file(f"authors_rq2/{name}").text)))


def test_every_paper_table_reads_and_every_printed_name_has_an_alias():
    models = paper.paper_models()
    assert len(models) == 10
    for key, t in paper.read_tables().items():
        assert t.rows, key
        for row in t.rows:
            assert row.model in models or row.model == "Average", (key, row.printed)
            assert row.values, (key, row.printed)
    t2 = paper.read_table("table2").row("GME-Qwen2-2B")
    assert t2 is not None and t2.values["SP"] == paper.PaperValue(0.14, 2, "0.14")
    # Table 11 prints "GME-Qwen2-2B-Instruct" and "XLM-R-B/16Plus"; Table 1 "ColQwen2.5-3b-M"
    assert paper.read_table("table11").row("GME-Qwen2-2B", "M_sem_pct") is not None
    assert paper.read_table("table11").row("XLM-R-B/16plus", "M_cul_pct") is not None
    assert paper.read_table("table1").row("ColQwen2.5-3B-M") is not None


def test_our_names_map_to_the_papers_aliases():
    assert paper.alias_of("gme-qwen2-2b") == "GME-Qwen2-2B"
    assert paper.alias_of("mclip-xlmr-b16plus") == "XLM-R-B/16plus"
    assert paper.alias_of("colqwen2.5-7b-m") == "ColQwen2.5-7B-M"
    assert paper.alias_of("hash") is None


@pytest.mark.parametrize("kind,ours,printed,decimals,ok", [
    ("sp", 0.1549, 0.14, 2, True),    # rounds to 0.15: 0.01 off, inside
    ("sp", 0.1551, 0.14, 2, False),   # rounds to 0.16
    ("win_rate_pct", 84.3449, 83.34, 2, True),
    ("win_rate_pct", 84.3451, 83.34, 2, False),
    ("kl", 0.0186, 0.019, 3, True),   # the paper's rounding is no difference
    ("kl", 0.0184, 0.019, 3, False),  # 0.018 vs 0.019: 5% off
    ("kl", 5.146, 5.046, 3, True),    # 1.98% relative
    ("kl", 5.148, 5.046, 3, False),
    ("pearson", -0.31, -0.26, 2, True),
    ("pearson", -0.32, -0.26, 2, False),
    ("count", 11723, 11723, None, True),
    ("count", 11722, 11723, None, False),
])
def test_tolerances(kind, ours, printed, decimals, ok):
    c = Cell("r", "c", kind, ours, printed, decimals)
    assert c.status == ("ok" if ok else "outside")
    assert TOLERANCES[kind].why


def test_missing_cells_are_never_zero():
    c = Cell("r", "c", "sp", None, 0.14, 2)
    assert c.status == "missing" and c.diff is None
    assert render.fmt(c.ours, c) == "missing"


@pytest.fixture
def comparison(tmp_path):
    out = tmp_path / "results"
    theirs = next(r for r in _authors("overall_aggregated.csv")
                  if r["model"] == "gme-Qwen2-VL-2B-Instruct" and r["experiment"] == "text-to-image")
    a, b, c = (int(theirs[k]) for k in ("A_wins", "B_wins", "C_wins"))
    z = tuple(float(theirs[k]) for k in ("z_A", "z_B", "z_C"))
    overall = group(a + b + c, a, b, z)  # exactly the authors' (= Table 2) numbers
    usa = group(10000, 9606, 230)  # Table 11 exactly; SP 0.0239 -> 0.02 as Table 8
    uk = group(10000, 9534 - 150, 248 + 150)  # 1.5 points off in M_sem and M_cul
    by_language = {"es-AR": group(800, 700, 60), "es-ES": group(812, 744, 35)}
    write_result(out, spec("gme-qwen2-2b"), "3xcm",
                 {"overall": overall, "by_country": {"USA": usa, "GBR": uk},
                  "by_language": by_language, "by_concept": {}},
                 settings={"conventions": {"profile": "authors"}})
    sil = {"silhouette": {"euclidean": {"text": 0.021, "image": 0.0}}}
    write_result(out, spec("gme-qwen2-2b"), "analysis", {
        "by_country": {"USA": {"SP": 0.0239, **sil}},
        "correlations": {"euclidean": {"text": {"r": 0.80, "p": 0.01, "n": 16},
                                       "image": {"r": 0.20, "p": 0.4, "n": 16}}}})
    write_result(out, spec("chinese-clip-l14", real=False), "xm3600-i2t", {"overall": {
        "n": 3600, "accuracy@5": 0.3554, "lbkl@10": 5.046 * 1.03, "dlbkl@10": 5.055,
        "ndcg@10": 0.5, "ndcg_authors@10": 0.2071}})
    write_result(out, _hash_spec(), "3xcm", {"overall": group(10, 5, 3)})
    return compare(collect([out]))


def _hash_spec():
    from benchmark.models.base import ModelSpec

    return ModelSpec(name="hash", family="hash", checkpoint="hash-64", revision="1")


def _cells(comp, key):
    return {(c.row, c.column): c for s in comp.sections if s.key == key for c in s.cells}


def test_table2_and_11_cells(comparison):
    t2 = _cells(comparison, "table2")
    for col in ("M_sem_pct", "M_cul_pct", "M_non_pct", "SP"):
        assert t2[("GME-Qwen2-2B", col)].status == "ok", col
    assert t2[("GME-Qwen2-2B", "M_sem_pct")].ours == pytest.approx(83.34, abs=0.005)
    assert t2[("Jina-E-v4", "SP")].status == "missing"
    assert len(t2) == 40  # every cell of the paper's table, ours or missing
    t11 = _cells(comparison, "table11")
    assert t11[("GME-Qwen2-2B · M_sem_pct", "USA")].status == "ok"
    assert t11[("GME-Qwen2-2B · M_sem_pct", "UK")].status == "outside"
    assert t11[("GME-Qwen2-2B · M_cul_pct", "UK")].diff == pytest.approx(1.5, abs=1e-9)
    assert t11[("GME-Qwen2-2B · M_sem_pct", "GER")].status == "missing"


def test_table1_uses_the_authors_ndcg_and_relative_kl(comparison):
    t1 = _cells(comparison, "table1")
    assert t1[("Chinese-CLIP-L/14", "ndcg@10")].ours == 0.2071
    assert t1[("Chinese-CLIP-L/14", "ndcg@10")].status == "ok"
    assert t1[("Chinese-CLIP-L/14", "accuracy@5")].status == "ok"
    assert t1[("Chinese-CLIP-L/14", "lbkl@10")].status == "outside"  # 3% off
    assert t1[("GME-Qwen2-2B", "accuracy@5")].status == "missing"


def test_tables_7_and_8(comparison):
    t7 = _cells(comparison, "table7")
    assert t7[("GME-Qwen2-2B", "text_silhouette_r")].status == "ok"
    assert t7[("GME-Qwen2-2B", "image_silhouette_r")].status == "outside"
    assert t7[("Average", "text_silhouette_r")].ours is None  # not all seven models
    t8 = _cells(comparison, "table8")
    assert t8[("GME-Qwen2-2B · SP", "USA")].kind == "sp"
    assert t8[("GME-Qwen2-2B · SP", "USA")].status == "ok"
    assert t8[("GME-Qwen2-2B · TS", "USA")].status == "ok"  # 0.021 -> 0.02
    assert t8[("GME-Qwen2-2B · IS", "USA")].status == "ok"
    assert t8[("GME-Qwen2-2B · TS", "UK")].status == "missing"


def test_authors_csv_cells(comparison):
    ov = _cells(comparison, "authors-overall")
    row = "gme-qwen2-2b · text-to-image"
    for col in ("n", "M_sem", "M_cul", "M_non", "SP", "z_sem", "z_cul", "z_non"):
        assert ov[(row, col)].status == "ok", col
    assert ov[(row, "n")].ours == 11723
    lang = _cells(comparison, "authors-language")
    spanish = lang[(f"{row} · Spanish", "n")]
    assert spanish.ours == 1612 and spanish.paper == 1612  # es-AR and es-ES pooled
    assert lang[(f"{row} · Spanish", "M_sem")].ours == pytest.approx(1444 / 1612)
    country = _cells(comparison, "authors-country")
    assert country[(f"{row} · USA", "M_sem")].ours == pytest.approx(0.9606)
    assert country[(f"{row} · Japan", "n")].status == "missing"
    notes = next(s for s in comparison.sections if s.key == "authors-overall").notes
    assert "jina-embeddings-v4" in notes[0]  # published, not run here


def test_merge_pools_wins_and_weights_z():
    m = merge([group(10, 6, 2, (1.0, 0.0, -1.0)), group(30, 20, 5, (0.0, 0.0, 0.0))])
    assert m["n"] == 40 and m["M_sem"] == 26 / 40 and m["SP"] == 7 / 26
    assert m["z_sem"] == pytest.approx(10 / 40)
    assert merge([]) is None


def test_model_checks_and_banner(comparison, tmp_path):
    checks = comparison.checks
    assert checks["gme-qwen2-2b"].real and checks["gme-qwen2-2b"].conventions == "authors"
    assert not checks["chinese-clip-l14"].real
    assert "local folder" in checks["chinese-clip-l14"].reason
    assert comparison.unmatched == ["hash"]
    md = render.to_markdown(comparison, render.Context("r", 4))
    banner = md.split("## Models")[0]
    assert "mean nothing against the paper" in banner and "chinese-clip-l14" in banner
    assert "gme-qwen2-2b" not in banner
    assert "| Chinese-CLIP-L/14 † | accuracy@5 |" in md
    assert "| GME-Qwen2-2B | accuracy@5 | missing | 0.967 |" in md
    html = render.to_html(comparison, render.Context("r", 4))
    assert 'class="banner"' in html and "<script" not in html and "http" not in html.lower(
        ).replace("http-equiv", "")
    rows = list(csv.DictReader(io.StringIO(render.to_csv(comparison))))
    miss = next(r for r in rows if r["section"] == "table2" and r["row"] == "Jina-E-v4")
    assert miss["ours"] == "" and miss["status"] == "missing"


def test_why_not_real():
    from benchmark.results import ResultFile, TaskInfo

    def res(s):
        return ResultFile(date="d", model=s, task=TaskInfo(name="3xcm", dataset="x",
                                                             data_fingerprint="0", n=1), scores={})

    assert why_not_real(res(spec("jina-v4"))) == ""
    assert "not one of the paper's" in why_not_real(res(_hash_spec()))
    wrong = spec("jina-v4").model_copy(update={"revision": "f" * 40})
    assert "not the pinned" in why_not_real(res(wrong))
    other = spec("gme-qwen2-2b").model_copy(update={"checkpoint": "/tmp/tiny"})
    assert "is not the paper model's" in why_not_real(res(other))
    # the authors' conventions load clip-l14 from transformers' repo: still the real model
    hf = spec("clip-l14").model_copy(update={"checkpoint": "openai/clip-vit-large-patch14",
                                             "revision": "32bd64288804d66eefd0ccbe215aa642df71cc41"})
    assert why_not_real(res(hf)) == ""
    fake = spec("gme-qwen2-2b").model_copy(update={"family": "hash"})
    assert "hash model" in why_not_real(res(fake))


def test_recorded_conventions():
    from benchmark.reproduce.provenance import recorded_conventions

    assert recorded_conventions({"conventions": "authors"}) == "authors"
    assert recorded_conventions({"conventions": {"profile": "authors", "fields": {"dtype": "x"}}}
                                ) == "authors"
    # a model without profiles (piece B records its adapter's own conventions so)
    assert recorded_conventions({"conventions": {"profile": "reference", "fields": None}}) is None
    # today's per-side record of a task: no profile
    assert recorded_conventions({"conventions": {"query": {}, "document": {}}}) is None
    assert recorded_conventions({}) is None


def test_tables_1_and_5_by_engine(tmp_path):
    """An xm3600-i2t result with scores.engine_comparison gives a section per table: the other
    engine's value against the paper, and the run's engine minus the other (unpublished)."""
    out = tmp_path / "results"
    mine = {"n": 3600, "accuracy@5": 0.3554, "ndcg_authors@10": 0.2071, "lbkl@10": 5.046,
            "dlbkl@10": 5.055, "lbkl@5": 5.0}
    other = {k: v - 0.004 if k != "n" else v for k, v in mine.items()}
    ec = {"engine": "chromadb", "other_engine": "exact", "other_overall": other,
          "difference": {k: mine[k] - other[k] for k in mine}}
    write_result(out, spec("chinese-clip-l14"), "xm3600-i2t",
                 {"overall": mine, "engine_comparison": ec})
    write_result(out, spec("clip-l14"), "xm3600-i2t", {"overall": mine})  # no comparison
    comp = compare(collect([out]))
    t1 = _cells(comp, "table1-engines")
    cell = t1[("Chinese-CLIP-L/14 · exact", "accuracy@5")]
    assert cell.ours == pytest.approx(0.3514) and cell.paper == 0.355 and cell.status == "ok"
    d = t1[("Chinese-CLIP-L/14 · chromadb − exact", "accuracy@5")]
    assert d.ours == pytest.approx(0.004) and d.status == "unpublished"
    assert not any(r.startswith("CLIP-L/14") for r, _ in t1)
    t5 = _cells(comp, "table5-engines")
    assert t5[("Chinese-CLIP-L/14 · chromadb − exact", "lbkl@5")].ours == pytest.approx(0.004)
    keys = [s.key for s in comp.sections]
    assert keys.index("table1-engines") == keys.index("table1") + 1
    assert "table1-engines" in render.to_csv(comp)
