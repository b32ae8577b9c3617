"""Label configs and annotator instructions of the two review kinds.

The XML configs and the guidelines live in ``data/annotation/`` (one source of truth; the
guideline is what annotators read), read through :func:`benchmark.tables.data_file`. Label Studio shows the project's ``expert_instruction``
as HTML, so the Markdown guideline is converted here with a small converter that handles what
the guidelines use (headings, lists, tables, paragraphs, bold/italic).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from benchmark.files import sha256_text
from benchmark.tables import data_file

KINDS = ("duplicates", "tags")
CHOICES_MARKER = "<!-- CONCEPT CHOICES -->"
DEFAULT_TITLES = {"duplicates": "3XCM duplicate review", "tags": "3XCM tag check"}
MODEL_VERSIONS = {"duplicates": "xcm3-image-dedup", "tags": "xcm3-gemini-tags"}


GUIDELINES = {"duplicates": "duplicates_guideline.md", "tags": "tags_guideline.md"}


def _annotation_file(name: str) -> str:
    """The text of ``data/annotation/<name>`` (``$XCM_DATA_DIR`` honoured)."""
    return data_file(f"annotation/{name}").text


@dataclass(frozen=True)
class ProjectSpec:
    """What a project of one kind is created with."""

    kind: str
    title: str
    label_config: str
    instruction_html: str
    model_version: str
    annotators: int = 3

    @property
    def config_sha(self) -> str:
        """sha256 of the settings pushed to the project (label config, instructions, title,
        model version, annotations per task): a change updates the project."""
        blob = "\0".join([self.label_config, self.instruction_html, self.title,
                           self.model_version, str(self.annotators)])
        return sha256_text(blob)


def duplicates_config() -> str:
    """The duplicate-review config: one group per task, keep/remove per image, 'none'."""
    return _annotation_file("duplicates.xml")


def tags_config(concepts: Sequence[str]) -> str:
    """The tag-check config: one image per task, a multi-choice over ``concepts``."""
    template = _annotation_file("tags.xml")
    if CHOICES_MARKER not in template:
        raise RuntimeError("data/annotation/tags.xml lost its concept-choices marker")
    if not concepts:
        raise ValueError("the tag check needs at least one concept")
    lines = "\n        ".join(f"<Choice value={quoteattr(c)}/>" for c in concepts)
    return template.replace(CHOICES_MARKER, lines)


def guideline_html(kind: str) -> str:
    """The guideline of ``kind`` as HTML for Label Studio's instructions panel."""
    return markdown_to_html(_annotation_file(GUIDELINES[kind]))


def project_spec(
    kind: str, title: str | None = None, concepts: Sequence[str] = (), annotators: int = 3
) -> ProjectSpec:
    """The project settings of ``kind`` (``duplicates`` or ``tags``); ``annotators`` is the
    number of annotations each task collects."""
    if kind not in KINDS:
        raise ValueError(f"unknown review kind {kind!r}; choose one of {', '.join(KINDS)}")
    config = duplicates_config() if kind == "duplicates" else tags_config(concepts)
    return ProjectSpec(
        kind=kind,
        title=title or DEFAULT_TITLES[kind],
        label_config=config,
        instruction_html=guideline_html(kind),
        model_version=MODEL_VERSIONS[kind],
        annotators=annotators,
    )


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", out)


def markdown_to_html(md: str) -> str:
    """Convert the small Markdown subset of the guidelines to HTML."""
    out: list[str] = []
    para: list[str] = []
    open_list: str | None = None
    table: list[list[str]] = []

    def flush() -> None:
        nonlocal open_list
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()
        if open_list:
            out.append(f"</{open_list}>")
            open_list = None
        if table:
            head, *body = table
            rows = [f"<tr>{''.join(f'<th>{_inline(c)}</th>' for c in head)}</tr>"]
            rows += [f"<tr>{''.join(f'<td>{_inline(c)}</td>' for c in r)}</tr>" for r in body]
            out.append(f"<table>{''.join(rows)}</table>")
            table.clear()

    for raw in md.splitlines():
        line = raw.strip()
        heading = re.match(r"^(#{1,4})\s+(.*)$", line)
        item = re.match(r"^(?:([-*])|\d+\.)\s+(.*)$", line)
        if not line:
            flush()
        elif heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif line.startswith("|"):
            if para or open_list:
                flush()
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                table.append(cells)
        elif item:
            tag = "ul" if item.group(1) else "ol"
            if open_list != tag:
                flush()
                out.append(f"<{tag}>")
                open_list = tag
            out.append(f"<li>{_inline(item.group(2))}</li>")
        elif open_list and raw.startswith("   ") and out[-1].endswith("</li>"):
            out[-1] = out[-1][: -len("</li>")] + " " + _inline(line) + "</li>"
        else:
            if open_list or table:
                flush()
            para.append(line)
    flush()
    return "\n".join(out)
