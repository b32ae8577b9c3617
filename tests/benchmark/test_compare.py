"""``benchmark compare``: per-item outcomes beside each result, the paired test through the
CLI (Holm over the rows shown, --alpha, --format md|csv), and a refusal (one line, exit 2)
for every pair that is not comparable."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from benchmark.cli import main
from tests.benchmark.synth import write_planted_release
from tests.benchmark.test_xm3600_task import make_official

PLANTED = "tests.benchmark.synth:PlantedModel"
XM_MODEL = "tests.benchmark.test_xm3600_task:Planted"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """3xcm results of the planted model at culture weight 0 and 2, and 2 again on a
    second release (other fingerprint) and with another query table."""
    root = tmp_path_factory.mktemp("compare")
    write_planted_release(root / "data", n_concepts=20, per_cell=1)  # 20 concepts: the units
    write_planted_release(root / "data2", n_concepts=20, per_cell=1, seed=1)
    mp = pytest.MonkeyPatch()
    out = {}
    for key, w, data, extra in (("w0", 0.0, "data", []), ("w2", 2.0, "data", []),
                                ("w2b", 2.0, "data", []), ("other", 2.0, "data2", [])):
        mp.setenv("XCM_TEST_W", str(w))
        assert main(["run", "--model", PLANTED, "--task", "3xcm", "--dataset",
                     str(root / data), "--output-dir", str(root / key), "--cache-dir",
                     str(root / "cache"), "-q", *extra]) == 0
        out[key] = root / key / "planted" / "3xcm.json"
    mp.undo()
    return root, out


def test_outcomes_file_matches_scores(runs):
    _, out = runs
    res = json.loads(out["w2"].read_text())
    rec = res["outcomes"]
    side = out["w2"].parent / rec["file"]
    assert rec["file"] == "3xcm.outcomes.parquet" and rec["rows"] == res["task"]["n"]
    df = pd.read_parquet(side)
    assert list(df.columns) == ["triplet_id", "query_country", "winner", "query_concept",
                                "query_text", "query_image_id", "semantic_image_id",
                                "cultural_image_id", "non_relevant_image_id", "sim_semantic",
                                "sim_cultural", "sim_non_relevant"]
    o = res["scores"]["overall"]
    assert np.bincount(df["winner"], minlength=3).tolist() == [o["wins_sem"], o["wins_cul"],
                                                               o["wins_non"]]
    tha = df[df["query_country"] == "THA"]
    assert int((tha["winner"] == 1).sum()) == res["scores"]["by_country"]["THA"]["wins_cul"]


def test_compare_finds_the_planted_difference(runs, capsys, tmp_path):
    _, out = runs
    assert main(["compare", str(out["w2"]), str(out["w0"]), "--json",
                 str(tmp_path / "c.json")]) == 0
    text = capsys.readouterr().out
    c = json.loads((tmp_path / "c.json").read_text())
    a, b = (json.loads(out[k].read_text())["scores"]["overall"] for k in ("w2", "w0"))
    sp = c["overall"]["SP"]
    assert (sp["a"], sp["b"]) == (a["SP"], b["SP"])
    assert sp["diff"] == pytest.approx(a["SP"] - b["SP"])
    assert sp["p"] < 0.01 and sp["p_holm"] < 0.05 and sp["significant"]
    # SP 52 against 0: the delta-method interval of the difference of two ratios is wide;
    # the test (on cul / (sem + cul)) and the win rates are decisive
    assert sp["ci95"][0] < sp["diff"] < sp["ci95"][1]
    assert c["overall"]["M_cul"]["diff"] == pytest.approx(a["M_cul"] - b["M_cul"])
    assert c["overall"]["M_cul"]["ci95"][0] > 0
    # a country without a semantic win under A: SP ∞, no difference, yet tested
    inf = [s for s in c["by_country"].values() if s["SP"].get("a_note")]
    assert inf and all(s["SP"]["a"] is None and s["SP"]["diff"] is None and s["SP"]["p"] < 0.05
                       for s in inf)
    assert "∞" in text
    assert set(c["by_country"]) >= {"THA", "DEU", "GBR"}
    assert c["by_country"]["THA"]["n"] == a["n"] // 16
    assert c["unit"] == "concepts" and c["overall"]["units"] == 20
    assert "concepts" in c["method"] and "Holm over the 68 rows shown" in c["family"]
    assert "overall" in text and "THA" in text and "M_cul" in text and "*" in text
    assert "cannot tell apart true differences below ΔSP" in text
    # every star is an adjusted p below alpha, never an unadjusted one
    for s in [c["overall"], *c["by_country"].values()]:
        for k in ("SP", "M_sem", "M_cul", "M_non"):
            d = s[k]
            assert d["significant"] == (d["p_holm"] is not None and d["p_holm"] < 0.05)
            assert d["p_holm"] is None or d["p_holm"] >= d["p"]


def test_compare_same_model_twice_is_no_difference(runs, capsys):
    _, out = runs
    assert main(["compare", str(out["w2"]), str(out["w2b"])]) == 0
    text = capsys.readouterr().out
    assert "1.0000" in text and "*" not in text.split("\n", 5)[5]


def _refused(capsys, *args: str) -> str:
    assert main(["compare", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ")
    return err


def test_compare_refuses_incomparable(runs, capsys, tmp_path):
    root, out = runs
    assert "different datasets" in _refused(capsys, str(out["w2"]), str(out["other"]))
    # another query table on the same data
    res = json.loads(out["w0"].read_text())
    res["task"]["query_texts"]["sha256"] = "f" * 64
    q = tmp_path / "q" / "planted"
    q.mkdir(parents=True)
    shutil.copy(out["w0"].parent / "3xcm.outcomes.parquet", q)
    (q / "3xcm.json").write_text(json.dumps(res))
    assert "different query tables" in _refused(capsys, str(out["w2"]), str(q / "3xcm.json"))
    # the outcomes file changed after the result was written
    df = pd.read_parquet(q / "3xcm.outcomes.parquet")
    res["task"]["query_texts"]["sha256"] = json.loads(out["w2"].read_text())["task"][
        "query_texts"]["sha256"]
    (q / "3xcm.json").write_text(json.dumps(res))
    df.assign(winner=np.int8(0)).to_parquet(q / "3xcm.outcomes.parquet")
    assert "does not match the sha256" in _refused(capsys, str(out["w2"]), str(q / "3xcm.json"))
    (q / "3xcm.outcomes.parquet").unlink()
    assert "outcomes file" in _refused(capsys, str(out["w2"]), str(q / "3xcm.json"))
    del res["outcomes"]
    (q / "3xcm.json").write_text(json.dumps(res))
    assert "records no per-item outcomes" in _refused(capsys, str(out["w2"]),
                                                      str(q / "3xcm.json"))
    (tmp_path / "list.json").write_text("[]")
    assert "not a results file" in _refused(capsys, str(out["w2"]), str(tmp_path / "list.json"))
    assert "no such results file" in _refused(capsys, str(out["w2"]), str(tmp_path / "nope"))
    assert "--alpha" in _refused(capsys, str(out["w2"]), str(out["w0"]), "--alpha", "1.5")
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "notes"}')
    assert "refusing to overwrite" in _refused(capsys, str(out["w2"]), str(out["w0"]), "--json",
                                               str(mine))
    assert mine.read_text() == '{"my": "notes"}'
    assert main(["compare", str(out["w2"]), str(out["w0"]), "--json", str(tmp_path / "c.json"),
                 "--alpha", "0.05"]) == 0
    assert main(["compare", str(out["w2"]), str(out["w0"]), "--json", str(tmp_path / "c.json"),
                 "--alpha", "0.01"]) == 0  # our own comparison is rewritten
    assert json.loads((tmp_path / "c.json").read_text())["alpha"] == 0.01


def test_compare_refuses_other_items(runs, capsys, tmp_path):
    _, out = runs
    d = tmp_path / "x" / "planted"
    d.mkdir(parents=True)
    res = json.loads(out["w0"].read_text())
    df = pd.read_parquet(out["w0"].parent / "3xcm.outcomes.parquet").iloc[1:]
    df.to_parquet(d / "3xcm.outcomes.parquet", index=False)
    from core.files import sha256_file

    res["outcomes"]["sha256"] = sha256_file(d / "3xcm.outcomes.parquet")
    (d / "3xcm.json").write_text(json.dumps(res))
    assert "different items (1 only in A, 0 only in B)" in _refused(
        capsys, str(out["w2"]), str(d / "3xcm.json"))


def test_compare_xm3600(tmp_path, capsys):
    xm = make_official(tmp_path / "xm")
    paths = {}
    for name in ("Unbiased", "Extreme"):
        assert main(["run", "--model", f"{XM_MODEL}{name}", "--task", "xm3600-i2t", "--xm3600",
                     str(xm), "--output-dir", str(tmp_path / "r"), "--cache-dir",
                     str(tmp_path / "c"), "--k", "1,10", "-q"]) == 0
        paths[name] = next((tmp_path / "r").glob(f"planted-{'0.0' if name == 'Unbiased' else '2.0'}"
                                                 "/xm3600-i2t.json"))
    res = json.loads(paths["Extreme"].read_text())
    per = pd.read_parquet(paths["Extreme"].parent / res["outcomes"]["file"])
    assert per["lbkl@10"].mean() == pytest.approx(res["scores"]["overall"]["lbkl@10"])
    assert main(["compare", str(paths["Extreme"]), str(paths["Unbiased"]), "--json",
                 str(tmp_path / "c.json")]) == 0
    c = json.loads((tmp_path / "c.json").read_text())["overall"]
    assert set(c) == {"n"} | {f"{m}@{k}" for k in (1, 10)
                              for m in ("accuracy", "ndcg", "lbkl", "dlbkl", "missing", "lbjs",
                                        "dlbjs")}
    other = json.loads(paths["Unbiased"].read_text())["scores"]["overall"]
    assert c["lbkl@10"]["diff"] == pytest.approx(res["scores"]["overall"]["lbkl@10"]
                                                 - other["lbkl@10"])
    assert c["lbkl@10"]["p"] < 0.05 and c["lbkl@10"]["ci95"][0] > 0
    assert "lbkl@10" in capsys.readouterr().out



def test_compare_formats_for_a_paper(runs, capsys):
    """--format md: a Markdown table with the method, family and power under it; --format
    csv: one row per group and quantity with exact values, adjusted p and the star."""
    import csv
    import io

    _, out = runs
    assert main(["compare", str(out["w2"]), str(out["w0"]), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.splitlines()[2] == "| group | n | quantity | A | B | Δ | 95% CI | p | p (Holm) |"
    assert "| overall | 320 | M_cul |" in md and "Holm over the 68 rows shown" in md
    assert "cannot tell apart true differences below" in md
    assert main(["compare", str(out["w2"]), str(out["w0"]), "--format", "csv", "--alpha",
                 "0.01"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 68 and rows[0]["group"] == "overall" and rows[0]["quantity"] == "SP"
    for r in rows:
        if r["p_holm"]:
            assert (r["significant"] == "True") == (float(r["p_holm"]) < 0.01)
