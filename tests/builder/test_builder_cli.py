"""``python -m builder``: status, export, run; kill-and-resume of the LLM stages."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import pipeline.cli as cli
from builder import queries
from builder.catalog import Catalog
from builder.concepts import run_concepts
from builder.llm.offline import OfflineLLM
from builder.workdir import WorkDir
from core import datatables
from tests.fakes.gemini import FakeGemini, answer

REPO = Path(__file__).resolve().parents[2]
KEY = "AIzaFAKE-cli-sentinel-24680"


def _run_offline(wd: Path) -> int:
    return cli.main(
        [
            "--workdir",
            str(wd),
            "run",
            "--to",
            "queries",
            "--llm",
            "offline",
            "--embedder",
            "hash",
            "--stage-args",
            "concepts=--rounds 2 --n-concepts 8 --countries THA,NGA,JPN --batch-size 2",
            "--stage-args",
            "queries=--countries THA,NGA",
        ]
    )


def test_run_status_and_export(tmp_path, capsys):
    wd = tmp_path / "w"
    assert _run_offline(wd) == 0
    out = capsys.readouterr().out
    assert "[concepts] python -m builder.concepts --workdir" in out and "--llm offline" in out
    assert "[concept_dedup] python -m builder.concept_dedup" in out and "--embedder hash" in out
    assert "[crawl]" not in out  # --to queries
    assert cli.main(["--workdir", str(wd), "status", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    states = {s["stage"]: s["state"] for s in st["stages"]}
    assert states["concepts"] == states["concept_dedup"] == states["queries"] == "done"
    assert st["tables"]["queries"] == 139 * 2 * 2  # curated kept, hash embedder merges nothing
    q = next(s for s in st["stages"] if s["stage"] == "queries")
    assert q["counts"]["native_ok"] == 278 and q["usage"]["api_calls"] == 0
    assert cli.main(["--workdir", str(wd)]) == 0
    table = capsys.readouterr().out
    assert re.search(r"^queries\s+done\s", table, re.M)
    for ext in ("csv", "parquet"):
        dest = tmp_path / f"q.{ext}"
        assert cli.main(["--workdir", str(wd), "export", "queries", "--out", str(dest)]) == 0
        df = pd.read_csv(dest) if ext == "csv" else pd.read_parquet(dest)
        assert len(df) == 556 and set(df["source"]) == {"table"}
        assert (
            df[(df.concept == "food") & (df.country == "THA") & (df.kind == "native")][
                "text"
            ].item()
            == "อาหาร ไทย"
        )
    capsys.readouterr()
    assert cli.main(["--workdir", str(wd), "export", "nope", "--out", str(tmp_path / "x.csv")]) == 2
    assert (
        cli.main(["--workdir", str(wd), "export", "queries", "--out", str(tmp_path / "x.txt")]) == 2
    )
    assert cli.main(["--workdir", str(wd), "run", "--from", "nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: unknown table 'nope'") and len(err) == 3


def test_run_calls_every_stage_and_skips_none(tmp_path, capsys, monkeypatch):
    """A stage that fails stops the run: the later stages are not run, never "skipped"."""
    import types

    import pipeline.cli
    from pipeline.stages import Stage, stage

    later = types.ModuleType("builder.not_written_yet")
    later.main = lambda argv=None: 1 / 0
    failing = types.ModuleType("builder.failing")
    failing.main = lambda argv=None: 4
    monkeypatch.setattr(pipeline.cli, "STAGES", [stage("queries"), Stage("later", later)])
    wd = tmp_path / "w"
    argv = ["--workdir", str(wd), "run", "--llm", "offline", "--stage-args", "queries=--countries THA"]
    with pytest.raises(ZeroDivisionError):
        cli.main(argv)
    assert "skipped" not in capsys.readouterr().out
    assert cli.main(["--workdir", str(wd), "status", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [(s["stage"], s["state"]) for s in st["stages"]] == [
        ("queries", "done"),
        ("later", "not run"),
    ]
    monkeypatch.setattr(pipeline.cli, "STAGES", [Stage("failing", failing), Stage("later", later)])
    assert cli.main(["--workdir", str(wd), "run"]) == 4
    assert "[failing] exited with 4; stopping" in capsys.readouterr().out


def snapshot(wd: Path) -> dict[str, list[tuple]]:
    """The catalog's content without run ids and stage-run records."""
    with Catalog(WorkDir.open(wd)) as cat:
        out = {}
        for t in ("concepts", "concept_instances", "queries", "llm_requests"):
            cols = [
                r["name"] for r in cat.query(f"PRAGMA table_info({t})") if r["name"] != "run_id"
            ]
            out[t] = sorted(tuple(r) for r in cat.query(f"SELECT {', '.join(cols)} FROM {t}"))
        return out


class Boom(KeyboardInterrupt):
    pass


def test_interrupted_stage_resumes_to_the_same_catalog(tmp_path, monkeypatch):
    countries = datatables.resolve_countries("USA,THA,NGA,JPN,KEN")
    concepts = ["food", "bicycle", "train", "kite"]

    def full(wd):
        with Catalog(WorkDir.open(wd)) as cat:
            run_concepts(
                cat, OfflineLLM(), countries, rounds=2, curated=concepts, batch_size=2, n_concepts=3
            )
            queries.run_queries(cat, OfflineLLM(), countries, concepts=concepts, use_table=False)

    full(tmp_path / "ref")
    # the same with an interrupt injected between items of each stage
    llm = OfflineLLM()
    real = llm.generate_structured
    seen = {"n": 0}

    def flaky(*a, **k):
        seen["n"] += 1
        if seen["n"] in (3, 9):
            raise Boom()
        return real(*a, **k)

    monkeypatch.setattr(llm, "generate_structured", flaky)
    wd = tmp_path / "killed"
    with Catalog(WorkDir.open(wd)) as cat:
        with pytest.raises(Boom):
            run_concepts(
                cat, llm, countries, rounds=2, curated=concepts, batch_size=2, n_concepts=3
            )
        assert cat.last_run("concepts")["status"] == "interrupted"
        run_concepts(cat, llm, countries, rounds=2, curated=concepts, batch_size=2, n_concepts=3)
        with pytest.raises(Boom):
            queries.run_queries(cat, llm, countries, concepts=concepts, use_table=False)
        assert cat.last_run("queries")["status"] == "interrupted"
        done_before = cat.query("SELECT COUNT(*) FROM queries")[0][0]
        assert 0 < done_before < 2 * len(concepts) * len(countries)
        queries.run_queries(cat, llm, countries, concepts=concepts, use_table=False)
    assert snapshot(wd) == snapshot(tmp_path / "ref")


def _concept_responder(req):
    names = re.search(r"^Countries: (.+)$", req.prompt, re.M).group(1).split("; ")
    return answer(
        {
            "concepts": [
                {
                    "concept": f"thing {i} of {names[0]}",
                    "instances": [{"country": n, "instance": f"#{i} in {n}"} for n in names],
                }
                for i in range(3)
            ]
        }
    )


@pytest.mark.integration
def test_sigkill_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    with FakeGemini() as fake:
        monkeypatch.setenv("XCM_GEMINI_BASE_URL", fake.url)
        args = [
            "--llm",
            "gemini:gemini-fake",
            "--llm-rpm",
            "0",
            "--countries",
            "USA,GBR,DEU,CHN,JPN,FRA,ESP,ARG",
            "--rounds",
            "2",
            "--batch-size",
            "2",
            "--no-curated",
        ]
        fake.respond_with(_concept_responder)
        from builder import concepts

        assert concepts.main(["--workdir", str(tmp_path / "ref"), *args]) == 0
        n_items = len(fake.calls())
        assert n_items == 8
        # a subprocess answered slowly, killed with SIGKILL after some items are committed
        fake.respond_with(lambda req: _slow(_concept_responder(req)))
        wd = tmp_path / "killed"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "builder.concepts", "--workdir", str(wd), *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if _committed(wd) >= 3:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        committed = _committed(wd)
        assert 3 <= committed < n_items
        with Catalog(WorkDir.open(wd)) as cat:
            assert cat.last_run("concepts")["status"] == "running"  # killed: never finished
        fake.respond_with(_concept_responder)
        before = len(fake.calls())
        assert concepts.main(["--workdir", str(wd), *args]) == 0
        assert len(fake.calls()) - before <= n_items - committed  # done items are not asked
    assert snapshot(wd) == snapshot(tmp_path / "ref")


def _slow(reply):
    reply.delay = 0.4
    return reply


def _committed(wd: Path) -> int:
    path = wd / "catalog.sqlite"
    if not path.exists():
        return 0
    import sqlite3

    try:
        con = sqlite3.connect(path, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM llm_requests WHERE status='ok'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0
