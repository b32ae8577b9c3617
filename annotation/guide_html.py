"""The Markdown subset of the annotator guidelines (headings, lists, tables, paragraphs, bold,
italic) as the HTML Label Studio shows; everything else is escaped text.
"""

from __future__ import annotations

import html
import re

__all__ = ["markdown_to_html"]


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", out)


def markdown_to_html(md: str) -> str:
    """Convert the guidelines' Markdown to HTML. A list item takes its continuation lines
    whatever their indent (lazy continuation), so bold may span a line break."""
    out: list[str] = []
    para: list[str] = []
    item: list[str] = []
    open_list: str | None = None
    table: list[list[str]] = []

    def end_item() -> None:
        if item:
            out.append(f"<li>{_inline(' '.join(item))}</li>")
            item.clear()

    def flush() -> None:
        nonlocal open_list
        end_item()
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
        bullet = re.match(r"^(?:([-*])|\d+\.)\s+(.*)$", line)
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
        elif bullet:
            tag = "ul" if bullet.group(1) else "ol"
            if open_list != tag:
                flush()
                out.append(f"<{tag}>")
                open_list = tag
            end_item()
            item.append(bullet.group(2))
        elif item:
            item.append(line)
        else:
            if open_list or table:
                flush()
            para.append(line)
    flush()
    return "\n".join(out)
