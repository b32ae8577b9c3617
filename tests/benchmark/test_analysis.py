"""``analyze``: silhouettes and Pearson against sklearn/scipy, and the command end to end."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr
from sklearn.metrics import silhouette_samples

from benchmark.analysis.core import pooled
from benchmark.analysis.silhouette import pearson, silhouette_by_label
from benchmark.cli import main
from benchmark.embeddings import MultiVector
from benchmark.models.base import ModelSpec
from benchmark.models.hash import HashModel
from benchmark.synthetic import main as synthetic_main
from core import datatables


def blobs(separation: float, n_per: int = 40, k: int = 4, dim: int = 16, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, dim)) * separation
    x = np.concatenate([c + rng.standard_normal((n_per, dim)) for c in centres])
    labels = np.repeat([f"L{i}" for i in range(k)], n_per)
    return x.astype(np.float32), labels


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_silhouette_equals_sklearn_per_label(metric):
    x, y = blobs(3.0)
    got = silhouette_by_label(x, y, metric)
    s = silhouette_samples(x, y, metric=metric).astype(np.float64)
    assert got["overall"] == pytest.approx(float(s.mean()), abs=1e-12)
    for label in np.unique(y):
        assert got["by_label"][label]["silhouette"] == pytest.approx(float(s[y == label].mean()),
                                                                     abs=1e-12)
        assert got["by_label"][label]["n"] == 40
    assert got["metric"] == metric and got["n"] == 160 and got["n_labels"] == 4


def test_separated_clusters_score_near_one_mixed_near_zero():
    x, y = blobs(50.0)
    sep = silhouette_by_label(x, y)
    assert sep["overall"] > 0.9
    assert all(v["silhouette"] > 0.9 for v in sep["by_label"].values())
    x0, y0 = blobs(0.0, n_per=100)  # one cloud: the four labels overlap completely
    mixed = silhouette_by_label(x0, y0)
    assert abs(mixed["overall"]) < 0.05
    assert all(abs(v["silhouette"]) < 0.05 for v in mixed["by_label"].values())


def test_silhouette_undefined_cases_have_a_reason():
    x, _ = blobs(3.0, n_per=3, k=1)
    one = silhouette_by_label(x, ["a"] * 3)
    assert one["overall"] is None and "reason" in one
    assert one["by_label"]["a"] == {"n": 3, "silhouette": None}
    each = silhouette_by_label(x, ["a", "b", "c"])
    assert each["overall"] is None and "reason" in each
    with pytest.raises(ValueError):
        silhouette_by_label(x, ["a", "b"])


def test_pearson_equals_scipy_and_skips_undefined():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(16)
    b = 0.5 * a + rng.standard_normal(16)
    ref = pearsonr(a, b)
    got = pearson(list(a), list(b))
    assert got["r"] == pytest.approx(float(ref.statistic), abs=1e-12)
    assert got["p"] == pytest.approx(float(ref.pvalue), abs=1e-12)
    assert got["n"] == 16
    # None / NaN pairs are dropped, the rest gives scipy's value on the rest
    a2, b2 = [*a, None, 1.0], [*b, 2.0, float("nan")]
    assert pearson(a2, b2)["r"] == pytest.approx(float(ref.statistic), abs=1e-12)
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8])["r"] == pytest.approx(1.0)
    assert pearson([1, 2], [2, 4])["r"] is None
    assert pearson([1, 2, 3], [5, 5, 5])["reason"] == "a series is constant"


class MultiHash(HashModel):
    """A multi-vector fake: each item is 2 (texts) or 3 (images) hash-seeded token vectors."""

    def __init__(self, name: str = "multihash", **kw):
        super().__init__(name=name, dim=16)
        self.spec = ModelSpec(name=name, family="hash", checkpoint="multihash-16", revision="1",
                              multi_vector=True)

    def _encode_text_batch(self, texts, role):
        one = super()._encode_text_batch
        return MultiVector.from_list([np.stack([one([f"{t}#{j}"], role)[0] for j in range(2)])
                                      for t in texts])

    def _encode_image_batch(self, images, role):
        base = super()._encode_image_batch(images, role)
        rng = np.random.default_rng(0)
        return MultiVector.from_list([np.stack([v, v + rng.standard_normal(16).astype(np.float32),
                                                -v]) for v in base])


def test_analyze_multivector_model_pools_and_matches_3xcm(synthetic_run):
    root, args = synthetic_run
    model = "tests.benchmark.test_analysis:MultiHash"
    args = [model if a == "hash" else a for a in args]
    args = [str(root / "mv") if a == str(root / "results") else a for a in args]
    assert main(["run", "--task", "3xcm", "-q", "--bootstrap", "50", *args]) == 0
    assert main(["analyze", "--no-umap", "-q", "--bootstrap", "50", *args]) == 0
    slug = next(p for p in (root / "mv").iterdir() if p.is_dir())
    res = json.loads((slug / "analysis.json").read_text())
    xcm = json.loads((slug / "3xcm.json").read_text())
    assert "mean-pooled" in res["settings"]["embeddings"]
    assert res["timings"]["text_embedding"]["embedded"] == 0  # cached multi-vectors reused
    for code, row in res["scores"]["by_country"].items():
        assert row["SP"] == xcm["scores"]["by_country"][code]["SP"]  # MaxSim, as 3xcm


def test_multivector_is_mean_pooled_over_valid_tokens():
    mv = MultiVector.from_list([np.array([[1.0, 3.0], [3.0, 5.0]], np.float32),
                                np.array([[2.0, 2.0]], np.float32)])
    np.testing.assert_array_equal(pooled(mv), np.array([[2.0, 4.0], [2.0, 2.0]], np.float32))


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    """The bundled synthetic release scored by the hash model (3xcm), cache in a temp dir."""
    root = tmp_path_factory.mktemp("analysis")
    assert synthetic_main(["--out", str(root / "synthetic")]) == 0
    args = ["--model", "hash", "--dataset", str(root / "synthetic"), "--output-dir",
            str(root / "results"), "--cache-dir", str(root / "cache")]
    assert main(["run", "--task", "3xcm", "-q", *args]) == 0
    return root, args


def test_analyze_no_umap_reuses_cache_and_matches_3xcm(synthetic_run, capsys):
    root, args = synthetic_run
    assert main(["analyze", *args, "--no-umap", "--metric", "both"]) == 0
    out = capsys.readouterr().out
    assert "SP vs image: r " in out
    res = json.loads((root / "results/hash/analysis.json").read_text())
    xcm = json.loads((root / "results/hash/3xcm.json").read_text())
    sc = res["scores"]
    assert res["task"]["name"] == "analysis"
    assert res["task"]["data_fingerprint"] == xcm["task"]["data_fingerprint"]
    # SP per country is the 3xcm run's, to the bit
    for code, row in sc["by_country"].items():
        assert row["SP"] == xcm["scores"]["by_country"][code]["SP"]
        assert row["SP_ci95"] == xcm["scores"]["by_country"][code]["SP_ci95"]
        assert row["language"] == datatables.country(code).language
    # texts all cached by the 3xcm run; images: only those never a candidate are embedded
    tr = pd.read_parquet(root / "synthetic/triplets")
    cands = set(tr[["semantic_image_id", "cultural_image_id", "non_relevant_image_id"]]
                .to_numpy().ravel())
    everything = cands | set(tr["query_image_id"])
    te, ie = res["timings"]["text_embedding"], res["timings"]["image_embedding"]
    assert te["embedded"] == 0
    assert ie["requested"] == len(everything) == res["task"]["n_images"]
    assert ie["embedded"] == len(everything - cands)
    # silhouettes: one label per language / country, counts from the data
    for metric in ("euclidean", "cosine"):
        sil = sc["silhouette"][metric]
        n_texts = tr[["query_language", "query_text"]].drop_duplicates()
        assert sil["text_by_language"]["n"] == len(n_texts) == res["task"]["n_texts"]
        for lang, g in n_texts.groupby("query_language"):
            assert sil["text_by_language"]["by_label"][lang]["n"] == len(g)
        assert sil["image_by_country"]["n_labels"] == 16
        for code, row in sc["by_country"].items():
            s = row["silhouette"][metric]
            assert s["image"] == sil["image_by_country"]["by_label"][code]["silhouette"]
            if s["text"] is not None:
                assert s["sum"] == pytest.approx(s["text"] + s["image"])
        # the correlation is scipy's over the per-country table
        codes = list(sc["by_country"])
        sp = [sc["by_country"][c]["SP"] for c in codes]
        im = [sc["by_country"][c]["silhouette"][metric]["image"] for c in codes]
        ref = pearsonr(sp, im)
        assert sc["correlations"][metric]["image"]["r"] == pytest.approx(float(ref.statistic))
        assert sc["correlations"][metric]["image"]["p"] == pytest.approx(float(ref.pvalue))
    assert sc["umap"] == {"skipped": "--no-umap"}
    assert not list((root / "results/hash").glob("analysis-umap-*"))
    for metric in ("euclidean", "cosine"):
        png = root / "results/hash" / sc["figures"][metric]
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_analyze_with_umap_writes_png_and_parquet(synthetic_run):
    root, args = synthetic_run
    out = root / "umap-results"
    args = [a if a != str(root / "results") else str(out) for a in args]
    assert main(["analyze", *args, "-q", "--annotate", "2"]) == 0
    res = json.loads((out / "hash/analysis.json").read_text())
    for kind, n in (("text", res["task"]["n_texts"]), ("image", res["task"]["n_images"])):
        info = res["scores"]["umap"][kind]
        assert info["n_neighbors_requested"] == 15 and info["min_dist"] == 0.1
        assert info["random_state"] == 42
        png, pq = out / "hash" / info["png"], out / "hash" / info["parquet"]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        coords = pd.read_parquet(pq)
        assert len(coords) == n and np.isfinite(coords[["x", "y"]].to_numpy()).all()
    assert set(pd.read_parquet(out / "hash/analysis-umap-image.parquet")["country"]) == {
        c.code for c in datatables.countries()}


def test_analyze_bad_input_is_one_line_exit_2(tmp_path, capsys):
    assert main(["analyze", "--model", "hash", "--output-dir", str(tmp_path)]) == 2
    assert "needs --dataset" in capsys.readouterr().err
    assert main(["analyze", "--model", "hsah", "--dataset", str(tmp_path / "nope"),
                 "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1


def test_fonts_cover_thai_devanagari_arabic_cjk():
    """Every script of the benchmark's query terms has a font in the fallback chain."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    from benchmark.report import style

    chain = style.font_families()
    samples = {"thai": "อ", "devanagari": "भ", "arabic": "ط", "cjk": "食"}
    files = [font_manager.findfont(font_manager.FontProperties(family=f), fallback_to_default=False)
             for f in chain]
    missing = [s for s, ch in samples.items()
               if not any(FT2Font(f).get_char_index(ord(ch)) for f in files)]
    if missing and not any("Noto" in f for f in chain):
        pytest.skip(f"Noto fonts not installed ({' '.join(style.APT_PACKAGES)})")
    assert not missing, f"no font for {missing} in {chain}"


def test_text_silhouette_rises_with_planted_culture(tmp_path, monkeypatch):
    """Planted texts = concept + w * culture: by-language clustering grows with w."""
    from tests.benchmark.synth import write_planted_release

    write_planted_release(tmp_path / "planted", n_concepts=3, per_cell=1)
    overall = {}
    for w in (0.0, 3.0):
        monkeypatch.setenv("XCM_TEST_W", str(w))
        out = tmp_path / f"w{w}"
        assert main(["analyze", "--model", "tests.benchmark.synth:PlantedModel", "--dataset",
                     str(tmp_path / "planted"), "--output-dir", str(out), "--no-cache",
                     "--no-umap", "-q", "--bootstrap", "10"]) == 0
        res = json.loads(next(out.glob("*/analysis.json")).read_text())
        overall[w] = res["scores"]["silhouette"]["euclidean"]["text_by_language"]["overall"]
        # images carry concept + culture: they group by country whatever w is
        assert res["scores"]["silhouette"]["euclidean"]["image_by_country"]["overall"] > 0
    assert overall[0.0] < 0 < overall[3.0]


def test_analyze_reads_the_authors_csv_format(tmp_path):
    """``--triplets-csv``: no image table, so image countries come from the triplet columns."""
    from tests.benchmark.synth import coded_png, planted_world

    tr, _ = planted_world(n_concepts=3, per_cell=1)
    name = {c.code: c.authors_name for c in datatables.countries()}
    raw = pd.DataFrame({
        "query_index": tr["triplet_id"], "query_image_id": tr["query_image_id"],
        "query_concept": tr["query_concept"], "query_country": tr["query_country"].map(name),
        "semantically_relevant_candidate_image_id": tr["semantic_image_id"],
        "semantically_relevant_candidate_concept": tr["query_concept"],
        "semantically_relevant_candidate_country": tr["semantic_country"].map(name),
        "culturally_relevant_candidate_image_id": tr["cultural_image_id"],
        "culturally_relevant_candidate_concept": tr["cultural_concept"],
        "culturally_relevant_candidate_country": tr["query_country"].map(name),
        "non_relevant_candidate_image_id": tr["non_relevant_image_id"],
        "non_relevant_candidate_concept": tr["non_relevant_concept"],
        "non_relevant_candidate_country": tr["non_relevant_country"].map(name),
    })
    raw.to_csv(tmp_path / "bench.csv", index=False)
    (tmp_path / "img").mkdir()
    codes = [c.code for c in datatables.countries()]
    ids = set(tr[["query_image_id", "semantic_image_id", "cultural_image_id",
                  "non_relevant_image_id"]].to_numpy().ravel())
    for iid in ids:
        k, ci, v = iid.split("-")
        (tmp_path / "img" / f"{iid}.png").write_bytes(coded_png(int(ci), codes.index(k), int(v)))
    langs = sorted({c.language for c in datatables.countries()})
    pd.DataFrame([{"concept": c, "language": lg, "text": f"{c} [{lg}]"}
                  for c in sorted(set(tr["query_concept"])) for lg in langs]
                 ).to_csv(tmp_path / "q.csv", index=False)
    assert main(["analyze", "--model", "hash", "--triplets-csv", str(tmp_path / "bench.csv"),
                 "--images", str(tmp_path / "img"), "--query-source", str(tmp_path / "q.csv"),
                 "--output-dir", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c"),
                 "--no-umap", "-q", "--bootstrap", "10"]) == 0
    res = json.loads((tmp_path / "out/hash/analysis.json").read_text())
    assert res["task"]["source_format"] == "authors-csv"
    assert res["task"]["n_images"] == len(ids)
    by = res["scores"]["silhouette"]["euclidean"]["image_by_country"]["by_label"]
    assert {k: v["n"] for k, v in by.items()} == pd.Series(
        [i.split("-")[0] for i in ids]).value_counts().to_dict()
    # one text per (language, concept): 3 concepts x 12 languages
    assert res["task"]["n_texts"] == 3 * len(langs)


def test_correlation_has_n_interval_spearman_and_is_exploratory_at_16():
    """r comes with n, a Fisher-z 95% interval that covers the true correlation at its level
    (simulated at n = 16, rho 0.5), Spearman beside it (an infinite SP ranks highest, Pearson
    leaves it out), and below 30 pairs the correlation is marked exploratory."""
    rng = np.random.default_rng(0)
    cov = [[1, 0.5], [0.5, 1]]
    hits = 0
    for _ in range(2000):
        x, y = rng.multivariate_normal([0, 0], cov, 16).T
        lo, hi = pearson(list(x), list(y))["ci95"]
        hits += lo <= 0.5 <= hi
    assert 0.94 <= hits / 2000 <= 0.96
    c = pearson([1.0, 2.0, 3.0, float("inf"), 5.0], [0.1, 0.3, 0.2, 0.9, 0.5])
    assert c["n"] == 4 and c["spearman"]["n"] == 5 and c["exploratory"]
    r = pearsonr([1.0, 2.0, 3.0, 5.0], [0.1, 0.3, 0.2, 0.5])
    assert c["r"] == pytest.approx(r.statistic)
    z, half = np.arctanh(c["r"]), 1.959964 / np.sqrt(1)
    assert c["ci95"] == pytest.approx([np.tanh(z - half), np.tanh(z + half)])
    from scipy.stats import spearmanr

    assert c["spearman"]["rho"] == pytest.approx(
        spearmanr([1, 2, 3, 5, 4], [0.1, 0.3, 0.2, 0.9, 0.5]).statistic)  # ∞ ranks highest
    assert not pearson(list(range(40)), list(rng.normal(size=40)))["exploratory"]


def test_correlations_are_holm_adjusted_over_the_models_family():
    from benchmark.analysis.core import correlations
    from benchmark.metrics.significance import holm

    rng = np.random.default_rng(1)
    codes = [f"C{i:02d}" for i in range(16)]
    by_country = {c: {"SP": float(rng.uniform(0.1, 3)), "silhouette": {
        "euclidean": {k: float(rng.normal()) for k in ("text", "image", "sum")}}} for c in codes}
    by_country["C00"] = {**by_country["C00"], "SP": None, "SP_note": "∞ (no semantic win)"}
    sil = {"euclidean": {"text_by_language": {"by_label": {}}}}
    out = correlations(by_country, {}, sil)["euclidean"]
    tests = [d for c in out.values() for d in (c, c["spearman"])]
    ps = [d["p"] for d in tests]
    assert [d["p_holm"] for d in tests] == holm(ps)
    assert all(d["holm_family"] == sum(p is not None for p in ps) for d in tests)
    assert out["image"]["n"] == 15 and out["image"]["spearman"]["n"] == 16
