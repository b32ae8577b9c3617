"""Stage ``queries`` (table, LLM through the fake server, offline) and the shipped table."""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from collections import defaultdict

import pytest

from benchmark import tables
from builder import queries
from builder.catalog import Catalog
from builder.llm import OfflineLLM
from builder.queries import native_country_names, run_queries, table_rows, write_table
from builder.workdir import WorkDir
from tests.fakes.gemini import FakeGemini, answer

KEY = "AIzaFAKE-queries-sentinel-13579"

# Native terms that are spelled like the English concept because they ARE the word in that
# language (checked when the table was written); anything else equal to English is an error.
COGNATES = {
    "de": {"taxi", "bus", "sport", "ritual", "statue", "restaurant", "hotel", "zoo", "museum"},
    "fr": {
        "train",
        "taxi",
        "bus",
        "sport",
        "architecture",
        "statue",
        "bracelet",
        "restaurant",
        "animal",
        "art",
        "zoo",
        "dessert",
    },
    "es": {"taxi", "ritual", "funeral", "animal", "hotel", "capital"},
    "pt": {"ritual", "funeral", "cinema", "animal", "hotel", "capital"},
}


def test_shipped_table_is_complete_and_consistent():
    rows = tables.queries()
    concepts, countries = tables.concepts(), tables.countries()
    assert len(concepts) == 139 and len(rows) == 139 * 16
    assert {(r["concept"], r["country"]) for r in rows} == {
        (k, c.code) for k in concepts for c in countries
    }
    by_code = {c.code: c for c in countries}
    terms: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in rows:
        c = by_code[r["country"]]
        assert all(r[col].strip() == r[col] and r[col] for col in tables.QUERY_COLUMNS), r
        assert r["language"] == c.language
        assert r["english_query"] == f"{r['concept']} {c.name}"
        assert r["native_query"].startswith(r["native_term"] + " ")
        assert (r["source"], r["reviewed"]) == ("generated", "false")
        assert unicodedata.is_normalized("NFC", r["native_term"])
        terms[(r["concept"], r["language"])].add(r["native_term"])
        if c.language == "en":
            assert r["native_term"] == r["concept"] and r["native_query"] == r["english_query"]
        elif r["native_term"].lower() == r["concept"]:
            assert r["concept"] in COGNATES.get(c.language, set()), (r["concept"], c.language)
    assert all(len(v) == 1 for v in terms.values())  # one term per concept and language
    nt = tables.native_terms()
    assert nt[("food", "th")] == "อาหาร" and nt[("train", "ja")] == "電車"
    assert nt[("food", "yo")] == "oúnjẹ" and nt[("food", "sw")] == "chakula"
    # scripts: each language's terms are written in its script
    script = {
        "zh": r"[\u4e00-\u9fff]",
        "ja": r"[\u3040-\u30ff\u4e00-\u9fff]",
        "ar": r"[\u0600-\u06ff]",
        "th": r"[\u0e00-\u0e7f]",
        "hi": r"[\u0900-\u097f]",
    }
    for (concept, lang), (term,) in terms.items():
        if lang in script:
            assert re.search(script[lang], term), (concept, lang, term)
    yo = [t for (k, lang), (t,) in terms.items() if lang == "yo"]
    assert sum(not t.isascii() for t in yo) >= 130  # tone marks and underdots
    assert native_country_names(table_rows())["NGA"] == "Nàìjíríà"


def test_table_source_fills_the_catalog(tmp_path):
    cat = Catalog(WorkDir.open(tmp_path / "w"))
    counts = run_queries(
        cat, OfflineLLM(), tables.resolve_countries("THA,NGA,ESP,ARG"), concepts=["food", "train"]
    )
    assert counts["native_ok"] == 8 and counts["by_source"] == {"table": 8}
    row = {(r["concept"], r["country"], r["kind"]): r for r in cat.query("SELECT * FROM queries")}
    assert row[("food", "THA", "native")]["text"] == "อาหาร ไทย"
    assert row[("food", "THA", "native")]["native_term"] == "อาหาร"
    assert row[("food", "THA", "english")]["text"] == "food Thailand"
    assert row[("food", "THA", "english")]["language"] == "en"
    assert (
        row[("train", "ARG", "native")]["native_term"]
        == row[("train", "ESP", "native")]["native_term"]
    )
    out = tmp_path / "q.csv"
    assert write_table(cat, out) == 8
    with open(out, encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    shipped = table_rows()
    for r in written:
        ref = shipped[(r["concept"], r["country"])]
        assert {k: r[k] for k in tables.QUERY_COLUMNS if k != "source"} == {
            k: ref[k] for k in tables.QUERY_COLUMNS if k != "source"
        }
        assert r["source"] == "table"


def test_offline_fallback_without_table(tmp_path):
    cat = Catalog(WorkDir.open(tmp_path / "w"))
    run_queries(
        cat,
        OfflineLLM(),
        tables.resolve_countries("THA,KEN"),
        concepts=["food", "bicycle"],
        use_table=False,
    )
    row = {
        (r["concept"], r["country"]): r
        for r in cat.query("SELECT * FROM queries WHERE kind='native'")
    }
    # no table term for the concept: the English concept, marked; native country name kept
    assert row[("bicycle", "THA")]["text"] == "bicycle ไทย"
    assert row[("bicycle", "THA")]["source"] == "offline"
    assert row[("bicycle", "THA")]["reason"] == "offline: no native term"
    assert row[("food", "KEN")]["text"] == "food Kenya"
    assert all(r["status"] == "ok" for r in row.values())
    # with the table: offline takes the table's term for (concept, language)
    cat2 = Catalog(WorkDir.open(tmp_path / "w2"))
    run_queries(cat2, OfflineLLM(), tables.resolve_countries("THA"), concepts=["food", "bicycle"])
    got = {
        r["concept"]: (r["text"], r["source"])
        for r in cat2.query("SELECT * FROM queries WHERE kind='native'")
    }
    assert got == {"food": ("อาหาร ไทย", "table"), "bicycle": ("bicycle ไทย", "offline")}


def _responder(bad_for: str | None = None):
    def respond(req):
        p = req.prompt
        concept = re.search(r'^Concept \(English\): "(.+)"$', p, re.M).group(1)
        lang = re.search(r"\(BCP-47: (\S+)\)", p).group(1)
        names = re.search(r"^Countries: (.+)$", p, re.M).group(1).split("; ")
        if bad_for and bad_for in names:
            names = ["Atlantis"]
        term = f"{concept}-{lang}"
        return answer(
            {
                "native_term": term,
                "queries": [{"country": n, "native_query": f"{term} {n}"} for n in names],
            }
        )

    return respond


@pytest.mark.integration
def test_generated_through_fake_gemini(tmp_path, monkeypatch):
    with FakeGemini() as fake:
        monkeypatch.setenv("GOOGLE_API_KEY", KEY)
        monkeypatch.setenv("XCM_GEMINI_BASE_URL", fake.url)
        fake.respond_with(_responder(bad_for="Thailand"))
        wd = tmp_path / "w"
        argv = [
            "--workdir",
            str(wd),
            "--llm",
            "gemini:gemini-fake",
            "--countries",
            "ESP,ARG,THA",
            "--no-table",
            "--llm-rpm",
            "0",
            "--llm-max-reasks",
            "0",
        ]
        with Catalog(WorkDir.open(wd)) as cat:  # three kept concepts (as after concept_dedup)
            with cat.tx() as con:
                con.executemany(
                    "INSERT INTO concepts (name, source, status) VALUES (?, ?, ?)",
                    [
                        ("food", "curated", "kept"),
                        ("train", "curated", "kept"),
                        ("bicycle", "generated", "kept"),
                        ("tram", "generated", "merged"),
                    ],
                )
        assert queries.main(argv) == 0
        n = 3
        assert len(fake.calls()) == 2 * n  # one per (concept, language): es shared by ESP, ARG
        es = next(c for c in fake.calls() if "(BCP-47: es)" in c.prompt and '"food"' in c.prompt)
        assert "Countries: Spain; Argentina" in es.prompt
        cat = Catalog(WorkDir.open(wd))
        row = {
            (r["concept"], r["country"]): r
            for r in cat.query("SELECT * FROM queries WHERE kind='native'")
        }
        assert row[("food", "ARG")]["text"] == "food-es Argentina"
        assert row[("food", "ARG")]["source"] == "generated"
        assert row[("food", "THA")]["status"] == "failed" and row[("food", "THA")]["text"] == ""
        failed = cat.query("SELECT * FROM llm_requests WHERE stage='queries' AND status='failed'")
        assert len(failed) == n and "Atlantis" in failed[0]["raw"]
        counts = json.loads(cat.last_run("queries")["counts_json"])
        assert counts["native_ok"] == 2 * n and counts["native_not_ok"] == n
        # re-run: failures are cached (zero calls); --llm-retry-failed asks again
        assert queries.main(argv) == 0 and len(fake.calls()) == 2 * n
        fake.respond_with(_responder())
        assert queries.main([*argv, "--llm-retry-failed"]) == 0
        assert len(fake.calls()) == 3 * n
        assert cat.query("SELECT COUNT(*) FROM queries WHERE status!='ok'")[0][0] == 0
        cat.close()
        for p in wd.rglob("*"):
            if p.is_file():
                assert KEY.encode() not in p.read_bytes(), p


@pytest.mark.integration
def test_a_country_missing_from_the_table_gets_the_languages_term(tmp_path, monkeypatch):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tables.data_dir(), data)
    rows = [r for r in tables.queries() if r["country"] != "ARG"]
    with open(data / "queries.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=tables.QUERY_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    monkeypatch.setenv("XCM_DATA_DIR", str(data))
    with FakeGemini() as fake:
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        monkeypatch.setenv("XCM_GEMINI_BASE_URL", fake.url)
        fake.push(
            answer(
                {
                    "native_term": "alimento",
                    "queries": [{"country": "Argentina", "native_query": "alimento Argentina"}],
                }
            )
        )
        fake.push(
            answer(
                {
                    "native_term": "comida",
                    "queries": [{"country": "Argentina", "native_query": "comida Argentina"}],
                }
            )
        )
        wd = tmp_path / "w"
        with Catalog(WorkDir.open(wd)) as cat:
            with cat.tx() as con:
                con.execute(
                    "INSERT INTO concepts VALUES ('food', 'curated', 'kept', NULL, NULL,"
                    " NULL, NULL)"
                )
        argv = [
            "--workdir",
            str(wd),
            "--llm",
            "gemini:gemini-fake",
            "--countries",
            "ESP,ARG",
            "--llm-rpm",
            "0",
        ]
        assert queries.main(argv) == 0
        first, second = fake.calls()
        assert (
            "Use exactly this native_term, already chosen for other countries of this"
            ' language: "comida"' in first.prompt
        )
        assert "Countries: Argentina\n" in first.prompt
        assert "native_term must be 'comida'" in second.prompt
        with Catalog(WorkDir.open(wd)) as cat:
            got = {
                r["country"]: (r["text"], r["native_term"], r["source"])
                for r in cat.query("SELECT * FROM queries WHERE kind='native'")
            }
    assert got == {
        "ESP": ("comida España", "comida", "table"),
        "ARG": ("comida Argentina", "comida", "generated"),
    }


def test_queries_of_concepts_no_longer_kept_become_stale(tmp_path):
    cat = Catalog(WorkDir.open(tmp_path / "w"))
    with cat.tx() as con:
        con.executemany(
            "INSERT INTO concepts (name, source, status) VALUES (?, 'curated', 'kept')",
            [("food",), ("train",)],
        )
    th = tables.resolve_countries("THA")
    run_queries(cat, OfflineLLM(), th)
    assert cat.query("SELECT COUNT(*) FROM queries WHERE status='ok'")[0][0] == 4
    with cat.tx() as con:
        con.execute("UPDATE concepts SET status='merged', merged_into='food' WHERE name='train'")
    run_queries(cat, OfflineLLM(), th)
    got = {
        (r["concept"], r["kind"]): (r["status"], r["reason"])
        for r in cat.query("SELECT * FROM queries")
    }
    assert got[("train", "native")] == ("stale", "concept no longer kept")
    assert got[("food", "native")] == ("ok", None)
