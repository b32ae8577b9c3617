"""A release is passed around: it never carries the builder's machine (its paths), its folders
get the umask's modes, a re-export deletes only what it provably wrote inside --out, a
symlinked --out or a stored parameter that is not UTF-8 never ends in an internal error, and
--shard-mb is checked at the edge."""

from __future__ import annotations

import json
import os
import stat

import pytest

from builder.catalog import Catalog
from core.files import OWNER_MARKER, read_marker, sha256_file
from tests.worlds import build_world
from triplets import cli
from triplets.export import export_release
from triplets.sample_run import run_sample
from triplets.sampling import SampleConfig

SECRET = "/home/someone/photos"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    wd = build_world(tmp_path_factory.mktemp("rel") / "w", ["train", "food"], per_cell=2)
    run_sample(wd, SampleConfig(seed=3))
    with Catalog.open(wd) as cat, cat.tx() as con:
        con.execute("UPDATE items SET url = ? WHERE item_id = (SELECT MIN(item_id) FROM items)",
                    (f"file://{SECRET}/food/THA/1.png",))
    params = {"search": f"folder:{SECRET}", "workdir": str(wd.root),
              "export_urls": str(wd.root / "exports" / "urls.parquet"), "note": "a path"}
    with Catalog.open(wd) as cat:
        run = cat.start_run("crawl", params)
        cat.finish_run(run, "done", {"ok": 1}, f"read {SECRET}/food")
    with Catalog.open(wd) as cat, cat.tx() as con:  # a lone surrogate, as a non-UTF-8 argv gives
        params["note"] = "a path \udcff not in UTF-8"
        con.execute("UPDATE stage_runs SET params_json = ? WHERE run_id = ?",
                    (json.dumps(params), run))
    return wd


def text_of(folder) -> str:
    """Every file of a release as text (parquet bytes decoded leniently: strings are in it)."""
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*")
                     if p.is_file())


def test_a_release_carries_no_path_of_the_builders_machine(world, tmp_path):
    """Work-dir paths become relative, other local paths keep their last part, a lone
    surrogate becomes U+FFFD: build.json, croissant.json, provenance.jsonl, the card and the
    images' rows."""
    out = tmp_path / "rel"
    export_release(world, out)
    text = text_of(out)
    assert SECRET not in text and str(world.root) not in text
    assert "/home/" not in text and str(tmp_path) not in text
    build = json.loads((out / "build.json").read_text())
    crawl = next(r for r in build["stage_runs"] if r["stage"] == "crawl")
    assert crawl["params"] == {"search": "folder:<local>/photos", "workdir": ".",
                               "export_urls": "exports/urls.parquet",
                               "note": "a path \ufffd not in UTF-8"}
    assert crawl["summary"] == "read <local>/food"
    assert "folder:<local>/photos" in json.loads((out / "croissant.json").read_text())[
        "rai:dataCollection"]
    assert "<local>/1.png" in text  # the image's source, without the folder it came from


def test_a_new_release_folder_gets_the_umasks_mode(world, tmp_path):
    old = os.umask(0o022)
    try:
        export_release(world, tmp_path / "rel")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "rel").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "rel" / "images").stat().st_mode) == 0o755


def test_reexport_deletes_nothing_through_a_symlinked_folder(world, tmp_path):
    """The old marker lists a file under a folder that is now a symlink (a cloned repository
    keeps them): the file it points to, outside --out, stays, and so does the link."""
    out, outside = tmp_path / "rel", tmp_path / "outside"
    export_release(world, out)
    outside.mkdir()
    (outside / "old.parquet").write_bytes(b"theirs")
    (out / "extra").symlink_to(outside, target_is_directory=True)
    marker = read_marker(out)
    marker["files"]["extra/old.parquet"] = sha256_file(outside / "old.parquet")
    (out / OWNER_MARKER).write_text(json.dumps(marker))
    export_release(world, out)
    assert (outside / "old.parquet").read_bytes() == b"theirs"
    assert (out / "extra").is_symlink() and "extra/old.parquet" not in read_marker(out)["files"]


def test_reexport_refuses_to_write_through_a_symlinked_folder(world, tmp_path, capsys):
    out, outside = tmp_path / "rel", tmp_path / "outside"
    export_release(world, out)
    (out / "images").rename(outside)
    (out / "images").symlink_to(outside, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    assert cli.main(["export", "--workdir", str(world.root), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "symlink" in err[0]
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


def test_a_marker_entry_whose_bytes_changed_is_not_deleted(world, tmp_path):
    out = tmp_path / "rel"
    export_release(world, out, shard_bytes=300)  # several image shards
    shards = sorted((out / "images").glob("*.parquet"))
    assert len(shards) > 1
    shards[-1].write_bytes(b"edited by hand")
    export_release(world, out)  # one shard now: the old ones go, but not an edited one
    assert shards[-1].read_bytes() == b"edited by hand"
    assert not shards[-2].exists() or shards[-2].name.startswith("train-00000-of-00001")


def test_export_into_a_symlink_to_an_empty_folder(world, tmp_path):
    target, link = tmp_path / "target", tmp_path / "link"
    target.mkdir()
    link.symlink_to(target, target_is_directory=True)
    res = export_release(world, link)
    assert link.is_symlink() and (target / "build.json").is_file() and res.out == target


@pytest.mark.parametrize("mb", ["0", "-1"])
def test_shard_mb_below_one_is_refused(world, tmp_path, capsys, mb):
    out = tmp_path / "rel"
    assert cli.main(["export", "--workdir", str(world.root), "--out", str(out),
                     "--shard-mb", mb]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--shard-mb must be at least 1" in err[0]
    assert not out.exists()
