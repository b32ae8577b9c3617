"""Native-speaker review of query terms (issue 14 §2): tasks, decisions, write-back, agreement.

No server: the pull runs against an in-process SDK stand-in (tests/annotation/fakes.py); the
integration and browser tests run push -> answer -> pull against a real Label Studio.
"""

from __future__ import annotations

import csv
import io
import json

import krippendorff
import numpy as np
import pytest

from annotation.cli import main
from annotation.links import ImageLinks
from annotation.projects import assign_reviewers, assigned_reviewers
from annotation.pull import pull
from annotation.query_review import term_draft, term_key, term_rows
from annotation.terms import Answer, decide_term
from builder.concepts import add_instances
from core.query_table import QUERY_COLUMNS
from tests.annotation import synth
from tests.annotation.fakes import fake_connection, record_pushed

R = {1: "r1@example.com", 2: "r2@example.com", 3: "r3@example.com", 4: "r4@example.com",
     5: "r5@example.com"}


@pytest.fixture()
def terms_cat(tmp_path):
    cat, sha, items = synth.build(tmp_path / "wd")
    synth.build_terms(cat)
    links = ImageLinks(cat.workdir.images_dir, "local-files", str(tmp_path))
    yield cat, sha, links
    cat.close()


def test_term_tasks_show_what_a_reviewer_needs(terms_cat):
    cat, sha, links = terms_cat
    rows = term_rows(cat)
    assert [(r["concept"], r["country"]) for r in rows] == [  # by locale, then table order
        ("food", "USA"), ("train", "BRA"), ("train", "PRT"), ("bus", "PRT"), ("food", "THA")]
    assert ("market", "PRT") not in {(r["concept"], r["country"]) for r in rows}  # reviewed
    assert len(term_rows(cat, include_reviewed=True)) == len(synth.TERMS)
    assert {r["country"] for r in term_rows(cat, ["PRT", "BRA"])} == {"PRT", "BRA"}
    by = {(r["concept"], r["country"]): r for r in rows}
    train = term_draft(cat, links, by[("train", "PRT")])
    assert train.key == term_key("train", "PRT", "trem") and train.prediction == []
    d = train.data
    assert d["title"] == "train | Portugal (pt-PT)" and d["proposed"] == "trem"
    assert d["concept_text"] == "English concept: train; English search term: train"
    assert d["definition"] == ("What it means: a railway train or its carriages, seen from "
                               "outside or inside; not a tram, a toy train or the station alone")
    assert d["examples"] == ("Examples in other countries: ICE high-speed train (Germany); "
                             "Shinkansen bullet train (Japan)")
    assert d["instance"] == "In Portugal, concept generation gave: Alfa Pendular"
    assert d["authors"] == "The paper authors' term (authors/3xcm): comboio"
    assert d["images"] == [] and d["proposed_source"] == "generated"
    with cat.tx() as con:  # the offline concept generation's stand-ins are no instances
        add_instances(con, "bus", 1, {"PRT": "bus in Portugal", "ARG": "bus in Argentina"})
    bus = term_draft(cat, links, by[("bus", "PRT")], definitions={}).data
    assert bus["instance"] == "Concept generation gave no instance for Portugal."
    assert bus["authors"] == "No term of the paper's authors was imported."
    assert bus["definition"] == "No definition of this concept is recorded."
    assert bus["examples"] == "No examples of it from other countries."
    # up to four images of (concept, country): the kept one first, then by rank; no removed copy
    usa = term_draft(cat, links, by[("food", "USA")]).data["images"]
    assert [i["sha256"] for i in usa] == [sha["J"], sha["A"], sha["B"], sha["C"]]
    tha = term_draft(cat, links, by[("food", "THA")]).data["images"]
    assert [i["sha256"] for i in tha] == [sha["A"], sha["L"]]
    assert tha[0]["url"].startswith("/data/local-files/?d=wd/images/")
    # a term changed after the push is a task of its own
    assert term_key("train", "PRT", "comboio") != train.key


def _a(decision, answer=None, at="2026-01-01"):
    return Answer(decision, answer, at)


def test_decide_term():
    d = decide_term({"r1": _a("better_term", "comboio", "2026-01-02"),
                     "r2": _a("better_term", "Comboio ", "2026-01-03"), "r3": _a("correct")},
                    "trem", 2)
    assert (d.outcome, d.term, d.reviewers, d.decided_at) == ("corrected", "comboio", 2, "2026-01-03")
    assert d.reason == "review: majority of 3 (comboio 2, correct 1)"
    assert decide_term({"r1": _a("correct"), "r2": _a("correct")}, "trem", 2).outcome == "accepted"
    assert decide_term({"r1": _a("unclear"), "r2": _a("unclear")}, "trem", 2).outcome == "unclear"
    single = decide_term({"r1": _a("correct")}, "trem", 2)
    assert (single.outcome, single.reason) == ("pending", "review: 1/2 reviewers (correct 1)")
    tie = decide_term({"r1": _a("correct"), "r2": _a("better_term", "comboio")}, "trem", 2)
    assert (tie.outcome, tie.reason) == ("pending", "review: no majority of 2 (comboio 1, correct 1)")
    # two different better terms are no majority for either
    split = decide_term({"r1": _a("better_term", "comboio"), "r2": _a("better_term", "combóio"),
                         "r3": _a("correct")}, "trem", 2)
    assert split.outcome == "pending"
    bad = decide_term({"r1": _a("correct"), "r2": _a("correct"),
                       "r3": _a("contradiction", "correct chosen and a different term typed: x")},
                      "trem", 2)
    assert bad.outcome == "needs_review" and "r3: contradiction" in bad.reason
    skips = decide_term({"r1": _a("skipped"), "r2": _a("correct")}, "trem", 2)
    assert skips.outcome == "pending"
    assert decide_term({"r1": _a("correct"), "r2": _a("correct"), "r3": _a("correct")},
                       "trem", 3).reviewers == 3


def _ann(aid, user, verdict, term=None, at=None):
    res = [{"from_name": "verdict", "to_name": "proposed", "type": "choices",
            "value": {"choices": [verdict]}}]
    if term is not None:
        res.append({"from_name": "better_term", "to_name": "proposed", "type": "textarea",
                    "value": {"text": [term]}})
    return {"id": aid, "completed_by": user, "result": res,
            "updated_at": at or f"2026-02-0{user}T10:00:00Z"}


@pytest.fixture()
def reviewed(terms_cat):
    """pt-PT (project 20: train 201, bus 202) and pt-BR (project 30: train 301) pushed and
    answered: train/PRT corrected to comboio, bus/PRT a tie, train/BRA accepted; r4 (a pt-BR
    reviewer) also answered train/PRT and is not counted there."""
    cat, sha, links = terms_cat
    rows = {(r["concept"], r["country"]): r for r in term_rows(cat)}
    record_pushed(cat, "queries:pt-PT", 20, [term_draft(cat, links, rows[("train", "PRT")]),
                                             term_draft(cat, links, rows[("bus", "PRT")])], 201)
    record_pushed(cat, "queries:pt-BR", 30, [term_draft(cat, links, rows[("train", "BRA")])], 301)
    assign_reviewers(cat, "pt-PT", [R[1], R[2], R[3]])
    assign_reviewers(cat, "pt-BR", [R[4], R[5]])
    conn, client = fake_connection(R)
    pt = [{"id": 201, "annotations": [_ann(1, 1, "better_term", "comboio"),
                                      _ann(2, 2, "better_term", "Comboio"),
                                      _ann(3, 3, "correct"), _ann(4, 4, "correct")]},
          {"id": 202, "annotations": [_ann(5, 1, "better_term", "autocarro"),
                                      _ann(6, 2, "correct")]}]
    br = [{"id": 301, "annotations": [_ann(7, 4, "correct"), _ann(8, 5, "correct")]}]
    client.set_tasks(pt, 20)
    client.set_tasks(br, 30)
    report = pull(cat, conn, "queries")
    return cat, conn, client, pt, report


def _terms(cat):
    return {(r["concept"], r["country"]): dict(r) for r in cat.query("SELECT * FROM query_terms")}


def test_pull_writes_reviewed_terms_and_the_csv(reviewed):
    cat, conn, client, pt, report = reviewed
    assert sorted(client.exported) == [(20, True), (30, True)]
    t = _terms(cat)
    assert {k: (v["native_term"], v["source"], v["reviewers"], v["reviewed_at"]) for k, v in t.items()
            if k[1] in ("PRT", "BRA")} == {
        ("train", "PRT"): ("comboio", "reviewed", 2, "2026-02-02T10:00:00Z"),
        ("bus", "PRT"): ("ônibus", "generated", 0, None),  # a tie waits
        ("market", "PRT"): ("mercado", "reviewed", 2, "2026-01-01T00:00:00Z"),  # untouched
        ("train", "BRA"): ("trem", "reviewed", 2, "2026-02-05T10:00:00Z"),
    }
    assert t[("train", "PRT")]["note"] == "review: corrected from 'trem' by 2 native speakers (pt-PT)"
    assert t[("train", "BRA")]["note"] == "generated by the queries stage"  # accepted: kept
    pt_rep = report["locales"]["pt-PT"]
    assert pt_rep["outcomes"] == {"corrected": 1, "pending": 1}
    assert pt_rep["not_counted"] == {R[4]: 1}  # stored, kept in history, not counted
    assert cat.query("SELECT COUNT(*) FROM reviews WHERE annotator=? AND kind='queries:pt-PT'",
                     (R[4],))[0][0] == 1
    assert report["locales"]["pt-BR"]["outcomes"] == {"accepted": 1}
    # Krippendorff alpha for pt-PT over 201 {comboio, comboio, correct} and 202 {autocarro,
    # correct}: o_cc = 1, o_ck = o_kc = 1, o_ak = o_ka = 1, n = 5; D_o = 4/5, D_e = (25 - 9)/20
    # = 4/5, alpha = 0; the same from the krippendorff package directly:
    ag = pt_rep["agreement"]
    data = np.array([[0, 2], [0, 1], [1, np.nan]], dtype=float)  # r1 r2 r3 x 201 202
    assert ag["n_units"] == 2
    assert ag["krippendorff_alpha"] == pytest.approx(0.0, abs=1e-12)
    assert ag["krippendorff_alpha"] == pytest.approx(krippendorff.alpha(
        reliability_data=data, level_of_measurement="nominal"), abs=1e-12)
    assert report["locales"]["pt-BR"]["agreement"]["krippendorff_alpha"] is None  # one value
    text = (cat.workdir.exports_dir / "queries.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == QUERY_COLUMNS
    assert len(rows) == len(synth.TERMS)
    prt = next(r for r in rows if (r["concept"], r["country"]) == ("train", "PRT"))
    assert prt == {"concept": "train", "country": "PRT", "locale": "pt-PT", "language": "pt",
                   "native_term": "comboio", "english_term": "train", "source": "reviewed",
                   "reviewers": "2", "reviewed_at": "2026-02-02T10:00:00Z",
                   "note": "review: corrected from 'trem' by 2 native speakers (pt-PT)",
                   "generic_term": ""}  # the review keeps none: reads as native_term
    unrev = next(r for r in rows if (r["concept"], r["country"]) == ("food", "THA"))
    assert (unrev["source"], unrev["reviewers"], unrev["reviewed_at"]) == ("generated", "0", "")
    saved = json.loads((cat.workdir.exports_dir / "annotation" / "queries_pull.json").read_text())
    assert saved["locales"]["pt-PT"]["outcomes"] == pt_rep["outcomes"]


def test_pull_again_changes_nothing_and_a_changed_answer_is_never_silent(reviewed):
    cat, conn, client, pt, _ = reviewed
    snap = lambda: (_terms(cat), [tuple(r) for r in cat.query(  # noqa: E731
        "SELECT * FROM term_reviews ORDER BY task_id")])
    before = snap()
    again = pull(cat, conn, "queries")
    assert again["locales"]["pt-PT"]["stored"] == {"unchanged": 6}
    assert snap() == before
    # r2 now says "correct" and types comboio: a contradiction; the correction no longer
    # stands, the pushed term comes back and the task waits for a person
    pt[0]["annotations"][1] = _ann(2, 2, "correct", "comboio", at="2026-03-01T00:00:00Z")
    client.set_tasks(pt, 20)
    third = pull(cat, conn, "queries", locales=["pt-PT"])
    assert third["locales"]["pt-PT"]["outcomes"] == {"needs_review": 1, "pending": 1}
    t = _terms(cat)[("train", "PRT")]
    assert (t["native_term"], t["source"], t["reviewers"], t["reviewed_at"], t["note"]) == (
        "trem", "generated", 0, None, "generated by the queries stage")
    tr = cat.query("SELECT outcome, reason, applied FROM term_reviews WHERE task_id=201")[0]
    assert tr["outcome"] == "needs_review" and tr["applied"] == 0
    assert "r2@example.com: contradiction (correct chosen and a different term typed" in tr["reason"]
    hist = cat.query("SELECT decision, answer, current FROM reviews WHERE annotation_id=2"
                     " ORDER BY review_id")
    assert [tuple(r) for r in hist] == [("better_term", "Comboio", 0), (
        "contradiction", "correct chosen and a different term typed: comboio", 1)]
    # the bus term was regenerated after the push; a majority for the old term is not applied
    with cat.tx() as con:
        con.execute("UPDATE query_terms SET native_term='autocarro' WHERE concept='bus'"
                    " AND country='PRT'")
    pt[1]["annotations"].append(_ann(9, 3, "correct"))
    client.set_tasks(pt, 20)
    fourth = pull(cat, conn, "queries", locales=["pt-PT"])
    assert fourth["locales"]["pt-PT"]["outcomes"]["stale"] == 1
    bus = _terms(cat)[("bus", "PRT")]
    assert (bus["native_term"], bus["source"]) == ("autocarro", "generated")


def test_only_assigned_reviewers_count(reviewed):
    cat, conn, client, pt, _ = reviewed
    # the pt-BR reviewer's answer to train/PRT does not use up the task: 3 + 1 answers
    assert client.updates == [(201, {"overlap": 4, "is_labeled": True})]
    assign_reviewers(cat, "pt-PT", [R[2]], remove=True)  # r2 is no longer a pt-PT reviewer
    assert assigned_reviewers(cat) == {"pt-BR": [R[4], R[5]], "pt-PT": [R[1], R[3]]}
    rep = pull(cat, conn, "queries", locales=["pt-PT"])
    assert rep["locales"]["pt-PT"]["not_counted"] == {R[2]: 2, R[4]: 1}
    # two unassigned answers on train/PRT, one on bus/PRT: both tasks go back to the queue
    assert client.updates[1:] == [(201, {"overlap": 5, "is_labeled": False}),
                                  (202, {"overlap": 4, "is_labeled": False})]
    assert [x for x in rep["locales"]["pt-PT"]["answers_not_counted"] if x["task"] == 202] == [
        {"task": 202, "author": R[2], "why": "not assigned"}]
    # train/PRT: comboio 1, correct 1 -> a tie; the correction is taken back
    assert rep["locales"]["pt-PT"]["outcomes"] == {"pending": 2}
    assert _terms(cat)[("train", "PRT")]["native_term"] == "trem"
    assign_reviewers(cat, "pt-PT", [R[1], R[2], R[3]], remove=True)
    rep = pull(cat, conn, "queries", locales=["pt-PT"])
    assert rep["locales"]["pt-PT"]["reviewers_assigned"] == []
    assert rep["locales"]["pt-PT"]["outcomes"] == {"pending": 2}


def test_cli_assign_and_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    wd = ["--workdir", str(tmp_path / "wd")]
    # without a server, assigning cannot check the accounts: one line, exit 2
    assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer", "a@x.org"]) == 2
    assert "set LABEL_STUDIO_URL" in capsys.readouterr().err
    conn, _ = fake_connection({1: "a@x.org", 2: "B@x.org", 3: "Rui@Example.com"})
    monkeypatch.setattr("annotation.client.connect", lambda: conn)
    # matched without case; the server's spelling is stored
    assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer", "A@X.org",
                 "--reviewer", "b@x.org"]) == 0
    assert capsys.readouterr().out == "assigned 2 reviewer(s) to pt-PT\npt-PT: B@x.org, a@x.org\n"
    assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer", "a@x.org"]) == 0
    assert capsys.readouterr().out.startswith("assigned 0 reviewer(s)")
    # an address with no account: one clear line, nothing assigned
    assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer", "rui@example.com",
                 "--reviewer", "nobody@x.org"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Label Studio account 'nobody@x.org' on" in err, err
    assert main(["assign", *wd, "--locale", "pt-PT"]) == 0
    assert capsys.readouterr().out == "pt-PT: B@x.org, a@x.org\n"
    assert main(["assign", *wd, "--locale", "pt-PT", "--reviewer", "A@x.org", "--remove"]) == 0
    assert capsys.readouterr().out.endswith("pt-PT: B@x.org\n")
    for argv, words in (
        (["assign", *wd, "--locale", "portuguese", "--reviewer", "a@x.org"],
         "--locale must be a BCP-47 locale with region like pt-PT"),
        (["assign", *wd, "--reviewer", "a@x.org"], "--reviewer needs --locale"),
        (["assign", *wd, "--locale", "pt-PT", "--reviewer", "a b"], "--reviewer must be"),
        (["push", *wd, "--kind", "queries", "--project-title", "x"],
         "--project-title does not apply to --kind queries"),
        (["push", *wd, "--kind", "duplicates", "--countries", "PRT"], "apply to --kind queries only"),
        (["push", *wd, "--kind", "queries", "--countries", "Atlantis"], "--countries: unknown country"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
