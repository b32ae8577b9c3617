"""The leaderboard: one row per model, from whatever results exist for it.

Columns: 3xcm (text -> image) ``n, M_sem, M_cul, M_non, SP`` with its 95% bootstrap interval,
the image -> image SP (``3xcm-i2i``), and XM3600 image -> text ``accuracy@5, ndcg@10,
lbkl@10, dlbkl@10`` (``xm3600-i2t``). A missing task leaves its cells empty ("-"). Rows are
sorted by 3xcm SP (lower is less biased), models without it last. Rendered as Markdown and
as an HTML table whose cells carry the exact JSON value in ``data-value``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from benchmark.report.collect import Collection


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    task: str
    field: str  # key in scores.overall
    digits: int = 3
    lower_is_better: bool | None = None


COLUMNS = (
    Column("n", "n", "3xcm", "n", 0),
    Column("M_sem", "M_sem", "3xcm", "M_sem", lower_is_better=False),
    Column("M_cul", "M_cul", "3xcm", "M_cul", lower_is_better=True),
    Column("M_non", "M_non", "3xcm", "M_non", lower_is_better=True),
    Column("SP", "SP", "3xcm", "SP", lower_is_better=True),
    Column("SP_ci95", "SP 95% CI", "3xcm", "SP_ci95"),
    Column("SP_i2i", "SP (i2i)", "3xcm-i2i", "SP", lower_is_better=True),
    Column("accuracy@5", "acc@5", "xm3600-i2t", "accuracy@5", lower_is_better=False),
    Column("ndcg@10", "nDCG@10", "xm3600-i2t", "ndcg@10", lower_is_better=False),
    Column("lbkl@10", "LBKL@10", "xm3600-i2t", "lbkl@10", lower_is_better=True),
    Column("dlbkl@10", "DLBKL@10", "xm3600-i2t", "dlbkl@10", lower_is_better=True),
)


def rows(col: Collection) -> list[dict[str, Any]]:
    """One dict per model: ``model`` plus every column key (None where absent)."""
    out = []
    for model, tasks in col.results.items():
        row: dict[str, Any] = {"model": model}
        for c in COLUMNS:
            r = tasks.get(c.task)
            row[c.key] = (r.scores.get("overall") or {}).get(c.field) if r else None
        out.append(row)
    out.sort(key=lambda r: (r["SP"] is None, r["SP"] if r["SP"] is not None else 0, r["model"]))
    return out


def fmt(value: Any, digits: int = 3) -> str:
    """Display text of a cell: fixed decimals, intervals as [lo, hi], "-" when absent."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        if len(value) != 2 or any(v is None for v in value):
            return "-"
        return f"[{value[0]:.{digits}f}, {value[1]:.{digits}f}]"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{float(value):.{digits}f}"


def to_markdown(table: list[dict[str, Any]]) -> str:
    head = "| model | " + " | ".join(c.header for c in COLUMNS) + " |"
    sep = "|---|" + "|".join("---:" for _ in COLUMNS) + "|"
    lines = [head, sep]
    for r in table:
        cells = [fmt(r[c.key], c.digits) for c in COLUMNS]
        lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    notes = ("\nSP = M_cul / M_sem (3XCM text -> image; lower = less cultural self-preference). "
             "SP (i2i): image -> image. acc@5, nDCG@10: XM3600 image -> text retrieval; "
             "LBKL@10, DLBKL@10: divergence of the retrieved caption languages from the target "
             "distribution (lower = less prevalence bias).\n")
    return "\n".join(lines) + "\n" + notes


def _data_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ",".join("" if v is None else repr(v) for v in value)
    return repr(value)


def to_html(table: list[dict[str, Any]]) -> str:
    """An HTML ``<table id="leaderboard">``; each cell's ``data-value`` is the JSON value."""
    e = html.escape
    head = "".join(f'<th data-key="{e(c.key)}" title="{e(c.task)}: {e(c.field)}">'
                   f"{e(c.header)}</th>" for c in COLUMNS)
    body = []
    for r in table:
        cells = "".join(f'<td data-key="{e(c.key)}" data-value="{e(_data_value(r[c.key]))}">'
                        f"{e(fmt(r[c.key], c.digits))}</td>" for c in COLUMNS)
        body.append(f'<tr class="model-row" data-model="{e(r["model"])}">'
                    f'<th scope="row">{e(r["model"])}</th>{cells}</tr>')
    return ('<table id="leaderboard"><thead><tr><th>model</th>' + head + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>")


def country_table(col: Collection, task: str = "3xcm") -> tuple[list[str], list[dict[str, Any]]]:
    """(country codes in table order, one row per model: ``model`` + code -> SP or None)."""
    from benchmark import tables

    res = col.task(task)
    present = {c for r in res.values() for c in r.scores.get("by_country", {})}
    codes = [c.code for c in tables.countries() if c.code in present] + sorted(
        present - {c.code for c in tables.countries()})
    out = []
    for model, r in res.items():
        by = r.scores.get("by_country", {})
        out.append({"model": model, **{c: (by.get(c) or {}).get("SP") for c in codes}})
    return codes, out


def country_markdown(codes: list[str], table: list[dict[str, Any]]) -> str:
    """SP per model (rows) and country (columns) as a Markdown table."""
    from benchmark import tables

    known = {c.code: c.label for c in tables.countries()}
    heads = [known.get(c, c) for c in codes]
    lines = ["| model | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(codes)]
    for r in table:
        lines.append(f"| {r['model']} | " + " | ".join(fmt(r[c], 2) for c in codes) + " |")
    return "\n".join(lines) + "\n"
