"""The review UI as an annotator meets it (issue 14 §3): configs and guidelines, no server.

The browser tests (test_browser.py) check the same things rendered by a real Label Studio.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from annotation.configs import (
    GUIDE_CLASS,
    GUIDE_CSS,
    GUIDELINES,
    guideline_html,
    image_label,
    project_spec,
)
from annotation.guide_html import markdown_to_html
from annotation.reviews import parse_export, term_decision
from core.datatables import data_file


def _bullets(md: str) -> list[tuple[str, str]]:
    """Every list item of a Markdown text with its continuation lines: (``ol`` or ``ul``, its
    words without the bold/italic marks), read here without the converter under test."""
    items, cur = [], None
    for line in md.splitlines():
        m = re.match(r"^\s*([-*]|\d+\.)\s+(.*)$", line)
        if m:
            cur = [m.group(2)]
            items.append(("ul" if m.group(1) in "-*" else "ol", cur))
        elif cur is not None and line.strip() and not line.lstrip().startswith(("#", "|")):
            cur.append(line.strip())
        else:
            cur = None
    return [(kind, " ".join(words).replace("*", "")) for kind, words in items]


class _Lists(HTMLParser):
    """The ``<li>`` of an HTML text: (the list it is in, its text)."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[tuple[str, str]] = []
        self.lists: list[str] = []
        self.text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("ol", "ul"):
            self.lists.append(tag)
        elif tag == "li":
            self.text = []

    def handle_endtag(self, tag):
        if tag in ("ol", "ul"):
            self.lists.pop()
        elif tag == "li":
            self.items.append((self.lists[-1], "".join(self.text)))
            self.text = None

    def handle_data(self, data):
        if self.text is not None:
            self.text.append(data)


def _plain(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">").replace(
        "&amp;", "&")


@pytest.mark.parametrize("kind", sorted(GUIDELINES))
def test_no_guideline_bullet_is_cut(kind):
    md = data_file(f"annotation/{GUIDELINES[kind]}").text
    parser = _Lists()
    parser.feed(guideline_html(kind))
    expected = _bullets(md)
    assert len(parser.items) == len(expected) > 3
    assert parser.items == expected
    for _, li in parser.items:  # every item ends where its sentence ends
        assert li.rstrip().endswith((".", ")", ":")), li


def test_guideline_lists_keep_their_markers():
    """Label Studio strips style attributes but keeps <style> and class (its sanitizer's
    lists); the CSS must hold nothing the sanitizer escapes."""
    html = guideline_html("duplicates")
    assert html.startswith(f"<style>{GUIDE_CSS}</style>")
    assert f'<div class="{GUIDE_CLASS}">' in html and html.endswith("</div>")
    assert not set(GUIDE_CSS) & set("<>&")
    assert f".{GUIDE_CLASS} ol {{list-style: decimal" in GUIDE_CSS
    assert f".{GUIDE_CLASS} ul {{list-style: disc" in GUIDE_CSS


def test_image_label_in_words():
    assert image_label(1, 3, 64, 48, "keep") == "copy 1 of 3 · 64×48 px · proposal: keep"
    assert image_label(2, 2, None, 48, "remove") == (
        "copy 2 of 2 · size unknown · proposal: remove")


def test_markdown_continuations_at_any_indent():
    html = markdown_to_html("- one\n  two\n- three\nfour\n\nafter\n")
    assert html == "<ul>\n<li>one two</li>\n<li>three four</li>\n</ul>\n<p>after</p>"


def test_duplicates_ui_reads_as_the_guideline_and_shows_the_proposal():
    spec = project_spec("duplicates")
    root = ET.fromstring(spec.label_config)
    guideline = data_file("annotation/duplicates_guideline.md").text
    none = next(c for c in root.iter("Choice") if c.get("alias") == "none_duplicates")
    assert none.get("value") == "None of these are duplicates"  # what the annotator reads
    assert f"**{none.get('value')}**" in guideline
    # side by side: the Repeater is the flex row (a flex View around it stacks the images)
    rep = root.find(".//Repeater")
    assert "display: flex" in rep.get("style") and "flex-wrap: wrap" in rep.get("style")
    assert "side by side" in guideline
    # one exclusive, required mark per image, hidden (and so left out) with "None of these"
    decision = root.find(".//Choices[@name='decision_{{idx}}']")
    assert (decision.get("choice"), decision.get("required")) == ("single-radio", "true")
    assert (decision.get("visibleWhen"), decision.get("whenTagName"),
            decision.get("whenChoiceValue")) == ("choice-unselected", "group", "none_duplicates")
    assert decision.get("requiredMessage") == (
        "Choose keep or remove for every image, or tick 'None of these are duplicates'.")
    note = root.find(".//Text[@name='proposal_note']").get("value")
    assert "PROPOSAL" in note and "confirmed proposal" in note
    assert "pre-filled with the automatic" in _plain(spec.instruction_html).replace("\n", " ")
    assert "confirmed proposal" in spec.instruction_html


def test_queries_ui():
    spec = project_spec("queries", locale="pt-PT")
    assert (spec.kind, spec.title) == ("queries:pt-PT", "3XCM query terms pt-PT")
    root = ET.fromstring(spec.label_config)
    verdict = root.find(".//Choices[@name='verdict']")
    assert verdict.get("required") == "true"
    assert [c.get("alias") for c in verdict.iter("Choice")] == ["correct", "better_term", "unclear"]
    assert verdict.get("choice") == "single-radio"
    assert verdict.get("requiredMessage").startswith("Choose one answer: Correct, A better term")
    # the term field shows (and is required) only with "A better term"
    shown_when = next(v for v in root.iter("View") if v.find("TextArea") is not None)
    assert (shown_when.get("visibleWhen"), shown_when.get("whenTagName"),
            shown_when.get("whenChoiceValue")) == ("choice-selected", "verdict", "better_term")
    box = shown_when.find("TextArea")
    assert (box.get("name"), box.get("required")) == ("better_term", "true")
    assert {t.get("value") for t in root.iter("Text")} >= {
        "$concept_text", "$definition", "$examples", "$instance", "$authors", "$proposed"}
    with pytest.raises(ValueError, match="needs its locale"):
        project_spec("queries")


def test_a_tag_outside_the_concept_list_is_rejected():
    task_map = {5: {"data_json": '{"sha256": "s"}'}}
    ann = {"id": 1, "completed_by": 1, "result": [
        {"from_name": "concepts", "type": "choices", "value": {"choices": ["food", "spaceship"]}}]}
    ok = {**ann, "id": 2, "result": [
        {"from_name": "concepts", "type": "choices", "value": {"choices": ["market", "food"]}}]}
    rows, counts = parse_export("tags", [{"id": 5, "annotations": [ann, ok]}], task_map, {},
                                choices=["food", "market"])
    assert [(r.decision, r.answer) for r in rows] == [
        ("invalid", '["spaceship"]'), ('["food", "market"]', None)]
    assert counts["tag answers with concepts outside the list (rejected)"] == 1


def _term(verdict=None, *typed, cancelled=False):
    res = []
    if verdict:
        res.append({"from_name": "verdict", "type": "choices", "value": {"choices": [verdict]}})
    if typed:
        res.append({"from_name": "better_term", "type": "textarea", "value": {"text": list(typed)}})
    return {"result": res, "was_cancelled": cancelled}


@pytest.mark.parametrize("ann, expected", [
    (_term("correct"), ("correct", None)),
    (_term("correct", " Trem "), ("correct", None)),  # the proposed term, retyped
    (_term("better_term", "  comboio\n"), ("better_term", "comboio")),
    (_term("unclear"), ("unclear", None)),
    (_term("correct", "comboio"), ("contradiction", "correct chosen and a different term typed: comboio")),
    (_term("unclear", "comboio"), ("contradiction", "unclear chosen and a different term typed: comboio")),
    (_term("better_term", "trem"), ("contradiction", "a better term chosen but the proposed term typed: trem")),
    (_term("better_term"), ("incomplete", "a better term chosen but none typed")),
    (_term("better_term", "comboio", "o comboio"),
     ("contradiction", "better_term with several terms typed: comboio / o comboio")),
    (_term("better_term", "comboio", "Comboio"), ("better_term", "comboio")),
    (_term(None, "comboio"), ("invalid", "[]")),
    (_term("maybe"), ("invalid", '["maybe"]')),
    (_term(), ("unanswered", None)),
    (_term("correct", cancelled=True), ("skipped", None)),
])
def test_term_decision(ann, expected):
    assert term_decision(ann, "trem") == expected
