"""The folder rule for every command that writes into a folder a user names: ``run`` /
``analyze`` results, ``reproduce`` output, the synthetic release: new, empty, or one we wrote
(our marker); anything else is refused in one line (exit 2) and left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.cli import main
from core import datatables, files

RESULTS_KIND = "3xcm-results"  # benchmark.results.RESULTS_KIND

DATA = str(datatables.data_dir() / "synthetic-3xcm")


def _project(path: Path) -> dict[str, str]:
    """A user's folder: README.md, notes, a results-like JSON of theirs."""
    (path / "hash").mkdir(parents=True)
    mine = {"README.md": "my project\n", "notes.txt": "mine\n",
            "hash/3xcm.json": '{"mine": true}\n'}
    for rel, text in mine.items():
        (path / rel).write_text(text)
    return mine


def _untouched(path: Path, mine: dict[str, str]) -> None:
    assert {p.relative_to(path).as_posix(): p.read_text() for p in path.rglob("*")
            if p.is_file()} == mine


def _one_error(capsys, needle: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err
    return err[0]


def _run(out: Path, tmp_path: Path) -> int:
    return main(["run", "--model", "hash", "--task", "3xcm", "--dataset", DATA, "--bootstrap",
                 "5", "--output-dir", str(out), "--cache-dir", str(tmp_path / "c"), "-q"])


def test_run_refuses_a_folder_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "project"
    mine = _project(out)
    assert _run(out, tmp_path) == 2
    _one_error(capsys, f"--output-dir {out} is not empty and holds no {files.OWNER_MARKER}")
    _untouched(out, mine)


def test_run_claims_a_new_folder_and_runs_there_again(tmp_path, capsys):
    out = tmp_path / "results"
    assert _run(out, tmp_path) == 0
    marker = files.read_marker(out)
    assert marker["kind"] == RESULTS_KIND
    assert set(marker["files"]) == {"hash/3xcm.json", "hash/3xcm.outcomes.parquet"}
    assert marker["files"]["hash/3xcm.json"] == files.sha256_file(out / "hash" / "3xcm.json")
    (out / "notes.txt").write_text("mine\n")  # a note of the user's beside our results
    assert _run(out, tmp_path) == 0  # our folder: the results are replaced
    assert (out / "notes.txt").read_text() == "mine\n"
    assert json.loads((out / "hash" / "3xcm.json").read_text())["task"]["name"] == "3xcm"


def test_an_empty_folder_is_claimed(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert _run(out, tmp_path) == 0 and files.read_marker(out)["kind"] == RESULTS_KIND


def test_a_folder_of_another_kind_is_refused(tmp_path, capsys):
    """A report folder (ours, but of another command) does not take results."""
    out = tmp_path / "report"
    out.mkdir()
    (out / "leaderboard.md").write_text("# report\n")
    files.mark_folder(out, "3xcm-report", [out / "leaderboard.md"])
    assert _run(out, tmp_path) == 2
    _one_error(capsys, "holds no .3xcm-written.json of a 3xcm-results")
    assert not (out / "hash").exists()


def test_analyze_refuses_a_folder_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "project"
    mine = _project(out)
    assert main(["analyze", "--model", "hash", "--dataset", DATA, "--output-dir", str(out),
                 "--cache-dir", str(tmp_path / "c"), "--no-umap"]) == 2
    _one_error(capsys, "refusing to write there")
    _untouched(out, mine)


def test_reproduce_refuses_a_folder_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "project"
    mine = _project(out)
    assert main(["reproduce", "--output-dir", str(out), "--models", "hash", "--xcm-dataset",
                 DATA, "--compare-only"]) == 2
    _one_error(capsys, "of a 3xcm-reproduce we wrote; refusing to write there")
    _untouched(out, mine)


def test_reproduce_marks_its_folder_and_runs_there_again(tmp_path):
    out = tmp_path / "repro"
    argv = ["reproduce", "--output-dir", str(out), "--models", "hash", "--xcm-dataset", DATA,
            "--compare-only"]
    assert main(argv) == 0
    marker = files.read_marker(out)
    assert marker["kind"] == "3xcm-reproduce"
    assert set(marker["files"]) == {f"paper-comparison.{k}" for k in ("md", "html", "csv")}
    assert main(argv) == 0


@pytest.mark.parametrize("mine", [{"README.md": "my project\n"},
                                  {"README.md": "x\n", "src/main.py": "print(1)\n"}])
def test_synthetic_release_refuses_a_folder_it_did_not_write(tmp_path, capsys, mine):
    from benchmark import synthetic

    out = tmp_path / "project"
    for rel, text in mine.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    assert synthetic.main(["--out", str(out)]) == 2
    assert "refusing to write there" in capsys.readouterr().err
    _untouched(out, mine)


def test_the_bundled_synthetic_release_is_marked_as_ours():
    """``python -m benchmark.synthetic --out data/synthetic-3xcm`` may write it again."""
    from benchmark import synthetic
    from core import release

    folder = datatables.data_dir() / "synthetic-3xcm"
    assert files.may_write_into(folder, synthetic.SYNTHETIC_KIND) is not None
    marker = files.read_marker(folder)
    assert marker["files"] == {f: files.sha256_file(folder / f) for f in marker["files"]}
    assert sorted(marker["files"]) == sorted(
        str(p.relative_to(folder)) for p in release.release_files(folder))


@pytest.mark.parametrize("dataset", [[], ["--dataset", "/nonexistent/release"]])
def test_a_refused_dataset_leaves_nothing(tmp_path, capsys, dataset):
    """A run refused after the model loaded (no --dataset, one that does not exist) removes
    the folder and the marker it made; in a folder of ours it removes only what it made."""
    def run(out: Path) -> int:
        return main(["run", "--model", "hash", "--task", "3xcm", *dataset, "--output-dir",
                     str(out), "--cache-dir", str(tmp_path / "c"), "-q"])

    assert run(tmp_path / "new") == 2 and not (tmp_path / "new").exists()
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(empty) == 2 and list(empty.iterdir()) == []
    ours = tmp_path / "ours"
    assert _run(ours, tmp_path) == 0
    before = sorted(p.relative_to(ours).as_posix() for p in ours.rglob("*"))
    (ours / "hash" / "3xcm.json").rename(ours / "kept.json")  # its hash/ folder now empty
    (ours / "hash" / "3xcm.outcomes.parquet").unlink()
    assert run(ours) == 2
    assert (ours / "hash").is_dir() and files.read_marker(ours)["files"]  # not ours to undo
    assert len(before) == 4
    capsys.readouterr()
    assert main(["analyze", "--model", "hash", *dataset, "--output-dir", str(tmp_path / "a"),
                 "--no-cache", "-q"]) == 2
    assert not (tmp_path / "a").exists()


def test_run_quiet_prints_no_logs_and_no_bars(tmp_path, capsys, monkeypatch):
    """-q: no table, no INFO lines, no progress bars (tqdm read $TQDM_DISABLE at import, so
    the bars are turned off in the process itself); the results line stays."""
    from tqdm import std
    from tqdm.auto import tqdm

    real = std.tqdm.__init__  # bars on, as outside the tests
    monkeypatch.setattr(std.tqdm, "__init__",
                        lambda self, *a, **kw: real(self, *a, **{"disable": False, **kw}))
    argv = ["run", "--model", "hash", "--task", "3xcm", "--dataset", DATA, "--bootstrap", "5",
            "--no-cache"]
    assert main([*argv, "--output-dir", str(tmp_path / "loud")]) == 0
    out, err = capsys.readouterr()
    assert " INFO " in err and out  # what -q silences
    with tqdm(total=1) as bar:
        assert not bar.disable
    assert main([*argv, "--output-dir", str(tmp_path / "q"), "-q"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and " INFO " not in err
    assert err.strip().splitlines()[-1] == f"results: {tmp_path / 'q' / 'hash' / '3xcm.json'}"
    with tqdm(total=1) as bar:  # every bar of the process, ours and the libraries'
        assert bar.disable
