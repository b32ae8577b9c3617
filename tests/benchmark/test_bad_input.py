"""Bad evaluator input is one line on stderr and exit 2, never a result (issue 15), and the
release validator rejects the same releases with the same words (one rule set)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmark.cli import main
from benchmark.synthetic import write_release
from core import datatables
from tests.benchmark.synth import planted_world
from triplets import cli as triplets_cli

AUTHORS = datatables.data_path("authors/xcm-bench.csv")


def release(path: Path, tr: pd.DataFrame, im: pd.DataFrame) -> Path:
    """A release folder with a build record (seed recorded), as an export writes one."""
    write_release(path, tr, im, "bad input test")
    (path / "build.json").write_text(json.dumps({"sampling": {"seed": 0,
                                                              "distinct_language": False}}))
    return path


def evaluate(args: list[str], tmp: Path, capsys) -> tuple[int, str]:
    rc = main(["run", "--model", "hash", "--task", "3xcm", *args, "--output-dir",
               str(tmp / "out"), "--cache-dir", str(tmp / "cache"), "-q", "--bootstrap", "20"])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err[-1] if err else ""


def validate(args: list[str], capsys) -> tuple[int, str, str]:
    rc = triplets_cli.main(["validate", *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err.strip()


@pytest.fixture(scope="module")
def world():
    return planted_world(n_concepts=4, per_cell=2)


def test_a_clean_release_passes_both(world, tmp_path, capsys):
    tr, im = world
    d = release(tmp_path / "ok", tr, im)
    assert validate(["--release", str(d)], capsys)[0] == 0
    assert evaluate(["--dataset", str(d)], tmp_path, capsys)[0] == 0
    res = json.loads((tmp_path / "out" / "hash" / "3xcm.json").read_text())
    assert res["task"]["n"] == len(tr) and res["task"]["query_texts"]["source"] == "release"


def _rules_in_line(line: str) -> set[str]:
    m = re.search(r"triplet\(s\) \(([^)]*)\)", line)
    return set(m.group(1).split(", ")) if m else set()


@pytest.mark.parametrize("case", ["duplicate_id", "duplicate_row", "empty_text", "null_text"])
def test_row_faults_rejected_by_both_with_the_same_rule(case, world, tmp_path, capsys):
    tr, im = world
    tr = tr.copy()
    if case == "duplicate_id":  # the same row twice
        tr = pd.concat([tr, tr.iloc[[3]]], ignore_index=True)
        rule, row = "duplicate_triplet_id", "t3"
    elif case == "duplicate_row":  # the same triplet under another id
        extra = tr.iloc[[3]].copy()
        extra["triplet_id"] = "t-copy"
        tr = pd.concat([tr, extra], ignore_index=True)
        rule, row = "duplicate_triplet", "t-copy"
    else:
        tr["query_text"] = tr["query_text"].astype(object)
        tr.loc[5, "query_text"] = "" if case == "empty_text" else None
        rule, row = "query_text_empty", "t5"
    d = release(tmp_path / case, tr, im)
    rc, line = evaluate(["--dataset", str(d)], tmp_path, capsys)
    assert rc == 2 and line.startswith("error:") and row in line
    assert not (tmp_path / "out" / "hash" / "3xcm.json").exists()
    vrc, out, _ = validate(["--release", str(d)], capsys)
    reported = {ln.split("\t")[1] for ln in out.splitlines() if ln.count("\t") >= 1}
    assert vrc == 1 and reported == {rule} == _rules_in_line(line)
    assert any(ln.startswith(f"{row}\t{rule}") for ln in out.splitlines())


def test_header_only_is_not_a_result_with_n_0(world, tmp_path, capsys):
    tr, im = world
    d = release(tmp_path / "empty", tr.iloc[:0], im)
    rc, line = evaluate(["--dataset", str(d)], tmp_path, capsys)
    assert rc == 2 and line.endswith("no triplets (a header and no rows)")
    vrc, _, verr = validate(["--release", str(d)], capsys)
    assert vrc == 2 and verr == line
    csv = tmp_path / "header.csv"
    csv.write_text(AUTHORS.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    (tmp_path / "imgs").mkdir()
    rc, line = evaluate(["--triplets-csv", str(csv), "--images", str(tmp_path / "imgs")],
                        tmp_path, capsys)
    assert rc == 2 and line == f"error: {csv}: no triplets (a header and no rows)"
    vrc, _, verr = validate(["--authors-csv", str(csv)], capsys)
    assert vrc == 2 and verr == line


def _rewrite_images(d: Path, fn) -> None:
    p = next((d / "images").glob("*.parquet"))
    pq.write_table(fn(pq.read_table(p)), p)


def test_tags_stored_as_text(world, tmp_path, capsys):
    tr, im = world
    d = release(tmp_path / "tags", tr, im)

    def as_text(t: pa.Table) -> pa.Table:
        text = pa.array([",".join(x) for x in t.column("tags").to_pylist()])
        return t.set_column(t.column_names.index("tags"), "tags", text)

    _rewrite_images(d, as_text)
    rc, line = evaluate(["--dataset", str(d)], tmp_path, capsys)
    assert rc == 2 and "column tags must hold lists of concepts" in line
    vrc, _, verr = validate(["--release", str(d)], capsys)
    assert vrc == 2 and verr == line


def test_missing_column_the_card_still_lists(world, tmp_path, capsys):
    import datasets
    import yaml

    tr, im = world
    d = release(tmp_path / "cols", tr, im)
    card = (d / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    feats = datasets.Features({c: datasets.Value("string") for c in tr.columns})
    meta["dataset_info"] = [{"config_name": "triplets", "features": feats._to_yaml_list()}]
    (d / "README.md").write_text("---\n" + yaml.safe_dump(meta) + "---\n" + card.split("---", 2)[2])
    p = next((d / "triplets").glob("*.parquet"))
    pq.write_table(pq.read_table(p).drop(["semantic_image_id"]), p)
    rc, line = evaluate(["--dataset", str(d)], tmp_path, capsys)
    assert rc == 2 and "missing column(s) semantic_image_id" in line
    assert "rule violation" not in line
    vrc, _, verr = validate(["--release", str(d)], capsys)
    assert vrc == 2 and verr == line


def _authors_subset(tmp: Path, n: int = 30) -> tuple[Path, Path, pd.DataFrame]:
    raw = pd.read_csv(AUTHORS, dtype=str, keep_default_na=False).iloc[:n]
    from PIL import Image

    imgs = tmp / "imgs"
    imgs.mkdir(exist_ok=True)
    ids = set()
    for c in raw.columns:
        if c.endswith("_image_id"):
            ids |= set(raw[c])
    for i, iid in enumerate(sorted(ids)):
        Image.new("RGB", (4, 4), (i % 256, 3, 9)).save(imgs / f"{iid}.png")
    csv = tmp / "subset.csv"
    raw.to_csv(csv, index=False)
    return csv, imgs, raw


def test_duplicate_rows_in_the_authors_csv(tmp_path, capsys):
    csv, imgs, raw = _authors_subset(tmp_path)
    pd.concat([raw, raw.iloc[[4]]]).to_csv(csv, index=False)
    rc, line = evaluate(["--triplets-csv", str(csv), "--images", str(imgs)], tmp_path, capsys)
    assert rc == 2 and "duplicate_triplet_id" in line and raw["query_index"][4] in line
    vrc, out, _ = validate(["--authors-csv", str(csv)], capsys)
    assert vrc == 1 and f"{raw['query_index'][4]}\tduplicate_triplet_id" in out


def test_queries_file_faults(tmp_path, capsys):
    csv, imgs, raw = _authors_subset(tmp_path)
    args = ["--triplets-csv", str(csv), "--images", str(imgs), "--query-source"]
    q = tmp_path / "q.csv"
    q.write_bytes("concept,country,text\ntrain,Argentina,tr\xe9n\n".encode("latin-1"))
    rc, line = evaluate([*args, str(q)], tmp_path, capsys)
    assert rc == 2 and "not UTF-8 text (byte 0xe9" in line
    q.write_text("concept,country,text\ntrain,Argentina,\n", encoding="utf-8")
    rc, line = evaluate([*args, str(q)], tmp_path, capsys)
    assert rc == 2 and "empty query text in 1 row(s) (first: line 2)" in line
    q.write_text("concept,country,text\n", encoding="utf-8")
    rc, line = evaluate([*args, str(q)], tmp_path, capsys)
    assert rc == 2 and "no query texts (a header and no rows)" in line
    q.write_text("concept,country,text\ntrain,Argentina,tren\ntrain,ARG,ferrocarril\n")
    rc, line = evaluate([*args, str(q)], tmp_path, capsys)
    assert rc == 2 and "two different texts for 1 concept/country pair(s)" in line
    q.write_text("concept,text\ntrain,tren\n")
    rc, line = evaluate([*args, str(q)], tmp_path, capsys)
    assert rc == 2 and "expected columns concept,country,text" in line
    # a valid file that lacks a pair the triplets need: named
    q.write_text("concept,country,text\ntrain,Argentina,tren\n")
    rc, line = evaluate([*args, str(q)], tmp_path, capsys)
    assert rc == 2 and "no query text in" in line and "concept/country pair(s)" in line


def _one_image(im: pd.DataFrame, data: bytes) -> tuple[pd.DataFrame, str]:
    from core.files import sha256_bytes

    im = im.copy()
    iid = im.loc[0, "image_id"]
    im.at[0, "image_bytes"] = data
    im.at[0, "sha256"] = sha256_bytes(data)  # the bytes match their hash: only decoding fails
    return im, iid


@pytest.mark.parametrize("case", ["truncated", "zero", "bomb"])
def test_image_faults_are_refused_by_both(case, world, tmp_path, capsys):
    """One rule set (issue 22): `triplets validate --release` used to pass releases whose
    images `benchmark run` refuses."""
    from tests.benchmark.test_image_gate import bomb_png

    tr, im = world
    good = im.loc[0, "image_bytes"]
    if case == "truncated":
        data = good[: len(good) // 2]
    elif case == "zero":
        data = b"GIF89a\x00\x00\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x00\x00\x00\x00\x00;"
    else:
        data = bomb_png(16000)
    im, iid = _one_image(im, data)
    d = release(tmp_path / case, tr, im)
    rc, line = evaluate(["--dataset", str(d)], tmp_path, capsys)
    assert rc == 2 and iid in line and ("undecodable" in line or "refused" in line)
    vrc, out, _ = validate(["--release", str(d)], capsys)
    assert vrc == 1
    bad = [x for x in out.splitlines() if "\timage_bytes\t" in x]
    assert len(bad) == 1 and bad[0].startswith(f"{iid}\timage_bytes\t")


@pytest.mark.parametrize("tags,hint", [
    ([""], "an empty tag"),
    (["no such concept"], "'no such concept' is not a concept"),
    (["CONCEPT1"], "'CONCEPT1' (the concept is 'concept1')"),
])
def test_tags_outside_the_vocabulary_are_refused_by_both(tags, hint, world, tmp_path, capsys):
    tr, im = world
    im = im.copy()
    im["tags"] = im["tags"].astype(object)
    im.at[3, "tags"] = tags
    d = release(tmp_path / "tags", tr, im)
    rc, line = evaluate(["--dataset", str(d)], tmp_path, capsys)
    assert rc == 2 and line.endswith(f"rule tag_vocabulary: 1 image(s) with tags that are not "
                                     f"concepts of the release; first: {im.loc[3, 'image_id']}: "
                                     f"{hint}")
    vrc, _, verr = validate(["--release", str(d)], capsys)
    assert vrc == 2 and verr == line


@pytest.mark.parametrize("row,fields", [("train,Argentina,tr,en", 4), ("train,Argentina", 2)])
def test_a_queries_row_with_more_or_fewer_fields_is_refused(row, fields, tmp_path, capsys):
    """`food,DEU,Es,sen` used to score the text "Es" (issue 22)."""
    csv, imgs, raw = _authors_subset(tmp_path)
    q = tmp_path / "q.csv"
    q.write_text(f"concept,country,text\ntrain,ARG,tren\n{row}\n", encoding="utf-8")
    rc, line = evaluate(["--triplets-csv", str(csv), "--images", str(imgs), "--query-source", str(q)],
                        tmp_path, capsys)
    assert rc == 2 and line.endswith(f"--query-source {q}: line 3 has {fields} field(s), the header "
                                     "has 3 (concept,country,text)")


def test_an_authors_csv_row_with_an_extra_field_is_refused(tmp_path, capsys):
    csv, imgs, raw = _authors_subset(tmp_path)
    lines = csv.read_text(encoding="utf-8").splitlines()
    lines[4] += ",extra"
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc, line = evaluate(["--triplets-csv", str(csv), "--images", str(imgs)], tmp_path, capsys)
    n = len(raw.columns)
    assert rc == 2 and f"{csv}: line 5 has {n + 1} field(s), the header has {n}" in line


def test_a_2_gb_image_file_and_two_files_for_one_id_are_one_line(tmp_path, capsys):
    csv, imgs, raw = _authors_subset(tmp_path)
    iid = raw.loc[0, "query_image_id"]
    (imgs / f"{iid}.jpg").write_bytes((imgs / f"{iid}.png").read_bytes())
    rc, line = evaluate(["--triplets-csv", str(csv), "--images", str(imgs)], tmp_path, capsys)
    assert rc == 2 and line.endswith(f"first: {iid}: {iid}.jpg and {iid}.png (keep one file "
                                     "per id)")
    (imgs / f"{iid}.jpg").unlink()
    with open(imgs / f"{iid}.png", "wb") as f:
        f.truncate(2 * 1024**3)
    rc, line = evaluate(["--triplets-csv", str(csv), "--images", str(imgs)], tmp_path, capsys)
    assert rc == 2 and line.endswith(f"(not read), first: {iid} (file of {2 * 1024**3} bytes)")
