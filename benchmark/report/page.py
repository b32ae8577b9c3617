"""The self-contained HTML report: inline CSS, figures embedded as base64 PNG data URIs, no
scripts and no external requests, so the single file can be mailed or archived."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

CSS = """
body{font-family:"Noto Sans","DejaVu Sans",sans-serif;margin:2em auto;max-width:1200px;
color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:right}
th[scope=row],td.text{text-align:left}
thead th{background:#f0f0f0}
tr:nth-child(even) td{background:#fafafa}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}
figure{margin:1.5em 0}
figcaption{font-size:0.9em;color:#555}
details{margin:0.5em 0}
.note{color:#555;font-size:0.9em}
tr.outside td{background:#fde2e2}
tr.missing td{color:#888}
.banner{border:2px solid #c44;background:#fff4f4;padding:0.5em 1em}
section{overflow-x:auto}
td.differs{font-weight:bold}
"""


def figure(path: Path, caption: str) -> str:
    """A ``<figure>`` with the PNG at ``path`` inlined."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def frame_table(df: pd.DataFrame, table_id: str, digits: int = 3) -> str:
    """An HTML table of a data frame: numbers rounded for display, exact in ``data-value``."""
    e = html.escape
    head = "".join(f"<th>{e(str(c))}</th>" for c in df.columns)
    body = []
    for rec in df.to_dict("records"):
        cells = []
        for c in df.columns:
            v = rec[c]
            if v is None or (not isinstance(v, str) and pd.isna(v)):
                cells.append(f'<td data-key="{e(c)}" data-value="">-</td>')
            elif isinstance(v, str):
                cells.append(f'<td class="text" data-key="{e(c)}">{e(v)}</td>')
            elif isinstance(v, int | np.integer):
                cells.append(f'<td data-key="{e(c)}" data-value="{int(v)}">{int(v)}</td>')
            else:
                cells.append(f'<td data-key="{e(c)}" data-value="{float(v)!r}">'
                             f"{float(v):.{digits}f}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table id="{e(table_id)}"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(body) + "</tbody></table>")


def render(title: str, sections: list[tuple[str, str]], meta: dict[str, Any]) -> str:
    """The whole page: a title, a line of provenance, then (heading, HTML body) sections."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
             f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{e(title)}</h1>",
             f"<p class=\"note\">Generated {e(str(meta.get('date', '')))} by benchmark "
             f"{e(str(meta.get('package_version', '')))} from {e(str(meta.get('n_files', 0)))} "
             f"results file(s).</p>"]
    for heading, body in sections:
        parts.append(f"<section><h2>{e(heading)}</h2>{body}</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
