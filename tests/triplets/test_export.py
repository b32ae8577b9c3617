"""The release: export, offline load_dataset round trip, validation, evaluator, the card's
metadata, publish (errors; exact replacement on a fake Hub on 127.0.0.1)."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest
import yaml

from builder.catalog import Catalog
from builder.query_terms import upsert_terms
from core.query_table import QueryTerm
from tests.worlds import build_world
from triplets import cli
from triplets.export import export_release
from triplets.pool import load_pool
from triplets.sample_run import run_sample
from triplets.sampling import SampleConfig

CONCEPTS = ["train", "taxi", "craft", "food"]


def _tags(c, k, i):
    return [c, "food"] if (c != "food" and i == 1) else [c]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    wd = build_world(root / "w", CONCEPTS, per_cell=2, tag_fn=_tags)
    run_sample(wd, SampleConfig(seed=17))
    total = sum(p.stat().st_size for p in wd.images_dir.rglob("*.png"))
    res = export_release(wd, root / "rel", shard_bytes=total // 3 + 1)
    return wd, res


def _load(path, config, split, tmp_path):
    import datasets

    return datasets.load_dataset(str(path), config, split=split, cache_dir=str(tmp_path / "c"))


def test_release_loads_offline_and_round_trips_every_column(release, tmp_path):
    import datasets

    wd, res = release
    assert res.n_images == 128 and res.n_triplets == 128
    shards = sorted(p.name for p in (res.out / "images").glob("*.parquet"))
    assert res.shards >= 3 and shards[-1] == f"train-{res.shards - 1:05d}-of-{res.shards:05d}.parquet"
    trip = _load(res.out, "triplets", "test", tmp_path)
    with (wd.exports_dir / "triplets.csv").open(newline="", encoding="utf-8") as f:
        expected = list(csv.DictReader(f))
    assert trip.column_names == list(expected[0])
    for r in expected:  # the CSV holds text; the parquet column is an int32
        r["query_term_reviewers"] = int(r["query_term_reviewers"])
    assert [dict(r) for r in trip] == expected
    images = _load(res.out, "images", "train", tmp_path)
    assert images.column_names == ["image_id", "image", "concept", "country", "query_language",
                                   "search_query", "search_rank", "source_url", "page_url",
                                   "title", "tags", "sha256", "width", "height"]
    with Catalog.open(wd) as cat:
        pool = {im.image_id: im for im in load_pool(cat).images}
    assert sorted(images["image_id"]) == sorted(pool)
    raw = images.cast_column("image", datasets.Image(decode=False))
    for row, enc in zip(images, raw, strict=True):
        im = pool[row["image_id"]]
        data = enc["image"]["bytes"]
        assert data == wd.image_path(im.sha256, "png").read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["sha256"] == im.sha256
        assert row["image"].size == (row["width"], row["height"]) == (8, 8)
        assert (row["concept"], row["country"], row["query_language"], row["search_query"],
                row["search_rank"], row["source_url"], row["page_url"], row["title"],
                tuple(row["tags"])) == (im.concept, im.country, im.query_language,
                                        im.search_query, im.search_rank, im.source_url,
                                        im.page_url, im.title, im.tags)


def test_card_build_record_and_provenance(release):
    wd, res = release
    text = (res.out / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(text.split("---", 2)[1])
    assert [c["config_name"] for c in meta["configs"]] == ["triplets", "images"]
    info = {d["config_name"]: d for d in meta["dataset_info"]}
    assert info["triplets"]["splits"][0]["num_examples"] == 128
    assert info["images"]["splits"][0] == {"name": "train", **{
        "num_bytes": info["images"]["splits"][0]["num_bytes"], "num_examples": 128}}
    assert "seed 17, 1 triplet(s) per kept image" in text
    assert "| USA | United States | 8 | 8 |" in text
    build = json.loads((res.out / "build.json").read_text())
    assert build["sampling"] == {"seed": 17, "per_image": 1, "distinct_language": True}
    assert [r["stage"] for r in build["stage_runs"]] == ["triplets"]
    n = build["numbers"]
    assert n["images_by_country"]["JPN"] == 8 and n["triplets_by_concept"]["taxi"] == 32
    assert n["tags"]["tagged_images"] == 128
    assert n["tags"]["share_with_several_tags"] == round(48 / 128, 4)
    assert n["items_by_status"] == {"ok": 128}
    prov = [json.loads(x) for x in (res.out / "provenance.jsonl").read_text().splitlines()]
    assert len(prov) == 128 and prov[0]["backend"] == "folder" and "reviews" in prov[0]
    assert oct((res.out / "README.md").stat().st_mode & 0o777) == "0o644"


def test_validate_release_and_a_tampered_copy(release, tmp_path, capsys):
    import shutil

    import pyarrow.parquet as pq

    _, res = release
    assert cli.main(["validate", "--release", str(res.out)]) == 0
    assert "128 triplets: every rule holds" in capsys.readouterr().out
    copy = tmp_path / "rel"
    shutil.copytree(res.out, copy)
    path = next((copy / "triplets").glob("*.parquet"))
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[5]["non_relevant_country"] = rows[5]["query_country"]
    pq.write_table(table.from_pylist(rows, schema=table.schema), path)
    assert cli.main(["validate", "--release", str(copy)]) == 1
    out = capsys.readouterr().out
    bad = {ln.split("\t")[0] for ln in out.splitlines() if "\t" in ln}
    assert bad == {rows[5]["triplet_id"]}
    assert "non_relevant_same_country" in out and "non_relevant_image_country" in out
    # an image whose embedded bytes no longer match its sha256 is reported by image id
    ipath = next((copy / "images").glob("*.parquet"))
    itable = pq.read_table(ipath)
    irows = itable.to_pylist()
    irows[0]["image"] = {"bytes": irows[0]["image"]["bytes"] + b"x", "path": None}
    pq.write_table(itable.from_pylist(irows, schema=itable.schema), ipath)
    assert cli.main(["validate", "--release", str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"{irows[0]['image_id']}\timage_bytes\tbytes do not match sha256" in out


def test_the_evaluator_scores_the_release(release, tmp_path, capsys):
    from benchmark import cli as bench

    _, res = release
    rc = bench.main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(res.out),
                     "--output-dir", str(tmp_path / "results"), "--cache-dir",
                     str(tmp_path / "emb")])
    assert rc == 0
    out = json.loads((tmp_path / "results" / "hash" / "3xcm.json").read_text())
    assert out["task"]["n"] == 128


def test_export_refuses_broken_or_empty_workdirs(tmp_path, capsys):
    wd = build_world(tmp_path / "w", ["train", "taxi"], per_cell=1)
    assert cli.main(["export", "--workdir", str(wd.root), "--out", str(tmp_path / "r")]) == 2
    assert "run `python -m triplets sample` first" in capsys.readouterr().err
    res = run_sample(wd, SampleConfig(seed=1))
    with Catalog.open(wd) as cat:
        cat.con.execute("UPDATE triplets SET semantic_item_id=query_item_id WHERE triplet_id=?",
                        (res.triplets[0].triplet_id,))
    assert cli.main(["export", "--workdir", str(wd.root), "--out", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert f"{res.triplets[0].triplet_id}\tsemantic_same_country" in out
    assert not (tmp_path / "r").exists()


def test_publish_errors_are_one_line_exit_2(release, tmp_path, monkeypatch, capsys):
    _, res = release
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    assert cli.main(["publish", "--out", str(res.out), "--repo-id", "org/3xcm"]) == 2
    assert "set HF_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("HF_TOKEN", "hf_test_not_a_real_token")
    assert cli.main(["publish", "--out", str(res.out), "--repo-id", "org/3xcm"]) == 2
    err = capsys.readouterr().err
    assert "HF_HUB_OFFLINE" in err and "hf_test" not in err
    # the hub unreachable (or refused by the library's offline mode): one line, no token
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert cli.main(["publish", "--out", str(res.out), "--repo-id", "org/3xcm"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot publish to org/3xcm") and "hf_test" not in err
    assert len(err.strip().splitlines()) == 1
    assert cli.main(["publish", "--out", str(tmp_path), "--repo-id", "org/3xcm"]) == 2
    assert cli.main(["publish", "--out", str(res.out), "--repo-id", "bad"]) == 2


def test_publish_bug_propagates(release, monkeypatch):
    """Only the Hub's request errors are the user's one line; a bug in the upload is not."""
    import huggingface_hub

    _, res = release
    monkeypatch.setenv("HF_TOKEN", "hf_test_not_a_real_token")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def boom(self, *a, **k):
        raise KeyError("a bug, not the user's input")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", boom)
    with pytest.raises(KeyError, match="a bug"):
        cli.main(["publish", "--out", str(res.out), "--repo-id", "org/3xcm"])


def test_images_config_bytes_are_embedded_not_paths(release):
    import pyarrow.parquet as pq
    from PIL import Image

    _, res = release
    for path in (res.out / "images").glob("*.parquet"):
        for cell in pq.read_table(path, columns=["image"]).column("image").to_pylist():
            assert cell["bytes"] and Image.open(io.BytesIO(cell["bytes"])).size == (8, 8)


def _hub_env(monkeypatch, hub):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_TOKEN", hub.token)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # read at import
    monkeypatch.setenv("HF_ENDPOINT", hub.url)  # publish reads it at call time


@pytest.mark.integration
def test_publish_replaces_the_release_exactly(release, tmp_path, monkeypatch, capsys):
    """A second release with fewer image shards: the Hub ends with exactly its files (the old
    shards gone, .gitattributes kept), in one commit, and the card's globs load it once."""
    from core.files import OWNER_MARKER
    from tests.fakes.hub import FakeHub
    from triplets.publish import release_files

    wd, _ = release
    out = tmp_path / "rel"
    total = sum(p.stat().st_size for p in wd.images_dir.rglob("*.png"))
    export_release(wd, out, shard_bytes=total // 3 + 1)  # as the fixture: several image shards
    old = release_files(out)
    with FakeHub() as hub:
        _hub_env(monkeypatch, hub)
        assert cli.main(["publish", "--out", str(out), "--repo-id", "org/3xcm"]) == 0
        assert capsys.readouterr().out.startswith(f"published: {hub.url}/datasets/org/3xcm/commit/")
        hub.repos["org/3xcm"].files[".gitattributes"] = b"*.parquet filter=lfs\n"
        assert set(hub.files("org/3xcm")) == {*old, ".gitattributes", OWNER_MARKER}
        second = export_release(wd, out, shard_bytes=1 << 40)  # one image shard now
        new = release_files(out)
        assert second.shards == 1 and len([p for p in old if p.startswith("images/")]) >= 3
        assert cli.main(["publish", "--out", str(out), "--repo-id", "org/3xcm"]) == 0
        files = hub.files("org/3xcm")
        commits = hub.commits("org/3xcm")
    assert set(files) == {*new, ".gitattributes", OWNER_MARKER}  # exactly the new release
    assert not [p for p in old if p.startswith("images/") and p in files]
    assert all(files[p] == (out / p).read_bytes() for p in new)
    assert len(commits) == 2  # one commit per release: no reader sees a mix of the two
    deleted = sorted(p for op, p in commits[1]["ops"] if op == "deletedFile")
    assert deleted == sorted(p for p in old if p.startswith("images/")) and ".gitattributes" \
        not in deleted
    hub_copy = tmp_path / "hub-copy"  # what a user of the repo loads through the card's globs
    for p, data in files.items():
        (hub_copy / p).parent.mkdir(parents=True, exist_ok=True)
        (hub_copy / p).write_bytes(data)
    assert len(_load(hub_copy, "images", "train", tmp_path)) == second.n_images == 128


@pytest.mark.integration
def test_a_card_the_hub_rejects_is_one_line(release, tmp_path, monkeypatch, capsys):
    import shutil

    from tests.fakes.hub import FakeHub

    _, res = release
    out = tmp_path / "rel"
    shutil.copytree(res.out, out)
    text = (out / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text("---\n- not a mapping\n---\n" + text.split("---", 2)[2])
    with FakeHub() as hub:
        _hub_env(monkeypatch, hub)
        assert cli.main(["publish", "--out", str(out), "--repo-id", "org/3xcm"]) == 2
        assert hub.repos["org/3xcm"].commits == []  # nothing was committed
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(
        "error: cannot publish to org/3xcm: the Hub rejected the card: Invalid metadata")


def test_publish_refuses_a_card_whose_license_link_is_missing(release, tmp_path, capsys):
    import shutil

    _, res = release
    out = tmp_path / "rel"
    shutil.copytree(res.out, out)
    (out / "LICENSE.md").unlink()
    assert cli.main(["publish", "--out", str(out), "--repo-id", "org/3xcm"]) == 2
    assert "license_link 'LICENSE.md' is not in the folder" in capsys.readouterr().err


def test_card_metadata_the_hub_expects(release):
    from triplets.card import SIZE_CATEGORIES, size_category

    _, res = release
    text = (res.out / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(text.split("---", 2)[1])
    assert meta["license"] == "other" and meta["license_name"] == "3xcm-mixed"
    assert meta["license_link"] == "LICENSE.md"  # `other` needs a name and a link
    assert "MIT licence" in (res.out / meta["license_link"]).read_text(encoding="utf-8")
    # task categories of the Hub's taxonomy (huggingface.js PIPELINE_DATA)
    assert meta["task_categories"] == ["text-to-image", "image-feature-extraction"]
    rows = max(d["splits"][0]["num_examples"] for d in meta["dataset_info"])
    assert meta["size_categories"] == [size_category(rows)] == ["n<1K"]
    assert [size_category(n) for n in (0, 999, 1000, 99_999, 100_000, 2_500_000, 10**13)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "n>1T"]
    assert [label for _, label in SIZE_CATEGORIES][-1] == "100B<n<1T"
    assert set(meta) >= {"pretty_name", "language", "multilinguality", "tags", "configs",
                         "dataset_info"}


def test_export_refuses_a_folder_it_did_not_write(release, tmp_path, capsys):
    """A project folder with README.md and src/ is not a release: refused (exit 2), src/ kept."""
    wd, _ = release
    out = tmp_path / "project"
    (out / "src").mkdir(parents=True)
    (out / "README.md").write_text("my project\n")
    (out / "src" / "main.py").write_text("print(1)\n")
    assert cli.main(["export", "--workdir", str(wd.root), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refusing" in err
    assert (out / "src" / "main.py").read_text() == "print(1)\n"
    assert (out / "README.md").read_text() == "my project\n"


def test_reexport_into_a_clone_keeps_files_it_did_not_write(release, tmp_path):
    """A git clone of a release (.git/, .gitattributes, notes) is updated in place: only the
    files export wrote change; its marker holds the fingerprint of what it wrote."""
    from core.files import OWNER_MARKER, read_marker
    from triplets.publish import release_files

    wd, _ = release
    out = tmp_path / "clone"
    total = sum(p.stat().st_size for p in wd.images_dir.rglob("*.png"))
    export_release(wd, out, shard_bytes=total // 3 + 1)
    first = read_marker(out)
    assert first["kind"] == "3xcm-release" and first["fingerprint"].startswith("sha256:")
    assert set(first["files"]) == set(release_files(out))
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / ".gitattributes").write_text("*.parquet filter=lfs\n")
    (out / "notes.txt").write_text("mine\n")
    export_release(wd, out, shard_bytes=1 << 40)  # one image shard now: the old ones go
    assert (out / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (out / ".gitattributes").read_text() == "*.parquet filter=lfs\n"
    assert (out / "notes.txt").read_text() == "mine\n"
    now = read_marker(out)
    assert set(release_files(out)) == set(now["files"]) | {"notes.txt"}
    assert len([p for p in now["files"] if p.startswith("images/")]) == 1
    assert not list(out.parent.glob(".clone.*")) and (out / OWNER_MARKER).is_file()


@pytest.mark.parametrize("text, where", [
    ("[]", "must be a JSON object, not list"), ("null", "not NoneType"),
    ('"a string"', "not str"), ('{"sampling": {"seed": "7"}}', "field sampling.seed"),
    ('{"sampling": {"distinct_language": "yes"}}', "field sampling.distinct_language"),
    ('{"sampling": []}', "field sampling"), ('{"stage_runs": 3}', "field stage_runs"),
])
def test_a_build_record_that_breaks_its_schema_is_one_line_exit_2(release, tmp_path, capsys,
                                                                   text, where):
    """Both `triplets validate --release` and `benchmark run` say so in one line, exit 2."""
    import shutil

    from benchmark import cli as bench

    _, res = release
    copy = tmp_path / "rel"
    shutil.copytree(res.out, copy)
    (copy / "build.json").write_text(text)
    assert cli.main(["validate", "--release", str(copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and where in err[0], err
    rc = bench.main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(copy),
                     "--output-dir", str(tmp_path / "results"), "--cache-dir",
                     str(tmp_path / "emb")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and where in err[-1] and "Traceback" not in "\n".join(err), err


def test_export_never_deletes_a_folder_named_like_its_temp_folder(release, tmp_path):
    """The work folder beside --out is a fresh one of ours (mkdtemp): a user's folder whose
    name export once used for it (``.NAME.tmp-PID``) is left alone."""
    import os

    wd, _ = release
    out = tmp_path / "rel"
    theirs = tmp_path / f".rel.tmp-{os.getpid()}"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine\n")
    export_release(wd, out)
    assert (theirs / "keep.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [theirs.name, "rel"]


def test_export_on_a_full_disk_is_one_line_and_keeps_the_release(release, tmp_path,
                                                                   monkeypatch, capsys):
    """ENOSPC while the new release is written: exit 2, one line; the release already in --out
    is whole and no work folder is left beside it."""
    import errno
    import os

    from core import files
    from triplets.publish import release_files

    wd, _ = release
    out = tmp_path / "rel"
    export_release(wd, out)
    before = {p: (out / p).read_bytes() for p in release_files(out)}

    def enospc(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", enospc)
    capsys.readouterr()
    assert cli.main(["export", "--workdir", str(wd.root), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("error: cannot write") and "No space left" in err
    assert {p: (out / p).read_bytes() for p in release_files(out)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]


def test_each_triplet_carries_its_terms_source_and_reviewers(tmp_path):
    """A term native speakers reviewed in the catalog (text not in data/queries.csv) is
    released as reviewed with its reviewer count, and the evaluator reads that status from the
    release columns instead of matching the text against data/queries.csv."""
    from benchmark import cli as bench

    wd = build_world(tmp_path / "w", CONCEPTS, per_cell=2, tag_fn=_tags)
    with Catalog.open(wd) as cat, cat.tx() as con:
        upsert_terms(con, [QueryTerm("train", "THA", "th-TH", "th", "รถไฟ (ทดสอบ)", "train",
                                     "reviewed", 3, "2026-01-01T00:00:00Z", "test")], None)
    run_sample(wd, SampleConfig(seed=17))
    res = export_release(wd, tmp_path / "rel")
    trip = _load(res.out, "triplets", "test", tmp_path).to_pandas()
    tha = trip[(trip.query_concept == "train") & (trip.query_country == "THA")]
    assert len(tha) and set(tha.query_text) == {"รถไฟ (ทดสอบ)"}
    assert set(tha.query_term_source) == {"reviewed"} and set(tha.query_term_reviewers) == {3}
    deu = trip[(trip.query_concept == "taxi") & (trip.query_country == "DEU")]
    assert set(deu.query_term_source) == {"generated"} and set(deu.query_term_reviewers) == {0}
    assert not (trip.query_term_source == "").any()
    rc = bench.main(["run", "--model", "hash", "--task", "3xcm", "--dataset", str(res.out),
                     "--output-dir", str(tmp_path / "results"), "--cache-dir",
                     str(tmp_path / "emb"), "-q", "--bootstrap", "10"])
    assert rc == 0
    qt = json.loads((tmp_path / "results" / "hash" / "3xcm.json").read_text())["task"][
        "query_texts"]
    assert qt["review_status_from"].startswith("release columns")
    assert qt["used_source_mix"].get("reviewed", 0) >= 1
    assert qt["used_reviewer_counts"]["3"] == 1
    assert qt["reviewed_share_by_country"]["THA"] > 0


def test_export_rows_read_alike_by_load_dataset_and_the_format_reader(release, tmp_path):
    """What export writes, ``datasets`` and :mod:`core.release` read as the same rows."""
    from core import release as fmt

    _, res = release
    for config, split in fmt.SPLITS.items():
        cols = [c for c in fmt.features()[config] if c != "image"]
        ours = fmt.read_config_table(res.out, config, cols)
        theirs = _load(res.out, config, split, tmp_path)
        theirs = theirs.remove_columns([c for c in theirs.column_names if c == "image"])
        assert list(ours.columns) == theirs.column_names == cols
        key = cols[0]
        a = ours.sort_values(key).to_dict("records")
        b = theirs.to_pandas().sort_values(key).to_dict("records")
        norm = [[{k: list(v) if k == "tags" else v for k, v in r.items()} for r in x] for x in (a, b)]
        assert norm[0] == norm[1] and len(a) == (res.n_triplets if config == "triplets"
                                                  else res.n_images)
