"""Stage ``concepts``: offline, and through the real google-genai client on the fake server."""

from __future__ import annotations

import csv
import json
import re

import pytest

from builder import concepts
from builder.catalog import Catalog
from builder.concepts import load_curated, normalize_concept, run_concepts
from builder.llm.offline import OfflineLLM
from builder.workdir import WorkDir
from core import datatables, files
from tests.fakes.gemini import FakeGemini, Request, answer

KEY = "AIzaFAKE-concepts-sentinel-98765"


def concept_answer(req: Request, bad: str | None = None) -> dict:
    """A deterministic answer for the countries named in the prompt."""
    names = re.search(r"^Countries: (.+)$", req.prompt, re.M).group(1).split("; ")
    names = [bad or n for n in names]
    return {
        "concepts": [
            {
                "concept": c,
                "instances": [{"country": n, "instance": f"{c.strip()} of {n}"} for n in names],
            }
            for c in ("Train", " street  food.")
        ]
    }


@pytest.fixture
def fake(monkeypatch):
    with FakeGemini() as f:
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        monkeypatch.setenv("XCM_GEMINI_BASE_URL", f.url)
        yield f


def _argv(wd, *extra) -> list[str]:
    return [
        "--workdir",
        str(wd),
        "--llm",
        "gemini:gemini-fake",
        "--llm-rpm",
        "0",
        "--llm-retry-delay",
        "0.01",
        *extra,
    ]


def test_normalize_and_curated_list(tmp_path):
    assert normalize_concept("  Street   Food. ") == "street food"
    cur = load_curated(None)
    assert cur == [normalize_concept(c) for c in datatables.concepts()] and len(cur) == 139
    f = tmp_path / "mine.txt"
    f.write_text("# my list\nTrain\ntrain\n\nHot Pot\n", encoding="utf-8")
    assert load_curated(f) == ["train", "hot pot"]
    with pytest.raises(ValueError, match="not found"):
        load_curated(tmp_path / "missing.txt")


def test_offline_run_is_deterministic_and_idempotent(tmp_path):
    cat = Catalog(WorkDir.open(tmp_path / "w"))
    countries = datatables.resolve_countries("USA,JPN,THA,NGA")
    cur = load_curated(None)
    counts = run_concepts(
        cat, OfflineLLM(), countries, rounds=2, curated=cur, batch_size=2, n_concepts=5
    )
    assert counts["requests"] == {"ok": 4} and counts["requests_not_ok"] == 0
    assert counts["instances"] == 4 * 5 * 2 and counts["concepts_by_source"] == {"curated": 139}
    inst = cat.query("SELECT * FROM concept_instances WHERE country='THA' LIMIT 1")[0]
    assert inst["instance"] == f"{inst['concept']} in Thailand" and inst["concept"] in cur
    snap = [
        tuple(r)
        for r in cat.query(
            "SELECT concept, country, round, instance FROM concept_instances ORDER BY 1, 2, 3"
        )
    ]
    again = run_concepts(
        cat, OfflineLLM(), countries, rounds=2, curated=cur, batch_size=2, n_concepts=5
    )
    assert again["requests"] == {"skipped_done": 4}
    assert snap == [
        tuple(r)
        for r in cat.query(
            "SELECT concept, country, round, instance FROM concept_instances ORDER BY 1, 2, 3"
        )
    ]
    run = cat.last_run("concepts")
    assert run["status"] == "done" and run["summary"].startswith("concepts: 139 concepts, 40")
    assert json.loads(run["usage_json"])["llm"] == "offline"


@pytest.mark.integration
def test_fake_gemini_end_to_end_and_no_key_leak(fake, tmp_path, capsys, caplog):
    caplog.set_level("DEBUG")
    calls = {"n": 0}

    def respond(req):
        calls["n"] += 1
        # the first answer names a country outside the batch: re-asked
        return answer(concept_answer(req, bad="Atlantis" if calls["n"] == 1 else None))

    fake.respond_with(respond)
    wd = tmp_path / "w"
    argv = _argv(
        wd, "--countries", "JPN,THA,NGA", "--rounds", "2", "--batch-size", "2", "--no-curated"
    )
    assert concepts.main(argv) == 0
    assert len(fake.calls()) == 5  # 2 batches x 2 rounds + 1 re-ask
    first = fake.calls()[0]
    assert "Countries: Japan; Thailand" in first.prompt and first.model == "gemini-fake"
    assert "countries outside the requested list: ['Atlantis']" in fake.calls()[1].prompt
    cat = Catalog(WorkDir.open(wd))
    assert [r["name"] for r in cat.query("SELECT name FROM concepts ORDER BY name")] == [
        "street food",
        "train",
    ]
    rows = cat.query("SELECT * FROM concept_instances ORDER BY concept, country, round")
    assert len(rows) == 2 * 3 * 2
    raw = {"train": "Train", "street food": "street  food."}
    countries = (("JPN", "Japan"), ("THA", "Thailand"), ("NGA", "Nigeria"))
    assert {(r["concept"], r["country"], r["instance"]) for r in rows if r["round"] == 2} == {
        (c, code, f"{raw[c]} of {name}") for c in raw for code, name in countries
    }
    run = cat.last_run("concepts")
    params = json.loads(run["params_json"])
    assert params["prompt_sha"] == files.sha256_file(datatables.data_dir() / "prompts/concepts.txt")
    usage = json.loads(run["usage_json"])
    assert usage["api_calls"] == 5 and usage["reasks"] == 1 and usage["prompt_tokens"] == 55
    # a re-run: zero API calls, same catalog
    assert concepts.main(argv) == 0 and len(fake.calls()) == 5
    assert (
        concepts.main(
            _argv(
                wd,
                "--countries",
                "JPN,THA,NGA",
                "--rounds",
                "2",
                "--batch-size",
                "2",
                "--no-curated",
                "--llm-retry-failed",
            )
        )
        == 0
    )
    assert len(fake.calls()) == 5  # nothing failed, nothing to ask again
    out = tmp_path / "cands.csv"
    assert concepts.main(["--workdir", str(wd), "--export-candidates", str(out)]) == 0
    with open(out, encoding="utf-8") as f:
        cands = list(csv.DictReader(f))
    assert [(c["concept"], c["n_instances"], c["n_countries"], c["n_rounds"]) for c in cands] == [
        ("street food", "6", "3", "2"),
        ("train", "6", "3", "2"),
    ]
    assert json.loads(cands[1]["instances_json"])["JPN"] == "Train of Japan"
    cat.close()
    import pipeline.cli as cli

    for table in ("stage_runs", "llm_requests", "concepts"):
        for ext in ("csv", "parquet"):
            dest = wd / "exports" / f"{table}.{ext}"
            assert cli.main(["--workdir", str(wd), "export", table, "--out", str(dest)]) == 0
    assert len(list((wd / "exports").iterdir())) == 6
    secret = KEY.encode()
    for path in [*wd.rglob("*"), out]:
        if path.is_file():
            assert secret not in path.read_bytes(), path
    assert KEY not in capsys.readouterr().out and KEY not in caplog.text


@pytest.mark.integration
def test_an_answer_that_never_validates_is_recorded_with_its_raw_text(fake, tmp_path):
    fake.respond_with(
        lambda req: answer(
            concept_answer(req, bad="Atlantis") if "Nigeria" in req.prompt else concept_answer(req)
        )
    )
    wd = tmp_path / "w"
    argv = _argv(
        wd, "--countries", "JPN,NGA", "--batch-size", "1", "--no-curated", "--llm-max-reasks", "1"
    )
    assert concepts.main(argv) == 0
    cat = Catalog(WorkDir.open(wd))
    reqs = {r["item"]: r for r in cat.query("SELECT * FROM llm_requests")}
    bad = reqs["round=1;countries=NGA"]
    assert bad["status"] == "failed" and "Atlantis" in bad["raw"] and bad["attempts"] == 2
    assert bad["reason"].startswith("rejected: countries outside the requested list")
    assert reqs["round=1;countries=JPN"]["status"] == "ok"
    assert {r["country"] for r in cat.query("SELECT country FROM concept_instances")} == {"JPN"}
    assert cat.last_run("concepts")["status"] == "done"
    assert json.loads(cat.last_run("concepts")["counts_json"])["requests_not_ok"] == 1


def test_missing_key_and_bad_input_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    wd = str(tmp_path / "w")
    assert concepts.main(["--workdir", wd, "--llm", "gemini:gemini-2.5-flash"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), or use --llm offline"
    ]
    assert concepts.main(["--workdir", wd, "--llm", "offline", "--countries", "Atlantis"]) == 2
    assert "unknown country 'Atlantis'" in capsys.readouterr().err
    assert concepts.main(["--workdir", wd, "--llm", "offline", "--rounds", "0"]) == 2


def test_a_prompt_with_an_unknown_placeholder_is_bad_input(tmp_path, monkeypatch, capsys):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(datatables.data_dir(), data)
    (data / "prompts" / "concepts.txt").write_text("List for $countries in $language\n")
    monkeypatch.setenv("XCM_DATA_DIR", str(data))
    assert concepts.main(["--workdir", str(tmp_path / "w"), "--llm", "offline"]) == 2
    assert "bad placeholder 'language'" in capsys.readouterr().err


@pytest.mark.parametrize("fault", ["503", "refused"])
def test_a_run_where_no_request_succeeded_is_failed_not_done(tmp_path, fake, monkeypatch,
                                                             capsys, fault):
    """Gemini down (every answer a 503, or connections refused): exit 2 with one line, the
    run recorded ``failed`` with the reason, never ``done`` with 0 instances."""
    if fault == "refused":
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        monkeypatch.setenv("XCM_GEMINI_BASE_URL", f"http://127.0.0.1:{port}")
    from tests.fakes.gemini import error

    fake.respond_with(lambda req: error(503, "overloaded"))
    argv = _argv(tmp_path / "w", "--countries", "THA,JPN,KEN", "--batch-size", "1",
                 "--llm-retries", "1")
    assert concepts.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: concepts: none of 3 requests succeeded (last: ")
    assert ("ConnectError" if fault == "refused" else "503 UNAVAILABLE") in err
    with Catalog.open(tmp_path / "w") as cat:
        run = cat.last_run("concepts")
    assert run["status"] == "failed" and run["summary"].startswith("failed: StageInputError")


def test_no_key_is_refused_before_anything_is_made(tmp_path, capsys, monkeypatch):
    from builder.tagging import stage as tagging

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    for main in (concepts.main, tagging.main):
        assert main(["--workdir", str(tmp_path / "w")]) == 2
        assert "no Gemini API key" in capsys.readouterr().err
        assert not (tmp_path / "w").exists()


def test_a_stage_that_needs_earlier_ones_makes_nothing_in_an_empty_folder(tmp_path, capsys):
    from builder import image_dedup
    from builder.crawl import stage as crawl
    from builder.tagging import stage as tagging

    wd = tmp_path / "w"
    for main, extra, first in ((crawl.main, [], "builder.queries"),
                               (image_dedup.main, [], "python -m builder.crawl "),
                               (tagging.main, ["--llm", "offline"], "python -m builder.crawl ")):
        assert main(["--workdir", str(wd), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f"error: no catalog in {wd}: nothing built there yet") and first in err
        assert not wd.exists()
