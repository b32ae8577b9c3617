"""The one template layer of every HTML page (Jinja2, autoescaping): text from outside reaches
a page only as escaped data. A page is a list of sections of blocks; a :class:`Table` renders
as HTML and as Markdown from the same cells."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TEMPLATES = Path(__file__).with_name("templates")


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True)


def render_template(name: str, **context: Any) -> str:
    return _env().get_template(name).render(**context)


@dataclass
class Cell:
    text: str
    value: str | None = None  # data-value: the exact number behind the rounded text
    key: str | None = None  # data-key: the column
    cls: str = ""
    title: str = ""
    header: bool = False  # a row's header cell (<th scope=row>)


@dataclass
class Row:
    cells: list[Cell]
    attrs: dict[str, str] = field(default_factory=dict)  # data-* attributes of the <tr>
    cls: str = ""


@dataclass
class Table:
    head: list[Cell]
    rows: list[Row]
    id: str = ""
    cls: str = ""


def md_cell(text: str) -> str:
    """Text as one Markdown table cell: ``|`` escaped, line breaks as spaces."""
    return " ".join(str(text).replace("\\", "\\\\").replace("|", "\\|").split())


def markdown(t: Table) -> str:
    """The table as a Markdown pipe table (text columns left-aligned, numbers right)."""
    lines = ["| " + " | ".join(md_cell(c.text) for c in t.head) + " |",
             "|" + "|".join("---" if "text" in c.cls else "---:" for c in t.head) + "|"]
    lines += ["| " + " | ".join(md_cell(c.text) for c in r.cells) + " |" for r in t.rows]
    return "\n".join(lines) + "\n"


def simple_table(head: list[str], rows: list[list[str]], text_cols: int = 1,
                 classes: list[str] | None = None) -> Table:
    """A table of plain strings; the first ``text_cols`` columns are text (left-aligned)."""
    return Table([Cell(h, cls="text" if i < text_cols else "") for i, h in enumerate(head)],
                 [Row([Cell(x, cls="text" if i < text_cols else "") for i, x in enumerate(r)],
                      cls=(classes or [""] * len(rows))[j]) for j, r in enumerate(rows)])


def frame_table(df: pd.DataFrame, table_id: str, digits: int = 3) -> Table:
    """A data frame as a table: numbers rounded for display, exact in ``data-value``."""
    rows = []
    for rec in df.to_dict("records"):
        cells = []
        for c in df.columns:
            v = rec[c]
            if v is None or (not isinstance(v, str) and pd.isna(v)):
                cells.append(Cell("-", "", str(c)))
            elif isinstance(v, str):
                cells.append(Cell(v, None, str(c), "text"))
            elif isinstance(v, int | np.integer):
                cells.append(Cell(str(int(v)), str(int(v)), str(c)))
            else:
                cells.append(Cell(f"{float(v):.{digits}f}", repr(float(v)), str(c)))
        rows.append(Row(cells))
    return Table([Cell(str(c)) for c in df.columns], rows, table_id)


def para(text: str, cls: str = "") -> dict[str, Any]:
    return {"kind": "p", "text": text, "cls": cls}


def bullets(items: list[str]) -> dict[str, Any]:
    return {"kind": "list", "items": items}


def links(items: list[tuple[str, str]]) -> dict[str, Any]:
    return {"kind": "links", "items": items}


def table(t: Table, summary: str = "") -> dict[str, Any]:
    """A table block; with ``summary``, folded under it (``<details>``)."""
    return {"kind": "table", "table": t, "summary": summary}


def figures(items: list[tuple[Path, str]]) -> dict[str, Any]:
    """PNG figures inlined as data URIs (the page is one self-contained file)."""
    return {"kind": "figures", "items": [
        ("data:image/png;base64," + base64.b64encode(p.read_bytes()).decode("ascii"), cap)
        for p, cap in items]}


def render(title: str, sections: list[tuple[str, list[dict[str, Any]]]],
           meta: dict[str, Any]) -> str:
    """A whole report page: a title, a line of provenance, then (heading, blocks) sections."""
    return render_template("report.html", title=title, sections=sections, meta=meta)
