"""Label configs and annotator instructions of the three review kinds (``data/annotation/``).

Label Studio shows ``expert_instruction`` as HTML and strips ``style`` attributes but keeps
``<style>`` and ``class``, while its page style resets lists and headings: the converted
guideline is wrapped in ``<div class="xcm3-guide">`` after a ``<style>`` block restoring them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from annotation.guide_html import markdown_to_html
from core.datatables import data_file
from core.files import sha256_text

KINDS = ("duplicates", "tags", "queries")
CHOICES_MARKER = "<!-- CONCEPT CHOICES -->"
DEFAULT_TITLES = {"duplicates": "3XCM duplicate review", "tags": "3XCM tag check",
                  "queries": "3XCM query terms"}
MODEL_VERSIONS = {"duplicates": "xcm3-image-dedup", "tags": "xcm3-gemini-tags",
                  "queries": "xcm3-query-terms"}
GUIDELINES = {"duplicates": "duplicates_guideline.md", "tags": "tags_guideline.md",
              "queries": "queries_guideline.md"}
CONFIGS = {"duplicates": "duplicates.xml", "queries": "queries.xml"}


def project_key(kind: str, locale: str | None = None) -> str:
    """The catalog's name of a project (``ls_projects.kind``): ``duplicates``, ``queries:pt-PT``."""
    if kind == "queries":
        if not locale:
            raise ValueError("a query-term project needs its locale")
        return f"queries:{locale}"
    return kind


def base_kind(key: str) -> str:
    """The review kind of a project key (``queries:pt-PT`` -> ``queries``)."""
    return key.split(":", 1)[0]


def _annotation_file(name: str) -> str:
    """The text of ``data/annotation/<name>`` (``$XCM_DATA_DIR`` honoured)."""
    return data_file(f"annotation/{name}").text


@dataclass(frozen=True)
class ProjectSpec:
    """What a project of one kind is created with."""

    kind: str  # the project key (:func:`project_key`)
    title: str
    label_config: str
    instruction_html: str
    model_version: str
    annotators: int = 3
    choices: tuple[str, ...] = ()  # the tag check's concepts (recorded: pull rejects others)

    @property
    def config_sha(self) -> str:
        """sha256 of the settings pushed to the project: a change updates the project."""
        blob = "\0".join([self.label_config, self.instruction_html, self.title,
                           self.model_version, str(self.annotators)])
        return sha256_text(blob)


def tags_config(concepts: Sequence[str]) -> str:
    """The tag-check config: one image per task, a multi-choice over ``concepts``."""
    template = _annotation_file("tags.xml")
    if CHOICES_MARKER not in template:
        raise RuntimeError("data/annotation/tags.xml lost its concept-choices marker")
    if not concepts:
        raise ValueError("the tag check needs at least one concept")
    lines = "\n        ".join(f"<Choice value={quoteattr(c)}/>" for c in concepts)
    return template.replace(CHOICES_MARKER, lines)


GUIDE_CLASS = "xcm3-guide"
#: CSS of the guideline (no angle brackets or ampersands: the server's sanitizer would escape them)
GUIDE_CSS = " ".join(f".{GUIDE_CLASS} {rule}" for rule in (
    "ol {list-style: decimal outside; padding-left: 1.6em; margin: 0.4em 0}",
    "ul {list-style: disc outside; padding-left: 1.6em; margin: 0.4em 0}",
    "li {display: list-item; margin: 0.2em 0}",
    "h1 {font-size: 1.3em; line-height: 1.35; font-weight: 600; margin: 0 0 0.5em}",
    "h2 {font-size: 1.12em; line-height: 1.35; font-weight: 600; margin: 0.9em 0 0.3em}",
    "h3 {font-size: 1em; line-height: 1.35; font-weight: 600; margin: 0.7em 0 0.3em}",
    "p {margin: 0.4em 0; line-height: 1.45}",
    "table {border-collapse: collapse; margin: 0.4em 0}",
    "th, td {border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top}",
))


def guideline_html(kind: str) -> str:
    """The guideline of ``kind`` as HTML for Label Studio's instructions (module docstring)."""
    body = markdown_to_html(_annotation_file(GUIDELINES[kind]))
    return f'<style>{GUIDE_CSS}</style>\n<div class="{GUIDE_CLASS}">\n{body}\n</div>'


def image_label(position: int, count: int, width: int | None, height: int | None,
                proposal: str) -> str:
    """The words under a duplicate-review image: ``copy 1 of 3 · 64×48 px · proposal: keep``."""
    size = f"{width}×{height} px" if width and height else "size unknown"
    return f"copy {position} of {count} · {size} · proposal: {proposal}"


def project_spec(
    kind: str, title: str | None = None, concepts: Sequence[str] = (), annotators: int = 3,
    locale: str | None = None,
) -> ProjectSpec:
    """The project settings of ``kind``; ``annotators``: annotations each task collects."""
    if kind not in KINDS:
        raise ValueError(f"unknown review kind {kind!r}; choose one of {', '.join(KINDS)}")
    config = tags_config(concepts) if kind == "tags" else _annotation_file(CONFIGS[kind])
    default_title = DEFAULT_TITLES[kind] + (f" {locale}" if kind == "queries" else "")
    return ProjectSpec(
        kind=project_key(kind, locale),
        title=title or default_title,
        label_config=config,
        instruction_html=guideline_html(kind),
        model_version=MODEL_VERSIONS[kind],
        annotators=annotators,
        choices=tuple(concepts) if kind == "tags" else (),
    )
