"""Push, annotate (three annotator users), pull, decide, agree: against a real Label Studio.

Expected decisions and agreement numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

import annotation
from annotation.cli import main
from annotation.exports import export_tasks
from annotation.pull import format_report, pull
from annotation.push import push
from annotation.status import format_status, status
from builder.catalog import Catalog
from tests.annotation import synth
from tests.annotation.people import Person, join

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _choice(idx: int, value: str) -> dict:
    return {"from_name": f"decision_{idx}", "to_name": f"image_{idx}", "type": "choices",
            "value": {"choices": [value]}}


NONE = {"from_name": "group", "to_name": "group_info", "type": "choices",
        "value": {"choices": ["none_duplicates"]}}


def _concepts(*names: str) -> list[dict]:
    return [{"from_name": "concepts", "to_name": "image", "type": "choices",
             "value": {"choices": list(names)}}]


@pytest.fixture(scope="module")
def annotators(label_studio, ls_conn) -> dict[str, Person]:
    """Three annotators who joined by the invitation link (and the admin as a fourth
    reviewer), each answering as themselves: ``{email: Person}`` (an answer the admin saves
    "for" someone is the admin's edit and does not count)."""
    out = {f"ann{n}@example.com": join(label_studio.url, label_studio.token,
                                       f"ann{n}@example.com") for n in (1, 2, 3)}
    me = ls_conn.client.users.whoami()
    out[ls_conn.user_email] = Person(label_studio.url, ls_conn.user_email, label_studio.token,
                                     int(me.id))
    return out


def _create(id: int, completed_by: Person, result: list[dict], was_cancelled: bool = False
            ) -> SimpleNamespace:
    """An answer saved by its author (``.id``: the annotation id)."""
    return SimpleNamespace(id=completed_by.annotate(id, result, cancelled=was_cancelled))


def _task_ids(cat, kind: str) -> dict[str, int]:
    """``{"group:<group id>" or "image:<sha256>": task id}``."""
    rows = cat.query("SELECT * FROM ls_tasks WHERE kind=?", (kind,))
    return {f"group:{r['group_id']}" if kind == "duplicates" else r["task_key"]: int(r["task_id"])
            for r in rows}


def _status(cat, letter_items: list[int]) -> set[tuple[str, str]]:
    marks = ",".join("?" * len(letter_items))
    return {(r["status"], r["reason"]) for r in cat.query(
        f"SELECT status, reason FROM items WHERE item_id IN ({marks})", tuple(letter_items))}


def test_duplicates_push_pull_agreement(label_studio, ls_conn, annotators):
    root = label_studio.document_root / "dup-work"
    cat, sha, items = synth.build(root)
    client = ls_conn.client
    kw = dict(title="dup review test", document_root=str(label_studio.document_root))

    rep = push(cat, ls_conn, "duplicates", **kw)
    assert (rep.created, rep.unchanged) == (4, 0)
    assert rep.counts == {"fewer than 2 distinct images": 1}
    rep2 = push(cat, ls_conn, "duplicates", **kw)  # pushing twice duplicates nothing
    assert (rep2.created, rep2.unchanged, rep2.retired) == (0, 4, 0)
    tasks = export_tasks(client, rep.project_id, all_tasks=True)
    assert len(tasks) == 4
    project = client.projects.get(rep.project_id)
    assert project.maximum_annotations == 3
    assert project.model_version == "xcm3-image-dedup"
    assert "same scene or object without meaningful change" in project.expert_instruction
    tid = _task_ids(cat, "duplicates")
    assert set(tid) == {"group:1", "group:2", "group:3", "group:4"}
    t1 = next(t for t in tasks if t["id"] == tid["group:1"])
    assert [i["sha256"] for i in t1["data"]["images"]] == [sha["A"], sha["B"], sha["C"]]
    # the automatic proposal (keep A, remove the others) is the prediction of the model version
    pred = client.predictions.list(task=tid["group:1"])
    assert [p.model_version for p in pred] == ["xcm3-image-dedup"]
    assert [r["value"]["choices"][0] for r in pred[0].result] == ["keep", "remove", "remove"]
    # the image is served by Label Studio's local-files storage
    img = httpx.get(label_studio.url + t1["data"]["images"][0]["url"],
                    headers={"Authorization": f"Token {label_studio.token}"}, timeout=10)
    assert img.status_code == 200 and img.content == synth.png(ord("A"))

    u1, u2, u3, admin = (annotators[e] for e in (
        "ann1@example.com", "ann2@example.com", "ann3@example.com", ls_conn.user_email))
    ann = _create
    # group 1 (A B C): u1 keep/remove/keep, u2 keep/remove/remove, u3 "none are duplicates"
    ann(id=tid["group:1"], completed_by=u1, result=[_choice(0, "keep"), _choice(1, "remove"),
                                                    _choice(2, "keep")])
    a12 = ann(id=tid["group:1"], completed_by=u2, result=[
        _choice(0, "keep"), _choice(1, "remove"), _choice(2, "remove")])
    ann(id=tid["group:1"], completed_by=u3, result=[NONE])
    # group 2 (D E): all three keep D, remove E
    for u in (u1, u2, u3):
        ann(id=tid["group:2"], completed_by=u, result=[_choice(0, "keep"), _choice(1, "remove")])
    # group 3 (F G): G gets keep 2 / remove 2 with the admin as a fourth reviewer: a tie
    g3 = {u: ann(id=tid["group:3"], completed_by=u, result=[_choice(0, "keep"), _choice(1, g)])
          for u, g in ((u1, "remove"), (u2, "keep"), (u3, "remove"), (admin, "keep"))}
    # group 4 (H I): two answers and a skip: fewer than the three required
    ann(id=tid["group:4"], completed_by=u1, result=[_choice(0, "keep"), _choice(1, "remove")])
    ann(id=tid["group:4"], completed_by=u2, result=[_choice(0, "keep"), _choice(1, "keep")])
    ann(id=tid["group:4"], completed_by=u3, result=[], was_cancelled=True)

    report = pull(cat, ls_conn, "duplicates", min_annotators=3)
    assert report["stored"] == {"new": 13}
    assert report["decisions"] == {"keep": 4, "needs_review": 3, "remove": 2}
    assert _status(cat, items["A"]) == {("kept", "review: majority of 3 (keep 3, remove 0)")}
    assert len(items["A"]) == 2  # both occurrences of A follow the decision
    assert _status(cat, items["B"]) == {("removed", "review: majority of 3 (keep 1, remove 2)")}
    assert _status(cat, items["C"]) == {("kept", "review: majority of 3 (keep 2, remove 1)")}
    assert _status(cat, items["D"]) == {("kept", "review: majority of 3 (keep 3, remove 0)")}
    assert _status(cat, items["E"]) == {("removed", "review: majority of 3 (keep 0, remove 3)")}
    assert _status(cat, items["F"]) == {("kept", "review: majority of 4 (keep 4, remove 0)")}
    assert _status(cat, items["G"]) == {("needs_review", "review: tie (keep 2, remove 2)")}
    assert _status(cat, items["H"]) == {("needs_review", "review: 2/3 annotators (keep 2, remove 0)")}
    assert _status(cat, items["I"]) == {("needs_review", "review: 2/3 annotators (keep 1, remove 1)")}
    assert _status(cat, items["J"]) == {("kept", None)}  # not pushed: untouched
    assert _status(cat, items["M"]) == {("near_duplicate", None)}  # not shown: untouched
    groups = {r["group_id"]: (r["status"], r["kept_item_id"])
              for r in cat.query("SELECT * FROM dedup_groups")}
    assert groups == {1: ("reviewed", items["A"][0]), 2: ("reviewed", items["D"][0]),
                      3: ("needs_review", items["F"][0]), 4: ("needs_review", items["H"][0]),
                      5: ("auto", items["J"][0]), 6: ("needs_review", items["L"][0])}
    # Agreement over the 5 images with exactly 3 votes (A B C D E), as (keep, remove) counts:
    # A (3,0) B (1,2) C (2,1) D (3,0) E (0,3).
    # Fleiss: P_i = 1, 1/3, 1/3, 1, 1 -> mean 11/15; p = (9/15, 6/15) -> P_e = 0.52;
    #   kappa = (11/15 - 0.52) / 0.48 = 4/9.
    # Krippendorff (nominal): o_kk = 3+3+1 = 7, o_rr = 3+1 = 4, o_kr = o_rk = 2, n = 15,
    #   n_k = 9, n_r = 6; D_o = 4/15, D_e = 2*9*6/(15*14) = 18/35; alpha = 1 - 14/27 = 13/27.
    ag = report["agreement"]
    assert ag["n_units"] == 5 and ag["n_raters"] == 3
    assert ag["fleiss_kappa"] == pytest.approx(4 / 9)
    assert ag["krippendorff_alpha"] == pytest.approx(13 / 27)
    assert report["annotators"]["ann1@example.com"] == {
        "annotations": 4, "keep": 5, "remove": 4}
    assert report["annotators"]["ann3@example.com"] == {
        "annotations": 4, "keep": 2, "none_duplicates": 3, "remove": 2, "skipped": 2}
    text = format_report(report).splitlines()
    assert text[1:4] == [
        "annotations: new 13", "decisions per image: keep 4, needs_review 3, remove 2",
        "agreement over 5 images with 3 votes: Krippendorff alpha 0.481, Fleiss kappa 0.444"]
    assert text[4:] == [
        f"  {ls_conn.user_email}: annotations 1, keep 2",
        "  ann1@example.com: annotations 4, keep 5, remove 4",
        "  ann2@example.com: annotations 4, keep 6, remove 3",
        "  ann3@example.com: annotations 4, keep 2, none_duplicates 3, remove 2, skipped 2"]
    saved = json.loads((root / "exports" / "annotation" / "duplicates_pull.json").read_text())
    assert saved["agreement"] == ag

    before = synth.snapshot(cat)
    again = pull(cat, ls_conn, "duplicates", min_annotators=3)  # a second pull changes nothing
    assert again["stored"] == {"unchanged": 13}
    assert synth.snapshot(cat) == before

    # u2 changes their mind on B (remove -> keep): B becomes (2,1) and is kept.
    u2.update(a12.id, [_choice(0, "keep"), _choice(1, "keep"), _choice(2, "remove")])
    third = pull(cat, ls_conn, "duplicates", min_annotators=3)
    assert third["stored"] == {"changed": 1, "unchanged": 12}
    assert _status(cat, items["B"]) == {("kept", "review: majority of 3 (keep 2, remove 1)")}
    hist = cat.query("SELECT decision, current FROM reviews WHERE annotation_id=? ORDER BY"
                     " review_id", (a12.id,))
    assert [(r["decision"], r["current"]) for r in hist] == [
        ("keep", 0), ("remove", 0), ("remove", 0), ("keep", 1), ("keep", 1), ("remove", 1)]
    # Now A (3,0) B (2,1) C (2,1) D (3,0) E (0,3): P bar = 11/15, p = (2/3, 1/3), P_e = 5/9,
    # kappa = (11/15 - 5/9) / (4/9) = 0.4; o_kk = 8, o_rr = 3, o_kr = o_rk = 2, n_k = 10,
    # n_r = 5, D_e = 100/210, alpha = 1 - (4/15) / (10/21) = 0.44.
    assert third["agreement"]["fleiss_kappa"] == pytest.approx(0.4)
    assert third["agreement"]["krippendorff_alpha"] == pytest.approx(0.44)

    st = status(cat, ls_conn)
    assert st[0]["annotated_by"] == {"0": 0, "1": 0, "2": 1, "3+": 3}
    assert st[0]["agreement"] == third["agreement"]
    assert "annotated by 0: 0, 1: 0, 2: 1, 3+: 3" in format_status(st)

    # the fourth reviewer withdraws: G has keep 1 / remove 2 and is removed; the rows stay
    client.annotations.delete(id=g3[admin].id)
    fourth = pull(cat, ls_conn, "duplicates", min_annotators=3)
    assert fourth["stored"] == {"deleted in Label Studio": 1, "unchanged": 12}
    assert _status(cat, items["G"]) == {("removed", "review: majority of 3 (keep 1, remove 2)")}
    assert cat.query("SELECT status FROM dedup_groups WHERE group_id=3")[0][0] == "reviewed"
    kept = cat.query("SELECT decision, current FROM reviews WHERE annotation_id=?", (g3[admin].id,))
    assert [(r["decision"], r["current"]) for r in kept] == [("keep", 0), ("keep", 0)]
    # every annotation of group 2 withdrawn: its decisions are taken back, the group reopens
    for a in client.annotations.list(id=tid["group:2"]):
        client.annotations.delete(id=a.id)
    fifth = pull(cat, ls_conn, "duplicates", min_annotators=3)
    assert fifth["stored"] == {"deleted in Label Studio": 3, "unchanged": 9}
    for letter in "DE":
        assert _status(cat, items[letter]) == {
            ("needs_review", "review: 0/3 annotators (keep 0, remove 0)")}
    assert cat.query("SELECT status FROM dedup_groups WHERE group_id=2")[0][0] == "needs_review"
    assert len(cat.query("SELECT * FROM reviews WHERE task_id=?", (tid["group:2"],))) == 6


def test_push_recovers_tasks_imported_but_not_recorded(label_studio, ls_conn):
    cat, _, _ = synth.build(label_studio.document_root / "crash-work")
    kw = dict(title="crash test", document_root=str(label_studio.document_root))
    first = push(cat, ls_conn, "duplicates", **kw)
    with cat.tx() as con:  # as if the push died between the import and the record
        con.execute("DELETE FROM ls_tasks")
    again = push(cat, ls_conn, "duplicates", **kw)
    assert again.project_id == first.project_id
    assert (again.created, again.unchanged) == (0, 4)
    assert len(export_tasks(ls_conn.client, first.project_id, all_tasks=True)) == 4
    assert len(cat.query("SELECT * FROM ls_tasks")) == 4
    with cat.tx() as con:  # image_dedup ran again and renumbered group 2 as group 7
        synth.copy_group(con, 2, 7)
        con.execute("UPDATE items SET group_id=7 WHERE group_id=2")
        con.execute("DELETE FROM dedup_groups WHERE group_id=2")
    third = push(cat, ls_conn, "duplicates", **kw)
    assert (third.created, third.unchanged, third.changed) == (0, 3, 1)  # the same images: the
    # same task, its data (group 7) replaced in place


def test_tags_push_pull_precision_recall(label_studio, ls_conn, annotators):
    cat, sha, _ = synth.build(label_studio.document_root / "tag-work")
    rep = push(cat, ls_conn, "tags", title="tag check test", sample=10, seed=1,
               document_root=str(label_studio.document_root))
    assert rep.created == 3  # T4's tagging failed: not sampled
    assert push(cat, ls_conn, "tags", title="tag check test", sample=10, seed=1,
                document_root=str(label_studio.document_root)).created == 0
    tid = {k.split(":", 1)[1]: v for k, v in _task_ids(cat, "tags").items()}
    config = ls_conn.client.projects.get(rep.project_id).label_config
    assert all(f'<Choice value="{c}"/>' in config for c in synth.CONCEPTS)
    pred = ls_conn.client.predictions.list(task=tid[sha["T1"]])
    assert pred[0].result[0]["value"]["choices"] == ["food", "market"]
    u1, u2, u3 = (annotators[f"ann{n}@example.com"] for n in (1, 2, 3))
    answers = {  # people's majority: T1 {food, market}, T2 {temple, dance}, T3 {dance}
        "T1": {u1: ("food", "market"), u2: ("food",), u3: ("food", "market")},
        "T2": {u1: ("temple",), u2: ("temple", "dance"), u3: ("temple", "dance")},
        "T3": {u1: ("dance",), u2: ("dance",), u3: ("food",)},
    }
    for name, by_user in answers.items():
        for u, concepts in by_user.items():
            _create(tid[sha[name]], u, _concepts(*concepts))
    report = pull(cat, ls_conn, "tags", min_annotators=3)
    # Gemini vs people: T1 tp 2 of 2/2, T2 tp 1 of 1/2, T3 tp 1 of 2/1 -> P = 4/5, R = 4/5.
    g = report["gemini_vs_people"]
    assert (g["true_positives"], g["n_predicted"], g["n_reference"]) == (4, 5, 5)
    assert g["precision"] == pytest.approx(0.8) and g["recall"] == pytest.approx(0.8)
    assert g["exact_match"] == pytest.approx(1 / 3)
    # ann1 alone: {food, market} {temple} {dance}: tp 4, |Gemini| 5, |ann1| 4.
    a1 = report["per_annotator"]["ann1@example.com"]
    assert a1["precision"] == pytest.approx(0.8) and a1["recall"] == pytest.approx(1.0)
    stored = cat.query("SELECT decision FROM reviews WHERE kind='tags' AND sha256=? AND"
                       " annotator='ann2@example.com'", (sha["T2"],))
    assert [r["decision"] for r in stored] == ['["dance", "temple"]']
    assert json.loads(cat.query("SELECT tags_json FROM tags WHERE sha256=?",
                                (sha["T2"],))[0]["tags_json"]) == ["temple"]  # not overwritten
    st = status(cat, ls_conn)
    assert [s["kind"] for s in st] == ["tags"]
    assert st[0]["annotated_by"] == {"0": 0, "1": 0, "2": 0, "3+": 3}
    assert st[0]["gemini_vs_people"] == g
    before = synth.snapshot(cat)
    assert pull(cat, ls_conn, "tags")["stored"] == {"unchanged": 9}
    assert synth.snapshot(cat) == before


def test_cli_bad_token_and_no_project(label_studio, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "0" * 40)
    assert main(["status", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rejected LABEL_STUDIO_API_KEY (HTTP 401)" in err[0]
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    assert main(["pull", "--workdir", str(tmp_path), "--kind", "duplicates"]) == 2
    assert "run `python -m annotation push --kind duplicates` first" in capsys.readouterr().err
    assert main(["status", "--workdir", str(tmp_path)]) == 0
    assert "nothing pushed yet" in capsys.readouterr().out


def test_cli_push_with_serve_images_urls(label_studio, ls_conn, monkeypatch, capsys):
    root = label_studio.document_root / "cli-work"
    cat, sha, _ = synth.build(root)
    cat.close()
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    argv = ["push", "--workdir", str(root), "--kind", "duplicates", "--project-title",
            "cli test", "--images", "http://127.0.0.1:8081", "--annotators", "2"]
    assert main(argv) == 0
    assert "4 created, 0 unchanged, 0 changed, 0 retired" in capsys.readouterr().out
    assert main(argv) == 0
    assert "0 created, 4 unchanged, 0 changed, 0 retired" in capsys.readouterr().out
    with Catalog.open(root) as cat2:
        data = json.loads(cat2.query("SELECT data_json FROM ls_tasks WHERE group_id=2")[0][0])
        pid = cat2.query("SELECT project_id FROM ls_projects")[0][0]
    assert data["images"][0]["url"] == f"http://127.0.0.1:8081/img/{sha['D']}.png"
    # the builder's stage runner: annotation.main(["--workdir", W]) is `sync` (push, then pull)
    assert annotation.main(["--workdir", str(root), "--images", "http://127.0.0.1:8081"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "0 created, 4 unchanged, 0 changed, 0 retired" in out[0]
    assert out[2] == "annotations: none"
    project = ls_conn.client.projects.get(pid)
    # a push without --project-title / --annotators keeps the project's
    assert (project.title, project.maximum_annotations) == ("cli test", 2)


def test_pull_refuses_exports_that_match_no_pushed_task(label_studio, ls_conn, annotators,
                                                         monkeypatch, capsys, tmp_path):
    """Issue 15: a wrong export (another project's, or a project emptied on the server) is
    refused with one line and retires no stored decision."""
    root = label_studio.document_root / "refuse-work"
    cat, sha, items = synth.build(root)
    kw = dict(document_root=str(label_studio.document_root))
    dup = push(cat, ls_conn, "duplicates", title="refusal test", **kw)
    tags = push(cat, ls_conn, "tags", title="refusal tags", sample=10, seed=0, **kw)
    tid = _task_ids(cat, "duplicates")
    u1, u2, u3 = (annotators[f"ann{n}@example.com"] for n in (1, 2, 3))
    for u in (u1, u2, u3):
        _create(tid["group:2"], u, [_choice(0, "keep"), _choice(1, "remove")])
    pull(cat, ls_conn, "duplicates")
    assert _status(cat, items["E"]) == {("removed", "review: majority of 3 (keep 0, remove 3)")}
    before = synth.snapshot(cat)
    cat.close()
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    # the tag project's export saved to a file and pulled as the duplicate review's
    other = tmp_path / "tags-export.json"
    other.write_bytes(b"".join(ls_conn.client.projects.exports.download_sync(
        tags.project_id, export_type="JSON", download_all_tasks=True)))
    argv = ["pull", "--workdir", str(root), "--kind", "duplicates"]
    assert main([*argv, "--export-file", str(other)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.endswith(
        f"connected to Label Studio at {label_studio.url} as {ls_conn.user_email}")]
    assert len(err) == 1 and "holds 3 tasks and matches none of the 4 tasks pushed" in err[0]
    # someone deleted every task of the project on the server: its export is []
    for t in ls_conn.client.tasks.list(project=dup.project_id):
        ls_conn.client.tasks.delete(id=t.id)
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.endswith(
        f"connected to Label Studio at {label_studio.url} as {ls_conn.user_email}")]
    assert len(err) == 1
    assert f"the export of project {dup.project_id} is empty and matches none" in err[0]
    with Catalog.open(root) as again:
        assert synth.snapshot(again) == before
