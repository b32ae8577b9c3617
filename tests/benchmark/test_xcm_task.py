"""The 3xcm / 3xcm-i2i tasks end to end through the CLI on planted and authors' data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.synthetic import write_release
from core import datatables
from core.vectors import l2_normalize
from tests.benchmark.synth import PlantedModel, PlantedVectors, planted_world

AUTHORS_CSV = datatables.data_path("authors/xcm-bench.csv")
PLANTED = "tests.benchmark.synth:PlantedModel"


def strict_json(path: Path) -> dict:
    def bad(c):  # NaN / Infinity are not JSON
        raise ValueError(c)

    return json.loads(path.read_text(), parse_constant=bad)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    path = tmp_path_factory.mktemp("planted")
    tr, im = planted_world()
    write_release(path, tr, im, "planted")
    return path, tr


def expected_sp(tr: pd.DataFrame, w: float) -> tuple[float, list[int]]:
    """SP computed independently: the planted vectors, cosine, a plain loop."""
    pv = PlantedVectors()
    codes = [c.code for c in datatables.countries()]

    def img(iid):
        k, ci, v = iid.split("-")
        return l2_normalize(pv.image(int(ci), codes.index(k), int(v)))

    wins = [0, 0, 0]
    for r in tr.itertuples():
        q = l2_normalize(pv.text(int(r.query_concept[7:]), codes.index(r.query_country), w))
        s = [float(q @ img(i)) for i in (r.semantic_image_id, r.cultural_image_id,
                                          r.non_relevant_image_id)]
        wins[int(np.argmax(s))] += 1
    return wins[1] / wins[0], wins


def test_planted_bias_rises_with_culture_weight(planted, tmp_path, monkeypatch):
    path, tr = planted
    sps = []
    for w in (0.0, 0.5, 1.0, 2.0):
        monkeypatch.setenv("XCM_TEST_W", str(w))
        out = tmp_path / f"w{w}"
        assert main(["run", "--model", PLANTED, "--task", "3xcm", "--dataset", str(path),
                     "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache"),
                     "-q"]) == 0
        res = strict_json(out / "planted" / "3xcm.json")
        sp, wins = expected_sp(tr, w)
        o = res["scores"]["overall"]
        assert [o["wins_sem"], o["wins_cul"], o["wins_non"]] == wins
        assert o["SP"] == pytest.approx(sp)
        sps.append(o["SP"])
        assert set(res["scores"]["by_country"]) == {c.code for c in datatables.countries()}
        assert res["task"]["n"] == len(tr) and res["task"]["data_fingerprint"]
        assert res["schema_version"] == 1 and res["model"]["checkpoint"] == f"planted-w{w}"
        lo, hi = o["SP_ci95"]
        assert lo <= o["SP"] <= hi
    assert sps == sorted(sps) and sps[-1] > 4 * sps[0]


def test_second_run_does_no_forward_pass(planted, tmp_path, monkeypatch):
    path, _ = planted
    monkeypatch.setenv("XCM_TEST_W", "1.0")
    args = ["run", "--model", PLANTED, "--task", "3xcm", "--task", "3xcm-i2i", "--dataset",
            str(path), "--output-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c"),
            "-q", "--save-per-triplet"]
    PlantedModel.calls = 0
    assert main(args) == 0
    assert PlantedModel.calls > 0
    first = strict_json(tmp_path / "r" / "planted" / "3xcm-i2i.json")
    # query images already embedded as candidates (same conventions) are not embedded again
    q = first["timings"]["query_image_embedding"]
    assert q["cached"] > 0 and q["cached"] + q["embedded"] == q["unique"]
    PlantedModel.calls = 0
    assert main(args) == 0
    assert PlantedModel.calls == 0
    second = strict_json(tmp_path / "r" / "planted" / "3xcm-i2i.json")
    assert first["scores"] == second["scores"]
    assert second["timings"]["image_embedding"]["embedded"] == 0
    per = pd.read_parquet(tmp_path / "r" / "planted" / "3xcm.per_triplet.parquet")
    assert len(per) == first["task"]["n"]
    assert set(per["winner"]) <= {"semantic", "cultural", "non_relevant"}


def test_authors_csv_counts_per_country(tmp_path):
    """The authors' file with generated stand-in images: counts per country equal the file's."""
    raw = pd.read_csv(AUTHORS_CSV, dtype=str)
    ids = set()
    for p in ("query", "semantically_relevant_candidate", "culturally_relevant_candidate",
              "non_relevant_candidate"):
        ids |= set(raw[f"{p}_image_id"])
    img_dir = tmp_path / "images"
    img_dir.mkdir()
    from PIL import Image

    for i, iid in enumerate(sorted(ids)):
        Image.new("RGB", (4, 4), (i % 256, (i // 256) % 256, 7)).save(img_dir / f"{iid}.png")
    langs = {c.language for c in datatables.countries()}
    q = tmp_path / "queries.csv"
    pd.DataFrame([{"concept": c, "language": lang, "text": f"{c} [{lang}]"}
                  for c in sorted(set(raw["query_concept"])) for lang in sorted(langs)]
                 ).to_csv(q, index=False)
    out = tmp_path / "r"
    assert main(["run", "--model", "hash", "--task", "3xcm", "--triplets-csv", str(AUTHORS_CSV),
                 "--images", str(img_dir), "--query-source", str(q), "--output-dir", str(out),
                 "--cache-dir", str(tmp_path / "c"), "-q", "--bootstrap", "100"]) == 0
    res = strict_json(out / "hash" / "3xcm.json")
    assert res["task"]["n"] == 11723 and res["task"]["source_format"] == "authors-csv"
    want = raw["query_country"].map(lambda n: datatables.country(n).code).value_counts().to_dict()
    got = {k: v["n"] for k, v in res["scores"]["by_country"].items()}
    assert got == want
    assert sum(v["n"] for v in res["scores"]["by_concept"].values()) == 11723
    assert len(res["scores"]["by_concept"]) == raw["query_concept"].nunique()


def test_bad_inputs_are_one_line_and_exit_2(planted, tmp_path, capsys):
    path, tr = planted
    cases = {}
    # a triplet breaking the rules (cultural candidate of the query concept)
    bad = tr.copy()
    bad.loc[3, "cultural_concept"] = bad.loc[3, "query_concept"]
    cases["rules"] = (bad, "t3")
    # an unknown image id
    bad2 = tr.copy()
    bad2.loc[5, "semantic_image_id"] = "nope"
    cases["unknown"] = (bad2, "t5")
    _, im = planted_world()
    for name, (t, row) in cases.items():
        d = tmp_path / name
        write_release(d, t, im, "bad")
        rc = main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(d),
                   "--output-dir", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2
        assert err[-1].startswith("error:") and row in err[-1]
    # missing column
    d = tmp_path / "cols"
    write_release(d, tr.drop(columns=["semantic_country"]), im, "bad")
    assert main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(d),
                 "--output-dir", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "semantic_country" in capsys.readouterr().err
    # undecodable image
    im2 = im.copy()
    im2.loc[0, "image_bytes"] = b"not an image"
    d = tmp_path / "undecodable"
    write_release(d, tr, im2, "bad")
    assert main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(d),
                 "--output-dir", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c2")]) == 2
    assert "undecodable" in capsys.readouterr().err
    # unknown model and task: suggestions
    refused = ["--output-dir", str(tmp_path / "refused"), "--cache-dir", str(tmp_path / "c")]
    assert main(["run", "--model", "clip-l41", "--task", "3xcm", "--dataset", str(path),
                 *refused]) == 2
    assert "did you mean clip-l14" in capsys.readouterr().err
    assert main(["run", "--model", "hash", "--task", "3xmc", "--dataset", str(path),
                 *refused]) == 2
    assert "did you mean 3xcm" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()  # a refused run makes no results folder


# The ten models of the paper's Table 6, by our names (docs/models.md).
PAPER_MODELS = {
    "chinese-clip-l14", "clip-l14", "colqwen2.5-3b-m", "colqwen2.5-7b-m", "colqwen2.5-v0.2",
    "gme-qwen2-2b", "gme-qwen2-7b", "jina-v4", "mclip-xlmr-b16plus", "mclip-xlmr-l14",
}


def test_ls_lists_models_and_tasks(capsys):
    """`ls` prints one line per registered model (name, checkpoint, [paper] exactly for the
    paper's ten) and one per task, and nothing is listed that is not registered."""
    from benchmark import registry

    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    models_part, tasks_part = out.split("\ntasks:\n")
    lines = [ln.split() for ln in models_part.splitlines()[1:] if ln.startswith("  ")]
    by_name = {parts[0]: parts for parts in lines}
    assert len(lines) == len(by_name)  # one line per model, none listed twice
    assert set(by_name) == set(registry.models())
    for name, entry in registry.models().items():
        ck = entry.kwargs.get("checkpoint")
        if ck:
            assert by_name[name][1] == ck, name
    assert {n for n, parts in by_name.items() if "[paper]" in parts} == PAPER_MODELS
    task_lines = [ln.split()[0] for ln in tasks_part.splitlines() if ln.startswith("  ")]
    assert len(task_lines) == len(set(task_lines))
    assert set(task_lines) == set(registry.tasks()) == {"3xcm", "3xcm-i2i", "3xcm-matrix",
                                                        "xm3600-i2t"}


def test_file_hash_memo_rereads_only_changed_files(tmp_path):
    from benchmark.data import images as im

    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(3):
        (folder / f"x{i}.png").write_bytes(bytes([i]) * 10)
    memo = im.FileHashMemo(tmp_path / "memo.sqlite")
    a = im.ImageStore.from_folder(folder, hash_memo=memo).sha256
    (folder / "x1.png").write_bytes(b"changed, longer content")
    b = im.ImageStore.from_folder(folder, hash_memo=memo).sha256
    plain = im.ImageStore.from_folder(folder).sha256
    assert a["x0.png".split(".")[0]] == b["x0"] and a["x1"] != b["x1"]
    assert b == plain  # the memo never changes a hash, it only avoids re-reading


def test_a_corrupt_file_hash_memo_is_started_anew(tmp_path, caplog):
    """The memo is only a memo: a damaged filehash.sqlite is replaced (one warning), the
    hashes are the same as without it, never a sqlite traceback."""
    from benchmark.data import images as im

    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "x0.png").write_bytes(b"0" * 10)
    path = tmp_path / "memo.sqlite"
    path.write_bytes(b"this is not a database" * 200)
    memo = im.FileHashMemo(path)
    assert im.ImageStore.from_folder(folder, hash_memo=memo).sha256 == \
        im.ImageStore.from_folder(folder).sha256
    assert "not a usable file-hash memo" in caplog.text


def test_the_bundled_synthetic_release_is_todays_format(tmp_path):
    """data/synthetic-3xcm is what `python -m benchmark.synthetic` writes today: the release
    columns with each query text's source and reviewer count, the same tables."""
    import pandas as pd

    from benchmark.synthetic import main as synthetic_main
    from core import datatables, release

    bundled = datatables.data_dir() / "synthetic-3xcm"
    assert synthetic_main(["--out", str(tmp_path / "s")]) == 0
    for part in ("triplets/test-00000-of-00001.parquet", "images/train-00000-of-00001.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(bundled / part),
                                      pd.read_parquet(tmp_path / "s" / part))
    trip = pd.read_parquet(bundled / "triplets/test-00000-of-00001.parquet")
    assert list(trip.columns) == release.RELEASE_TRIPLET_COLUMNS
    assert set(trip["query_term_source"]) <= {"generated", "authors", "reviewed", "concept label"}
