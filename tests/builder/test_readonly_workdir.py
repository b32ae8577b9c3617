"""A read-only work dir (issue 22): ``pipeline status`` and ``export`` open the catalog
read-only and work; a writer says "cannot write PATH" (exit 2), never that the catalog is not
usable and should be moved away."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest

import builder.catalog as catalog_mod
from builder import concepts
from builder.catalog import Catalog
from pipeline.cli import main as pipeline_main


def _made(root: Path) -> Path:
    with Catalog.open(root) as cat:
        cat.finish_run(cat.start_run("concepts", {}), "done", {"kept": 3}, "concepts: 3 kept")
    return root


def _check(root: Path, capsys, tmp_path: Path) -> None:
    capsys.readouterr()
    assert pipeline_main(["--workdir", str(root), "status", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert {s["stage"]: s["state"] for s in st["stages"]}["concepts"] == "done"
    assert st["tables"]["stage_runs"] == 1
    out = tmp_path / "runs.csv"
    assert pipeline_main(["--workdir", str(root), "export", "stage_runs", "--out", str(out)]) == 0
    assert out.read_text().count("\n") == 2
    capsys.readouterr()
    assert concepts.main(["--workdir", str(root), "--llm", "offline"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: cannot write {root / 'catalog.sqlite'} (")
    assert "a read-only disk or no write permission" in err
    assert "move it away" not in err and "not a usable catalog" not in err


def test_simulated_read_only_catalog(tmp_path, monkeypatch, capsys):
    root = _made(tmp_path / "w")
    real = catalog_mod.connect

    def readonly(path):  # what sqlite says on the first write to a read-only file
        con = real(path)
        con.close()
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(catalog_mod, "connect", readonly)
    _check(root, capsys, tmp_path)


def test_unable_to_open_is_cannot_write_when_the_folder_is_not_writable(tmp_path, monkeypatch):
    path = _made(tmp_path / "w") / "catalog.sqlite"
    exc = sqlite3.OperationalError("unable to open database file")
    assert not catalog_mod.cannot_write(path, exc)  # a writable folder: not our verdict
    monkeypatch.setattr(catalog_mod.os, "access", lambda p, mode: False)
    assert catalog_mod.cannot_write(path, exc)


@pytest.fixture
def ro_mount(tmp_path):
    mnt = tmp_path / f"ro-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        yield mnt
    finally:
        import gc

        gc.collect()  # a connection not yet collected keeps the mount busy
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_real_read_only_mount(ro_mount, tmp_path, capsys):
    root = _made(ro_mount / "w")
    if subprocess.run(["mount", "-o", "remount,ro", str(ro_mount)],
                      capture_output=True).returncode:
        pytest.skip("remounting read-only is not permitted here")
    _check(root, capsys, tmp_path)


def test_status_and_export_of_a_work_dir_never_built_create_nothing(tmp_path, capsys,
                                                                    monkeypatch):
    """Typed where nothing was built (the default ./xcm-work): status says so, export is one
    line, and neither makes the folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XCM_WORKDIR", raising=False)
    assert pipeline_main(["status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("work dir xcm-work (no catalog: nothing built yet")
    assert "concepts       not run" in out
    assert pipeline_main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stages"][0] == {
        "stage": "concepts", "module": "builder.concepts", "state": "not run"}
    assert pipeline_main(["export", "items", "--out", "items.csv"]) == 2
    assert capsys.readouterr().err.startswith("error: no catalog in xcm-work")
    assert list(tmp_path.iterdir()) == []
