"""xm3600-i2t end to end: synthetic XM3600 (official and hub layouts), planted-bias models."""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from benchmark.cache import EmbeddingCache
from benchmark.cli import main
from benchmark.data.xm3600 import load_xm3600
from benchmark.embeddings import MultiVector
from benchmark.models.base import Adapter, ModelSpec
from benchmark.tasks.base import RunContext
from benchmark.tasks.xm3600 import XM3600Config, XM3600ImageToText, parse_ks
from core import datatables
from core.errors import DataError

N_IMAGES = 24
TASK = "xm3600-i2t"


# -- synthetic data -------------------------------------------------------------------------------
def balanced_counts() -> dict[str, int]:
    """Captions per language: 1 for the 21 low-tier languages, 1 or 2 for the 15 others, so
    an image has 21 low and 21 other captions (the authors' 0.5/0.5 target is the unbiased mix)."""
    langs = datatables.languages()
    low = [x.code for x in langs if x.tier == "low"]
    rest = [x.code for x in langs if x.tier != "low"]
    counts = dict.fromkeys(low + rest, 1)
    for code in rest[: len(low) - len(rest)]:
        counts[code] = 2
    return counts


def jpeg(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (8 * i + 4, 128, 64)).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def make_official(root: Path, n: int = N_IMAGES) -> Path:
    """captions.jsonl + images/<key>.jpg; one empty caption to be dropped."""
    codes = [x.code for x in datatables.languages()]
    counts = balanced_counts()
    (root / "images").mkdir(parents=True)
    lines = []
    for i in range(n):
        key = f"img{i:03d}"
        (root / "images" / f"{key}.jpg").write_bytes(jpeg(i))
        obj: dict = {"image/key": key, "image/locale": codes[i % len(codes)]}
        for code in codes:
            obj[code] = {"caption": [f"{key}|{code}|{j}" for j in range(counts[code])],
                         "caption/tokenized": []}
        if i == 0:
            obj["en"]["caption"].append("   ")
        lines.append(json.dumps(obj, ensure_ascii=False))
    (root / "captions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def make_hub(root: Path, official: Path, drop: str | None = None) -> Path:
    """The same data in the mteb/xm3600 layout: one parquet split per language + README."""
    rows = [json.loads(x) for x in (official / "captions.jsonl").read_text().splitlines()]
    codes = [x.code for x in datatables.languages()]
    root.mkdir(parents=True)
    yaml = ["---", "configs:", "- config_name: default", "  data_files:"]
    for code in codes:
        df = pd.DataFrame({
            "image_id": [r["image/key"] for r in rows],
            "image": [{"bytes": (official / "images" / f"{r['image/key']}.jpg").read_bytes(),
                       "path": None} for r in rows],
            "captions": [r[code]["caption"] for r in rows],
            "captions_tokenized": [r[code]["caption"] for r in rows],
            "image_locale": [r["image/locale"] for r in rows],
        })
        df.drop(columns=[drop] if drop else []).to_parquet(root / f"{code}.parquet", index=False)
        yaml += [f"  - split: \"{code}\"", f"    path: {code}.parquet"]  # quoted: YAML reads no as false
    (root / "README.md").write_text("\n".join(yaml + ["---", ""]), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def xm(tmp_path_factory) -> Path:
    return make_official(tmp_path_factory.mktemp("xm3600"))


# -- planted-bias fake models ---------------------------------------------------------------------
NOISE_DIMS = 8
DIM = 32 + 1 + NOISE_DIMS + 1  # identity, bias, noise, padding (constant caption norm)


def _rng(text: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little"))


class PlantedBias(Adapter):
    """dot(image i, caption c of image j in language L) = [i == j] + strength * [L not low]
    + z_i . u_c (query-caption noise, sd ~0.57). Caption vectors have one norm, so cosine
    ranks as the dot product does; images are recognised by their colour."""

    strength = 0.0

    def __init__(self) -> None:
        super().__init__(ModelSpec(name=f"planted-{self.strength}", family="test",
                                   checkpoint=f"planted-{self.strength}", revision="1"),
                         device="cpu", dtype="float32")
        self.low = {x.code for x in datatables.languages() if x.tier == "low"}

    def conventions(self, modality: str, role: str) -> dict:
        return {"strength": self.strength}

    def _image_vec(self, im) -> np.ndarray:
        i = round((im.convert("RGB").getpixel((8, 8))[0] - 4) / 8)
        v = np.zeros(DIM, np.float32)
        v[i], v[32] = 1.0, 1.0
        v[33 : 33 + NOISE_DIMS] = _rng(f"image{i}").standard_normal(NOISE_DIMS)
        return v

    def _text_vec(self, text: str) -> np.ndarray:
        key, lang, _ = text.split("|")
        v = np.zeros(DIM, np.float32)
        v[int(key[3:])] = 1.0
        v[32] = 0.0 if lang in self.low else self.strength
        v[33 : 33 + NOISE_DIMS] = 0.2 * _rng(text).standard_normal(NOISE_DIMS)
        v[-1] = math.sqrt(100.0 - float(v @ v))
        return v

    def _encode_image_batch(self, images, role):
        return np.stack([self._image_vec(im) for im in images])

    def _encode_text_batch(self, texts, role):
        return np.stack([self._text_vec(t) for t in texts])


class PlantedUnbiased(PlantedBias):
    strength = 0.0


class PlantedMild(PlantedBias):
    strength = 0.5


class PlantedStrong(PlantedBias):
    strength = 1.0


class PlantedExtreme(PlantedBias):
    strength = 2.0


class PlantedMulti(PlantedBias):
    """Multi-vector twin: each item is its single vector plus a scaled copy (MaxSim)."""

    strength = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.spec = ModelSpec(name="planted-multi", family="test", checkpoint="planted-multi",
                              revision="1", multi_vector=True)

    def _encode_image_batch(self, images, role):
        return MultiVector.from_list([np.stack([v, 0.5 * v]) for v in
                                      super()._encode_image_batch(images, role)])

    def _encode_text_batch(self, texts, role):
        return MultiVector.from_list([v[None] for v in super()._encode_text_batch(texts, role)])


class UserDot:
    """A user's own adapter (no base class) with its own similarity: raw dot products."""

    def __init__(self) -> None:
        self.inner = PlantedStrong()

    def encode_images(self, images):
        return self.inner._encode_image_batch(list(images), "query")

    def encode_texts(self, texts):
        return self.inner._encode_text_batch(list(texts), "document")

    def similarity(self, q, d):
        return np.asarray(q) @ np.asarray(d).T


def run_task(adapter, data: Path, tmp: Path, **kw):
    cfg = XM3600Config(**{"xm3600": str(data), "chunk_size": 100, "two_stage_check": 8, **kw})
    ctx = RunContext(adapter, EmbeddingCache(tmp / "cache"), tmp / "out")
    task = XM3600ImageToText(cfg)
    return task, task.run(ctx)


# -- readers ----------------------------------------------------------------------------------------
def test_official_reader(xm):
    ds = load_xm3600(xm)
    counts = balanced_counts()
    assert ds.source_format == "official" and len(ds.image_ids) == N_IMAGES
    assert len(ds.captions) == N_IMAGES * sum(counts.values()) == N_IMAGES * 42
    assert ds.notes["dropped_captions"] == 1
    assert set(ds.caption_language) == {x.code for x in datatables.languages()}
    # canonical order: image, then language in table order, then caption order
    assert ds.captions[:2] == ["img000|en|0", "img000|en|1"]
    assert ds.locales[1] == datatables.languages()[1].code
    assert load_xm3600(xm / "captions.jsonl").fingerprint == ds.fingerprint


def test_hub_layout_matches_official(xm, tmp_path):
    hub = make_hub(tmp_path / "hub", xm)
    a, b = load_xm3600(xm), load_xm3600(str(hub))
    assert b.source_format == "hub"
    assert (a.image_ids, a.locales, a.captions, a.caption_language) == \
        (b.image_ids, b.locales, b.captions, b.caption_language)
    assert a.fingerprint == b.fingerprint
    assert b.images.read("img003") == jpeg(3)
    broken = make_hub(tmp_path / "broken", xm, drop="image_locale")
    with pytest.raises(DataError, match=r"lacks columns \['image_locale'\]"):
        load_xm3600(str(broken))


def test_reader_errors(xm, tmp_path):
    with pytest.raises(DataError, match="no captions.jsonl"):
        load_xm3600(tmp_path / "nothing" / "captions.jsonl")
    bad = tmp_path / "bad"
    bad.mkdir()
    good_line = (xm / "captions.jsonl").read_text().splitlines()[0]
    (bad / "captions.jsonl").write_text(good_line + "\n{not json\n")
    with pytest.raises(DataError, match="line 2: not valid JSON"):
        load_xm3600(bad)
    (bad / "captions.jsonl").write_text(json.dumps(
        {"image/key": "a", "image/locale": "en", "xx": {"caption": ["hi"]}}) + "\n")
    with pytest.raises(DataError, match="'xx' is not one of the 36"):
        load_xm3600(bad)
    (bad / "captions.jsonl").write_text(good_line + "\n")
    with pytest.raises(DataError, match="1 of 1 images .* have no file"):
        load_xm3600(bad)
    with pytest.raises(DataError, match="neither a folder nor a hub id"):
        load_xm3600(str(tmp_path / "a" / "b" / "c"))
    with pytest.raises(DataError, match="cannot load 'no-such-org/xm3600'"):
        load_xm3600("no-such-org/xm3600")  # hub offline in tests: one clear line


def test_images_elsewhere(xm, tmp_path):
    (tmp_path / "c").mkdir()
    jsonl = tmp_path / "c" / "captions.jsonl"
    jsonl.write_text((xm / "captions.jsonl").read_text())
    with pytest.raises(DataError, match="have no file"):
        load_xm3600(jsonl)
    ds = load_xm3600(jsonl, images_dir=xm / "images")
    assert ds.fingerprint == load_xm3600(xm).fingerprint


def test_parse_ks():
    assert parse_ks("10,1, 5,5") == [1, 5, 10]
    with pytest.raises(DataError):
        parse_ks("1,x")
    with pytest.raises(DataError):
        parse_ks("0,5")


# -- planted bias -----------------------------------------------------------------------------------
def test_planted_bias_orders_lbkl_and_dlbkl(xm, tmp_path):
    ks = [5, 10, 25, 50, 99]
    outs = [run_task(cls(), xm, tmp_path)[1].scores["overall"]
            for cls in (PlantedUnbiased, PlantedMild, PlantedStrong, PlantedExtreme)]
    for k in ks:
        for m in ("lbkl", "dlbkl"):
            vals = [o[f"{m}@{k}"] for o in outs]
            assert vals == sorted(vals) and len(set(vals)) == 4, (m, k, vals)
    # the bias pushes other images' high-resource captions above the image's own ones
    assert outs[0]["ndcg@10"] > outs[2]["ndcg@10"] > outs[3]["ndcg@10"]
    # LBKL@1 is the same for every model under 0.5/0.5: Q is one-hot either way
    assert {round(o["lbkl@1"], 9) for o in outs} == {round(0.5 * math.log(0.5 / 1e-9 * 0.5), 9)}


@pytest.mark.parametrize("grouping", ["tier", "language"])
def test_planted_bias_other_groupings(xm, tmp_path, grouping):
    outs = [run_task(cls(), xm, tmp_path, grouping=grouping, k="5,25,99")[1]
            for cls in (PlantedUnbiased, PlantedMild, PlantedStrong, PlantedExtreme)]
    # With 36 groups and k < 36 most languages are missing from every list, and each missing
    # one adds P_g ln(P_g / 1e-9): the language grouping only orders the bias from k = 25 on.
    for k in (5, 25, 99) if grouping == "tier" else (25, 99):
        for m in ("lbkl", "dlbkl"):
            vals = [o.scores["overall"][f"{m}@{k}"] for o in outs]
            assert vals == sorted(vals) and len(set(vals)) == 4, (grouping, m, k, vals)
    assert outs[0].task["target"] == "shares of the query image's captions per group"


def test_results_structure_and_counts(xm, tmp_path):
    task, out = run_task(PlantedStrong(), xm, tmp_path, save_topk=True)
    s, t = out.scores, out.task
    assert t["n"] == N_IMAGES and t["n_captions"] == N_IMAGES * 42
    assert t["grouping"] == "authors" and t["target"] == {"low": 0.5, "high_medium": 0.5}
    assert t["epsilon"] == 1e-9 and t["groups"] == ["low", "high_medium"]
    for k in t["ks"]:
        for m in ("accuracy", "ndcg", "ndcg_authors", "lbkl", "dlbkl"):
            assert f"{m}@{k}" in s["overall"]
    assert sum(v["n"] for v in s["by_locale"].values()) == N_IMAGES
    rc = s["retrieved_language_counts"]
    assert rc["ranks"] == 99 and len(rc["by_language"]) == 36
    per_rank = np.array(list(rc["by_language"].values())).sum(axis=0)
    assert per_rank.tolist() == [N_IMAGES] * 99
    assert np.array(list(rc["by_tier"].values())).sum(axis=0).tolist() == [N_IMAGES] * 99
    assert s["pool_tier_counts"]["low"] == 21 * N_IMAGES
    # the parquet top-k agrees with the counts and with accuracy@1
    df = pd.read_parquet(tmp_path / "out" / "planted-1.0" / f"{TASK}.topk.parquet")
    assert len(df) == N_IMAGES * 99
    r1 = df[df["rank"] == 1]
    assert r1["relevant"].mean() == pytest.approx(s["overall"]["accuracy@1"])
    assert r1["caption_language"].value_counts().to_dict() == \
        {c: v[0] for c, v in rc["by_language"].items() if v[0]}
    assert "k" in task.format_table(out) and "grouping=authors" in task.format_table(out)


def test_cache_second_run_embeds_nothing(xm, tmp_path):
    run_task(PlantedMild(), xm, tmp_path)
    _, out = run_task(PlantedMild(), xm, tmp_path)
    assert out.timings["text_embedding"]["embedded"] == 0
    assert out.timings["image_embedding"]["embedded"] == 0


def test_multivector_exact_and_two_stage(xm, tmp_path):
    _, exact = run_task(PlantedMulti(), xm, tmp_path, k="1,10")
    assert exact.settings["retrieval"]["similarity"] == "maxsim"
    _, single = run_task(PlantedStrong(), xm, tmp_path, k="1,10")
    # MaxSim of (v, v/2) against one caption token = v . c: same lists as the single vectors
    assert exact.scores["overall"] == pytest.approx(single.scores["overall"])
    _, two = run_task(PlantedMulti(), xm, tmp_path, k="1,10", two_stage=N_IMAGES * 42)
    agree = two.scores["two_stage_agreement"]
    assert two.settings["retrieval"]["method"] == "two-stage"
    assert agree["n_queries"] == 8 and agree["overlap@10"] == 1.0
    assert two.scores["overall"] == pytest.approx(exact.scores["overall"])


def test_user_adapter_similarity_is_used(xm, tmp_path):
    from benchmark.models.base import UserAdapter

    _, own = run_task(UserAdapter(UserDot(), "tests:UserDot"), xm, tmp_path, k="1,10,99")
    _, ref = run_task(PlantedStrong(), xm, tmp_path, k="1,10,99")
    assert own.settings["retrieval"]["similarity"] == "adapter.similarity"
    # dot = cosine x (image norm) x (constant caption norm): the same ranking per image
    assert own.scores["overall"] == pytest.approx(ref.scores["overall"])


# -- the CLI ----------------------------------------------------------------------------------------
def _strict(text: str):
    def no_const(name):
        raise ValueError(f"non-strict JSON constant {name}")
    return json.loads(text, parse_constant=no_const)


def test_cli_run_writes_strict_json(xm, tmp_path, capsys):
    rc = main(["run", "--model", "tests.benchmark.test_xm3600_task:PlantedStrong", "--task", TASK,
               "--xm3600", str(xm), "--output-dir", str(tmp_path / "res"), "--cache-dir",
               str(tmp_path / "c"), "--k", "1,5,99", "--grouping", "tier", "--save-topk"])
    assert rc == 0
    path = tmp_path / "res" / "planted-1.0" / f"{TASK}.json"
    res = _strict(path.read_text())
    assert res["task"]["name"] == TASK and res["task"]["grouping"] == "tier"
    assert res["task"]["ks"] == [1, 5, 99] and res["scores"]["overall"]["n"] == N_IMAGES
    assert set(res["scores"]["retrieved_language_counts"]["by_tier"]) == {"high", "medium", "low"}
    assert (path.parent / f"{TASK}.topk.parquet").is_file()
    assert "grouping=tier" in capsys.readouterr().out


def test_cli_hash_model_and_bad_input(xm, tmp_path, capsys):
    rc = main(["run", "--model", "hash", "--task", TASK, "--dataset", str(xm), "--output-dir",
               str(tmp_path), "--no-cache", "--k", "1,10", "-q"])
    assert rc == 0
    res = _strict((tmp_path / "hash" / f"{TASK}.json").read_text())
    assert 0.0 <= res["scores"]["overall"]["accuracy@10"] <= 1.0
    capsys.readouterr()
    rc = main(["run", "--model", "hash", "--task", TASK, "--xm3600", str(tmp_path / "none.jsonl"),
               "--output-dir", str(tmp_path), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error: XM3600: no captions.jsonl")
    rc = main(["run", "--model", "hash", "--task", TASK, "--xm3600", str(xm), "--k", "5000",
               "--output-dir", str(tmp_path), "--no-cache"])
    assert rc == 2 and "exceeds the pool size" in capsys.readouterr().err


def test_task_engine_recorded_and_authors_default(xm, tmp_path):
    pytest.importorskip("chromadb", reason="chromadb not installed: pip install -e '.[chromadb]'")
    from benchmark.models.conventions import Conventions

    _, exact = run_task(PlantedStrong(), xm, tmp_path, k="1,10")
    _, hnsw = run_task(PlantedStrong(), xm, tmp_path, k="1,10", engine="chromadb")
    assert exact.settings["retrieval"]["engine"] == "exact"
    r = hnsw.settings["retrieval"]
    assert r["engine"] == "chromadb" and r["hnsw"] == {"hnsw:space": "cosine"}
    assert r["chromadb"] == "1.1.1"
    # the same cached embeddings: the second run embedded nothing
    assert hnsw.timings["text_embedding"]["embedded"] == 0
    assert hnsw.scores["overall"]["accuracy@1"] == pytest.approx(
        exact.scores["overall"]["accuracy@1"])
    ad = PlantedStrong()
    ad.profile = Conventions(implementation="planted", profile="authors")
    _, auth = run_task(ad, xm, tmp_path, k="1,10")
    assert auth.settings["retrieval"]["engine"] == "chromadb"


def test_compare_engines_scores_both_on_the_same_embeddings(xm, tmp_path):
    """--compare-engines: the other engine's overall scores are those of a run with that
    engine, the difference is ours minus theirs metric by metric, nothing embedded twice."""
    pytest.importorskip("chromadb", reason="chromadb not installed: pip install -e '.[chromadb]'")
    _, exact = run_task(PlantedStrong(), xm, tmp_path, k="1,5,10")
    _, hnsw = run_task(PlantedStrong(), xm, tmp_path, k="1,5,10", engine="chromadb",
                       compare_engines=True)
    ec = hnsw.scores["engine_comparison"]
    assert (ec["engine"], ec["other_engine"]) == ("chromadb", "exact")
    assert ec["other_overall"] == exact.scores["overall"]
    assert ec["difference"] == {k: hnsw.scores["overall"][k] - exact.scores["overall"][k]
                                for k in exact.scores["overall"]}
    assert 0.9 <= ec["mean_overlap@10"] <= 1.0
    assert ec["other_settings"]["engine"] == "exact"
    assert hnsw.timings["text_embedding"]["embedded"] == 0
    assert hnsw.timings["image_embedding"]["embedded"] == 0
    # the other way round (a new HNSW index: chromadb builds it with several threads, so
    # its lists can differ from the first index's), and a multi-vector model compares nothing
    _, ex2 = run_task(PlantedStrong(), xm, tmp_path, k="1,5,10", compare_engines=True)
    ec2 = ex2.scores["engine_comparison"]
    assert ex2.scores["overall"] == exact.scores["overall"] and ec2["other_engine"] == "chromadb"
    assert ec2["difference"]["accuracy@1"] == pytest.approx(
        exact.scores["overall"]["accuracy@1"] - ec2["other_overall"]["accuracy@1"])
    _, multi = run_task(PlantedMulti(), xm, tmp_path, k="1,5", compare_engines=True)
    assert multi.scores["engine_comparison"]["other_engine"] is None


def test_compare_engines_without_chromadb_says_so(xm, tmp_path, monkeypatch):
    """Our missing library is no failure of the run: the exact scores stand, the comparison
    says why it is absent."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "chromadb" else real(name, *a))
    _, out = run_task(PlantedStrong(), xm, tmp_path, k="1,5", compare_engines=True)
    ec = out.scores["engine_comparison"]
    assert ec == {"engine": "exact", "other_engine": None,
                  "note": "not compared: chromadb is not installed"}
