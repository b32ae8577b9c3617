"""Parts of the annotation package that need no server: configs, parsing, links, CLI errors."""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET

import pytest

import annotation
from annotation.cli import main
from annotation.client import AnnotationError, server_url
from annotation.configs import project_spec, tags_config
from annotation.guide_html import markdown_to_html
from annotation.push import ImageLinks, duplicate_drafts, group_key, tag_drafts
from annotation.reviews import duplicate_decisions, parse_export
from tests.annotation import synth


def test_configs_parse_and_carry_the_guideline():
    dup = project_spec("duplicates")
    root = ET.fromstring(dup.label_config)
    assert root.find(".//Repeater").get("on") == "$images"
    # what the answer stores (the alias where one is set; Label Studio shows the value)
    assert {c.get("alias") or c.get("value") for c in root.iter("Choice")} == {
        "keep", "remove", "none_duplicates"}
    assert "<b>same scene or object without meaningful change</b>" in dup.instruction_html
    assert dup.instruction_html.count("<table>") == 1 and "<ol>" in dup.instruction_html
    tags = ET.fromstring(tags_config(["food", 'a "quoted" & <odd> one']))
    assert [c.get("value") for c in tags.iter("Choice")] == ["food", 'a "quoted" & <odd> one']
    with pytest.raises(ValueError, match="unknown review kind"):
        project_spec("faces")


def test_markdown_subset():
    html = markdown_to_html("# T\n\nSome **bold** and *it* <x>.\n\n- a\n- b\n\n1. one\n   more\n")
    assert html == ("<h1>T</h1>\n<p>Some <b>bold</b> and <i>it</i> &lt;x&gt;.</p>\n<ul>\n<li>a</li>"
                    "\n<li>b</li>\n</ul>\n<ol>\n<li>one more</li>\n</ol>")


def test_duplicate_decisions():
    keep0 = {"from_name": "decision_0", "type": "choices", "value": {"choices": ["keep"]}}
    none = {"from_name": "group", "type": "choices", "value": {"choices": ["none_duplicates"]}}
    odd = {"from_name": "decision_1", "type": "choices", "value": {"choices": ["maybe"]}}
    assert duplicate_decisions({"result": [keep0]}, 3) == ["keep", "unanswered", "unanswered"]
    assert duplicate_decisions({"result": [keep0, none]}, 2) == ["keep", "none_duplicates"]
    # "none of these are duplicates" while an image is marked remove: the answer says both
    remove1 = {"from_name": "decision_1", "type": "choices", "value": {"choices": ["remove"]}}
    assert duplicate_decisions({"result": [keep0, remove1, none]}, 2) == ["contradiction"] * 2
    # a pre-filled proposal submitted unchanged is a confirmation, a changed one the person's
    proposed = [{**keep0, "origin": "prediction"}, {**remove1, "origin": "prediction"}]
    assert duplicate_decisions({"result": proposed}, 2) == ["confirmed_keep", "confirmed_remove"]
    changed = [{**keep0, "origin": "prediction"}, {**remove1, "origin": "prediction-changed"}]
    assert duplicate_decisions({"result": changed}, 2) == ["confirmed_keep", "remove"]
    assert duplicate_decisions({"result": [*proposed, none]}, 2) == ["contradiction"] * 2
    assert duplicate_decisions({"result": [odd]}, 2) == ["unanswered", "invalid"]
    assert duplicate_decisions({"result": [keep0], "was_cancelled": True}, 2) == ["skipped"] * 2


def test_parse_export_skips_foreign_tasks_and_names_annotators():
    data = {"images": [{"sha256": "s0", "item_ids": [7, 8]}, {"sha256": "s1", "item_ids": [9]}]}
    task_map = {5: {"data_json": json.dumps(data)}}
    ann = {"id": 11, "completed_by": 2, "updated_at": "2026-01-01T00:00:00Z", "result": [
        {"from_name": "decision_1", "type": "choices", "value": {"choices": ["remove"]}}]}
    tasks = [{"id": 5, "annotations": [ann, {**ann, "id": 12, "completed_by": {"email": "x@y"}}]},
             {"id": 6, "annotations": [ann]}]
    rows, counts = parse_export("duplicates", tasks, task_map, {2: "a@b"})
    assert counts == {"annotations": 2, "tasks not pushed from this work dir": 1}
    assert [(r.annotation_id, r.annotator, r.item_id, r.sha256, r.decision) for r in rows] == [
        (11, "a@b", 7, "s0", "unanswered"), (11, "a@b", 9, "s1", "remove"),
        (12, "x@y", 7, "s0", "unanswered"), (12, "x@y", 9, "s1", "remove")]
    assert rows[0].result_sha == rows[2].result_sha  # same result, same fingerprint


def test_drafts_from_a_synthetic_catalog(tmp_path):
    cat, sha, items = synth.build(tmp_path / "wd")
    links = ImageLinks(cat.workdir.images_dir, "local-files", str(tmp_path))
    drafts, skipped = duplicate_drafts(cat, links, ("needs_review",))
    assert [d.group_id for d in drafts] == [1, 2, 3, 4]
    assert drafts[0].key == group_key("food", [sha["C"], sha["A"], sha["B"]])
    assert len({d.key for d in drafts}) == 4
    assert skipped == {"fewer than 2 distinct images": 1}
    g1 = drafts[0]
    assert [i["sha256"] for i in g1.data["images"]] == [sha["A"], sha["B"], sha["C"]]
    assert g1.data["images"][0]["item_ids"] == items["A"]
    assert g1.data["images"][0]["url"] == (
        f"/data/local-files/?d=wd/images/{sha['A'][:2]}/{sha['A']}.png")
    assert [p["value"]["choices"] for p in g1.prediction] == [["keep"], ["remove"], ["remove"]]
    auto = duplicate_drafts(cat, links, ("auto",))[0]  # nothing waits: every image is shown
    assert [[i["sha256"] for i in d.data["images"]] for d in auto] == [[sha["J"], sha["K"]]]
    assert [p["value"]["choices"] for p in auto[0].prediction] == [["keep"], ["remove"]]
    cat.workdir.image_path(sha["E"], "png").unlink()  # a lost file: the group waits, counted
    drafts, skipped = duplicate_drafts(cat, links, ("needs_review",))
    assert [d.group_id for d in drafts] == [1, 3, 4]
    assert skipped == {"fewer than 2 distinct images": 1, "image file missing": 1}
    tdrafts, _ = tag_drafts(cat, links, synth.CONCEPTS, sample=2, seed=3)
    again, _ = tag_drafts(cat, links, synth.CONCEPTS, sample=2, seed=3)
    assert [d.key for d in tdrafts] == [d.key for d in again] and len(tdrafts) == 2
    assert {d.sha256 for d in tag_drafts(cat, links, synth.CONCEPTS, 10, 0)[0]} == {
        sha["T1"], sha["T2"], sha["T3"]}


def test_image_links_validate(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_FILES_DOCUMENT_ROOT", raising=False)
    with pytest.raises(AnnotationError, match="LOCAL_FILES_DOCUMENT_ROOT"):
        ImageLinks(tmp_path / "images", "local-files")
    with pytest.raises(AnnotationError, match="not under the local-files document root"):
        ImageLinks(tmp_path / "images", "local-files", str(tmp_path / "elsewhere"))
    with pytest.raises(AnnotationError, match="--images must be"):
        ImageLinks(tmp_path / "images", "ftp://x")
    assert ImageLinks(tmp_path, "http://127.0.0.1:9/").url("ab" * 32, "PNG") == (
        f"http://127.0.0.1:9/img/{'ab' * 32}.png")


def test_server_url_drops_credentials():
    assert server_url("http://user:pw@127.0.0.1:8080/") == "http://127.0.0.1:8080"
    with pytest.raises(AnnotationError):
        server_url("127.0.0.1:8080")


def test_cli_one_line_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    # the builder's review stage without a server: a notice, exit 0, so `pipeline run` goes on
    assert annotation.main(["--workdir", str(tmp_path)]) == 0
    assert "LABEL_STUDIO_URL is not set" in capsys.readouterr().out
    assert main(["sync", "--workdir", str(tmp_path)]) == 0
    assert "LABEL_STUDIO_URL is not set" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # the command line names its command: no guessing
        main(["--workdir", str(tmp_path)])
    assert exc.value.code == 2
    capsys.readouterr()
    assert main(["push", "--workdir", str(tmp_path), "--kind", "tags", "--sample", "0"]) == 2
    assert capsys.readouterr().err == "error: --sample must be at least 1\n"
    assert main(["status", "--workdir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: set LABEL_STUDIO_URL")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("LABEL_STUDIO_URL", f"http://127.0.0.1:{port}")
    assert main(["status", "--workdir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: set LABEL_STUDIO_API_KEY")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "secret-token-value")
    assert main(["pull", "--workdir", str(tmp_path), "--kind", "duplicates"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot reach Label Studio at http://127.0.0.1:{port}" in err
    assert "secret-token-value" not in err
