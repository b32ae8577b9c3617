"""Concept dedup: exact clusters on planted similarities, and the real FlagEmbedding path."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from builder import concept_dedup
from builder.catalog import Catalog
from builder.concept_dedup import clusters, cosine_matrix, run_concept_dedup
from builder.concepts import add_concept, add_instances
from builder.text_embedders import BGEM3Encoder, HashEncoder, make_encoder
from builder.workdir import WorkDir

DIM = 12


def _unit(dims: dict[int, float]) -> np.ndarray:
    v = np.zeros(DIM)
    for i, x in dims.items():
        v[i] = x
    return v


T = math.acos(0.95)
_s = math.sqrt(1 - 0.99**2)
_y = (0.97 - 0.99 * 0.96) / _s
PLANTED = {
    # chain a~b (0.95), b~c (0.95), a~c = cos(2t) = 0.805 < 0.92: one cluster through b
    "a": _unit({0: 1.0}),
    "b": _unit({0: math.cos(T), 1: math.sin(T)}),
    "c": _unit({0: math.cos(2 * T), 1: math.sin(2 * T)}),
    # d~e at 0.93 (>= 0.92), e curated
    "d": _unit({2: 1.0}),
    "e": _unit({2: 0.93, 3: math.sqrt(1 - 0.93**2)}),
    # f~g at 0.91: below the threshold, not linked
    "f": _unit({4: 1.0}),
    "g": _unit({4: 0.91, 5: math.sqrt(1 - 0.91**2)}),
    # two curated h~i (0.99) both kept; j: 0.96 to h, 0.97 to i -> merged into i
    "h": _unit({6: 1.0}),
    "i": _unit({6: 0.99, 7: _s}),
    "j": _unit({6: 0.96, 7: _y, 8: math.sqrt(1 - 0.96**2 - _y**2)}),
    "k": _unit({9: 1.0}),
}
FREQ = {"a": 5, "b": 3, "c": 1, "d": 2, "f": 1, "g": 1, "j": 2, "k": 1}
CURATED = {"e", "h", "i"}


def _catalog(tmp_path, curated=CURATED) -> Catalog:
    cat = Catalog(WorkDir.open(tmp_path / "w"))
    with cat.tx() as con:
        for name in PLANTED:
            src = "curated" if name in curated else "generated"
            add_concept(con, name, src)
            add_instances(con, name, 1, {f"C{n:02d}": "x" for n in range(FREQ.get(name, 0))})
    return cat


def _state(cat: Catalog) -> dict:
    return {
        r["name"]: (
            r["status"],
            r["merged_into"],
            None if r["similarity"] is None else round(r["similarity"], 4),
            r["reason"],
        )
        for r in cat.query("SELECT * FROM concepts")
    }


def test_planted_clusters_exactly(tmp_path):
    cat = _catalog(tmp_path)
    counts = run_concept_dedup(cat, HashEncoder(DIM, PLANTED), threshold=0.92)
    merged = "cosine >= 0.92 cluster"
    assert _state(cat) == {
        "a": ("dropped", None, None, "not in the curated list"),  # most frequent of a,b,c
        "b": ("merged", "a", 0.95, merged),
        "c": ("merged", "a", 0.805, merged),  # below the threshold: joined through b
        "d": ("merged", "e", 0.93, merged),
        "e": ("kept", None, None, None),
        "f": ("dropped", None, None, "not in the curated list"),
        "g": ("dropped", None, None, "not in the curated list"),
        "h": ("kept", None, None, None),
        "i": ("kept", None, None, None),
        "j": ("merged", "i", 0.97, merged),
        "k": ("dropped", None, None, "not in the curated list"),
    }
    assert counts["by_status"] == {"dropped": 4, "merged": 4, "kept": 3}
    assert counts["clusters"] == 6
    with open(cat.workdir.exports_dir / "concept_merges.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    got = {
        (
            r["concept"],
            r["merged_into"],
            r["similarity"][:6],
            r["linked_by"],
            r["link_similarity"][:6],
            r["cluster_size"],
        )
        for r in rows
    }
    assert got == {
        ("b", "a", "0.9500", "a", "0.9500", "3"),
        ("c", "a", "0.8050", "b", "0.9500", "3"),
        ("d", "e", "0.9300", "e", "0.9300", "2"),
        ("j", "i", "0.9700", "i", "0.9700", "3"),
    }
    run = cat.last_run("concept_dedup")
    assert run["status"] == "done" and "11 concepts -> 3 kept" in run["summary"]


def test_without_curated_the_most_frequent_is_kept(tmp_path):
    cat = _catalog(tmp_path, curated=set())
    run_concept_dedup(cat, HashEncoder(DIM, PLANTED), threshold=0.92)
    st = _state(cat)
    assert {n for n, s in st.items() if s[0] == "kept"} == {"a", "d", "f", "g", "j", "k"}
    # h, i, j: h has no instances, j has 2 -> j is the representative
    assert st["h"][:3] == ("merged", "j", 0.96) and st["i"][:3] == ("merged", "j", 0.97)
    assert st["e"][:3] == ("merged", "d", 0.93)


def test_keep_uncurated_and_rerun_is_idempotent(tmp_path):
    cat = _catalog(tmp_path)
    run_concept_dedup(cat, HashEncoder(DIM, PLANTED), 0.92, keep_uncurated=True)
    first = _state(cat)
    assert first["a"][0] == "kept" and first["k"][0] == "kept"
    run_concept_dedup(cat, HashEncoder(DIM, PLANTED), 0.92, keep_uncurated=True)
    assert _state(cat) == first


def test_threshold_edges_and_bad_input(tmp_path):
    sim = cosine_matrix(HashEncoder(DIM, PLANTED).encode(list(PLANTED)))
    assert sim.dtype == np.float32
    names = list(PLANTED)
    assert [[names[i] for i in g] for g in clusters(sim, 0.90)] == [
        ["a", "b", "c"],
        ["d", "e"],
        ["f", "g"],
        ["h", "i", "j"],
        ["k"],
    ]
    assert len(clusters(sim, 1.0)) == len(names)
    cat = _catalog(tmp_path)
    with pytest.raises(ValueError, match="threshold"):
        run_concept_dedup(cat, HashEncoder(DIM, PLANTED), threshold=1.5)
    empty = Catalog(WorkDir.open(tmp_path / "empty"))
    assert concept_dedup.main(["--workdir", str(empty.workdir.root), "--embedder", "hash"]) == 2


def test_hash_encoder_is_deterministic():
    e = make_encoder("hash:16")
    v = e.encode(["food", "train", "food"])
    assert v.dtype == np.float32 and v.shape == (3, 16)
    assert np.array_equal(v[0], v[2]) and abs(float(v[0] @ v[1])) < 0.9
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-6)


@pytest.mark.slow
def test_real_flagembedding_on_a_tiny_xlmr(tmp_path):
    from tests.builder.tiny_bge import build_tiny_bge_m3

    names = [
        "train",
        "train station",
        "wedding",
        "marriage ceremony",
        "food",
        "street food",
        "snack",
        "bus",
        "bus station",
    ]
    path = build_tiny_bge_m3(tmp_path / "bge", [" ".join(names)] * 10 + names * 5)
    enc = BGEM3Encoder(str(path), device="cpu", batch_size=4)
    vecs = enc.encode(names)
    assert vecs.dtype == np.float32 and vecs.shape == (len(names), 32)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    sim = cosine_matrix(vecs)
    assert float(np.triu(sim, 1).max()) < 0.99999  # random init still separates the texts
    # a threshold between the distinct similarities: the stage must match a naive BFS
    vals = np.unique(np.round(sim[np.triu_indices(len(names), 1)], 5))
    thr = float((vals[len(vals) // 2] + vals[len(vals) // 2 + 1]) / 2)
    cat = Catalog(WorkDir.open(tmp_path / "w"))
    with cat.tx() as con:
        for n in names:
            add_concept(con, n, "generated")
    run_concept_dedup(cat, enc, threshold=thr)
    order = sorted(names)
    ref_sim = cosine_matrix(enc.encode(order))
    seen, comps = set(), []
    for s in range(len(order)):
        if s in seen:
            continue
        stack, comp = [s], set()
        while stack:
            i = stack.pop()
            if i in comp:
                continue
            comp.add(i)
            stack += [j for j in range(len(order)) if j != i and ref_sim[i, j] >= thr]
        seen |= comp
        comps.append({order[i] for i in comp})
    kept = {r["name"] for r in cat.query("SELECT name FROM concepts WHERE status='kept'")}
    assert len(kept) == len(comps) and all(len(kept & c) == 1 for c in comps)
    for r in cat.query("SELECT * FROM concepts WHERE status='merged'"):
        comp = next(c for c in comps if r["name"] in c)
        assert r["merged_into"] in comp and r["merged_into"] in kept


def test_missing_bge_m3_weights_are_one_line_naming_the_fix(tmp_path, capsys, monkeypatch):
    """As image_dedup and benchmark run: where the weights were looked for and how to provide
    them, exit 2, no traceback (it was 'internal error' and a 129-line log after 59 s)."""
    from builder import concepts

    pytest.importorskip("FlagEmbedding")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    wd = str(tmp_path / "w")
    assert concepts.main(["--workdir", wd, "--llm", "offline", "--countries", "THA"]) == 0
    capsys.readouterr()
    assert concept_dedup.main(["--workdir", wd]) == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: --embedder bge-m3: weights BAAI/bge-m3 not found")
    assert "Fix: " in line and "XCM_WEIGHTS_DIR=WEIGHTS" in line and "--embedder hash" in line
    assert "Traceback" not in err and "internal error" not in err
