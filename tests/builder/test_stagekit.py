"""The stage kit: one run-record mechanism (done / failed / interrupted) and one exit convention
for every stage, a missing optional library as one line, SIGTERM recorded as ``interrupted``."""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from builder import concepts, stagekit
from builder.catalog import Catalog
from builder.crawl.stage import CrawlConfig, crawl
from builder.image_dedup import DedupConfig, image_dedup
from builder.llm.offline import OfflineLLM
from builder.queries import QueryRow, upsert_queries
from core import clikit, datatables
from tests.builder.test_crawl import write_urls
from tests.fakes.image_server import ImageServer, image_bytes

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "install the builder extra: pip install -e '.[builder]'"


def photos(root: Path) -> Path:
    for concept, code in (("food", "THA"), ("house", "JPN")):
        d = root / concept / code
        d.mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (32, 24), (40 * i, 90, 200)).save(d / f"{i}.png")
    return root


def _food_query(cat: Catalog) -> None:
    """The one query of the crawl tests: food in Thailand, in English."""
    with cat.tx() as con:
        upsert_queries(con, [QueryRow("food", "THA", "english", "en", "food Thailand", "table")])


def last_run(wd: Path, stage: str) -> sqlite3.Row:
    with Catalog.open(wd) as cat:
        return cat.last_run(stage)


# -- an unexpected exception: failed, with the error ------------------------------------------
def test_an_exception_in_an_llm_stage_records_failed_with_the_error(tmp_path, monkeypatch):
    llm = OfflineLLM()

    def broken(*a, **kw):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(llm, "generate_structured", broken)
    with Catalog.open(tmp_path / "w") as cat:
        with pytest.raises(RuntimeError, match="disk on fire"):
            concepts.run_concepts(cat, llm, datatables.resolve_countries("THA"), curated=["food"])
        run = cat.last_run("concepts")
    assert run["status"] == "failed"
    assert run["summary"].splitlines()[0] == "failed: RuntimeError: disk on fire"
    assert run["ended_at"] is not None


def test_crawl_and_image_dedup_record_a_crash_as_failed_not_interrupted(tmp_path, monkeypatch):
    import builder.image_dedup as dedup_mod

    class Broken:
        def search(self, s):
            raise OSError(28, "No space left on device")

    with Catalog.open(tmp_path / "w") as cat:
        _food_query(cat)
        with pytest.raises(OSError):
            crawl(cat, CrawlConfig(countries="THA", languages=("english",)), backend=Broken())
        run = cat.last_run("crawl")
        assert run["status"] == "failed"
        assert run["summary"].splitlines()[0] == (
            "failed: OSError: [Errno 28] No space left on device")
        assert '"searches": {"pending": 1}' in run["counts_json"]  # what it left is counted
    with Catalog.open(tmp_path / "d") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{photos(tmp_path / 'photos')}"))

        def broken(*a, **kw):
            raise ValueError("phash table corrupt")

        monkeypatch.setattr(dedup_mod, "dedup_concept", broken)
        with pytest.raises(ValueError):
            image_dedup(cat, DedupConfig(model=None))
        run = cat.last_run("image_dedup")
    assert (run["status"], run["summary"]) == ("failed", "failed: ValueError: phash table corrupt")


def test_ctrl_c_records_interrupted_and_the_cli_exits_130(tmp_path, monkeypatch, capsys):
    class Interrupting:
        def search(self, s):
            raise KeyboardInterrupt

    def body(args):
        with Catalog.open(args.workdir) as cat:
            _food_query(cat)
            crawl(cat, CrawlConfig(countries="THA", languages=("english",)),
                  backend=Interrupting())

    parser = stagekit.stage_parser("builder.test", None)
    assert stagekit.stage_main(parser, body, ["--workdir", str(tmp_path / "w")]) == 130
    err = capsys.readouterr().err  # after the progress bar
    assert err.endswith("\ninterrupted: run the same command again to resume\n")
    run = last_run(tmp_path / "w", "crawl")
    assert (run["status"], run["summary"].splitlines()[0]) == (
        "interrupted", "interrupted: KeyboardInterrupt")


# -- the exit convention ---------------------------------------------------------------------
def _main(exc: BaseException) -> int:
    def body(args: argparse.Namespace) -> int:
        raise exc

    return stagekit.stage_main(stagekit.stage_parser("builder.test", None), body, [])


def test_exit_convention(capsys):
    assert _main(stagekit.StageInputError("--rounds must be >= 1")) == 2
    assert capsys.readouterr().err == "error: --rounds must be >= 1\n"
    assert _main(datatables.TableError("unknown country 'Atlantis'")) == 2
    assert capsys.readouterr().err == "error: unknown country 'Atlantis'\n"
    missing = ModuleNotFoundError("No module named 'imagehash'", name="imagehash")
    assert _main(missing) == 2
    assert capsys.readouterr().err == (
        f"error: the Python module 'imagehash' is missing; {INSTALL}\n")
    # our own module missing is a bug, and a plain ValueError is not "bad input": tracebacks
    with pytest.raises(ModuleNotFoundError):
        _main(ModuleNotFoundError("No module named 'builder.nope'", name="builder.nope"))
    with pytest.raises(ValueError):
        _main(ValueError("an internal invariant broke"))
    assert _main(clikit.Terminated()) == 143
    assert "SIGTERM" in capsys.readouterr().err


def test_sigterm_handler_is_installed_only_while_a_stage_runs():
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def body(args):
        seen.append(signal.getsignal(signal.SIGTERM))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises StageTerminated long before this ends
        return 0

    t0 = time.monotonic()
    assert stagekit.stage_main(stagekit.stage_parser("builder.test", None), body, []) == 143
    assert time.monotonic() - t0 < 4
    assert seen[0] is not before and signal.getsignal(signal.SIGTERM) is before


# -- a missing optional library: one line, exit 2, nothing blamed on the input ---------------
STAGE_MODULES = {"crawl": "crawl.stage", "tagging": "tagging.stage"}


def _without(module: str, argv: list[str], stage: str, env: dict[str, str] | None = None):
    stage = {"crawl": "crawl.stage", "tagging": "tagging.stage"}.get(stage, stage)
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            f"from builder.{STAGE_MODULES.get(stage, stage)} import main\n"
            f"sys.exit(main({argv!r}))")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=120)


def test_missing_ddgs_is_one_line_and_leaves_the_searches_pending(tmp_path):
    wd = tmp_path / "w"
    with Catalog.open(wd) as cat:
        _food_query(cat)
    proc = _without("ddgs", ["--workdir", str(wd), "--countries", "THA", "--languages",
                             "english"], "crawl.stage")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == f"error: the Python module 'ddgs' is missing; {INSTALL}"
    assert "Traceback" not in proc.stderr
    with Catalog.open(wd) as cat:
        assert [tuple(r) for r in cat.query("SELECT status, attempts FROM searches")] == [
            ("pending", 0)]
        run = cat.last_run("crawl")
    assert run["status"] == "failed" and INSTALL in run["summary"]


def test_missing_google_genai_is_one_line_not_an_llm_error(tmp_path):
    wd = tmp_path / "w"
    proc = _without("google.genai", ["--workdir", str(wd), "--countries", "THA", "--llm",
                                     "gemini:gemini-fake", "--no-curated"], "concepts",
                    env={"GEMINI_API_KEY": "AIzaFAKE-never-sent", "XCM_GEMINI_BASE_URL":
                         "http://127.0.0.1:9"})
    assert proc.returncode == 2, proc.stderr
    assert f"error: the Python module 'google.genai' is missing; {INSTALL}" in proc.stderr
    assert "Traceback" not in proc.stderr
    with Catalog.open(wd) as cat:
        assert cat.query("SELECT COUNT(*) FROM llm_requests")[0][0] == 0  # no request blamed
        assert cat.last_run("concepts")["status"] == "failed"


def test_missing_imagehash_is_one_line_and_items_keep_their_status(tmp_path):
    wd = tmp_path / "w"
    with Catalog.open(wd) as cat:
        crawl(cat, CrawlConfig(search=f"folder:{photos(tmp_path / 'photos')}"))
    proc = _without("imagehash", ["--workdir", str(wd), "--model", "none"], "image_dedup")
    assert proc.returncode == 2, proc.stderr
    assert f"error: the Python module 'imagehash' is missing; {INSTALL}" in proc.stderr
    with Catalog.open(wd) as cat:
        assert {r[0] for r in cat.query("SELECT status FROM items")} == {"ok"}
        assert cat.last_run("image_dedup")["status"] == "failed"


# -- SIGTERM: the run is recorded interrupted, and the same command resumes ------------------
def _downloads(wd: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{wd / 'catalog.sqlite'}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM downloads").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.integration
def test_sigterm_records_interrupted_and_the_same_command_resumes(tmp_path):
    from builder.crawl.stage import main

    with ImageServer(delay=0.05) as srv:
        paths = [srv.add(f"/t/{i}.jpg", image_bytes("JPEG", (40, 30), seed=300 + i))
                 for i in range(40)]
        rows = [("food", "THA", "th", i + 1, srv.url(p), "", "") for i, p in enumerate(paths)]
        args = ["--search", f"urls:{write_urls(tmp_path / 'u.csv', rows)}", "--allow-host",
                "127.0.0.1", "--concurrency", "2", "--retries", "0", "--workdir",
                str(tmp_path / "w")]
        proc = subprocess.Popen([sys.executable, "-m", "builder.crawl.stage", *args], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while _downloads(tmp_path / "w") < 5 and time.monotonic() < deadline:
            assert proc.poll() is None, "the crawl finished before it could be stopped"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        assert "interrupted (SIGTERM): run the same command again to resume" in err
        run = last_run(tmp_path / "w", "crawl")
        assert run["status"] == "interrupted"  # and the summary counts what it left
        assert run["summary"].startswith("interrupted: SIGTERM\nsearches: ok 1\n")
        assert 5 <= _downloads(tmp_path / "w") < len(paths)
        assert main(args) == 0
    run = last_run(tmp_path / "w", "crawl")
    assert run["status"] == "done" and _downloads(tmp_path / "w") == len(paths)


def _world(wd: Path) -> Path:
    from tests.worlds import build_world

    build_world(wd, ["train", "taxi"], countries=["USA", "JPN"], per_cell=1,
                tag_fn=lambda c, k, i: None)
    return wd


@pytest.mark.parametrize("stage, module, argv, setup", [
    ("queries", "google.genai", ["--countries", "THA", "--no-table", "--llm",
                                 "gemini:gemini-fake"], None),
    ("tagging", "google.genai", ["--llm", "gemini:gemini-fake"], _world),
    ("concept_dedup", "FlagEmbedding", ["--embedder", "bge-m3:/nonexistent"], "concepts"),
    ("crawl", "httpx", ["--search", "urls:{urls}", "--allow-host", "127.0.0.1"], None),
])
def test_every_stage_names_a_missing_library_in_one_line(tmp_path, stage, module, argv, setup):
    """Issue 15: each stage that needs an optional library says which and how to install it,
    and blames no item."""
    wd = tmp_path / "w"
    if setup == "concepts":
        assert concepts.main(["--workdir", str(wd), "--llm", "offline", "--countries",
                              "THA"]) == 0
    elif callable(setup):
        setup(wd)
    urls = write_urls(tmp_path / "u.csv", [("food", "THA", "th", 1,
                                            "http://127.0.0.1:9/a.jpg", "", "")])
    argv = [a.format(urls=urls) for a in argv]
    proc = _without(module, ["--workdir", str(wd), *argv], stage,
                    env={"GEMINI_API_KEY": "AIzaFAKE-never-sent",
                         "XCM_GEMINI_BASE_URL": "http://127.0.0.1:9"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: the Python module {module!r} is missing; {INSTALL}")
    assert "Traceback" not in proc.stderr
    with Catalog.open(wd) as cat:
        assert cat.last_run(stage)["status"] == "failed"
        blamed = {
            "queries": "SELECT COUNT(*) FROM llm_requests WHERE stage='queries'",
            "tagging": "SELECT COUNT(*) FROM tags",
            "concept_dedup": "SELECT COUNT(*) FROM concepts WHERE status != 'candidate'",
            "crawl": "SELECT COUNT(*) FROM downloads",
        }[stage]
        assert cat.query(blamed)[0][0] == 0


def test_a_library_missing_inside_ddgs_is_ours_and_the_search_stays_pending(tmp_path,
                                                                             monkeypatch):
    import ddgs

    class Broken:
        def __init__(self, **kw):
            pass

        def images(self, *a, **kw):
            raise ModuleNotFoundError("No module named 'lxml'", name="lxml")

    monkeypatch.setattr(ddgs, "DDGS", Broken)
    wd = tmp_path / "w"
    with Catalog.open(wd) as cat:
        _food_query(cat)
    from builder.crawl.stage import main

    assert main(["--workdir", str(wd), "--countries", "THA", "--languages", "english"]) == 2
    with Catalog.open(wd) as cat:
        assert [tuple(r) for r in cat.query("SELECT status, attempts FROM searches")] == [
            ("pending", 0)]
