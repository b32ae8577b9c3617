"""The leaderboard: one row per model, from whatever results exist for it, one table per data
fingerprint (:func:`boards`). Rows are sorted by 3xcm SP (an XM3600-only table by LBKL@10) and
each says whether it differs significantly from the next (:func:`neighbour_tests`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchmark.metrics.association import INFINITE, sp_interval, sp_value
from benchmark.report.collect import Collection, short_path
from benchmark.report.page import Cell, Row, Table


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    task: str
    field: str  # key in scores.overall
    digits: int = 3


COLUMNS = (
    Column("n", "n", "3xcm", "n", 0),
    Column("M_sem", "M_sem", "3xcm", "M_sem"),
    Column("M_sem_ci95", "M_sem 95% CI", "3xcm", "M_sem_ci95"),
    Column("M_cul", "M_cul", "3xcm", "M_cul"),
    Column("M_cul_ci95", "M_cul 95% CI", "3xcm", "M_cul_ci95"),
    Column("M_non", "M_non", "3xcm", "M_non"),
    Column("M_non_ci95", "M_non 95% CI", "3xcm", "M_non_ci95"),
    Column("SP", "SP", "3xcm", "SP"),
    Column("SP_ci95", "SP 95% CI", "3xcm", "SP_ci95"),
    Column("SP_i2i", "SP (i2i)", "3xcm-i2i", "SP"),
    Column("accuracy@5", "acc@5", "xm3600-i2t", "accuracy@5"),
    Column("ndcg@10", "nDCG@10", "xm3600-i2t", "ndcg@10"),
    Column("lbkl@10", "LBKL@10", "xm3600-i2t", "lbkl@10"),
    Column("dlbkl@10", "DLBKL@10", "xm3600-i2t", "dlbkl@10"),
    Column("missing@10", "missing@10", "xm3600-i2t", "missing@10"),
    Column("lbjs@10", "LBJS@10", "xm3600-i2t", "lbjs@10"),
)


RANK_KEYS = (("SP", "3xcm", "SP"), ("SP_i2i", "3xcm-i2i", "SP"),
             ("lbkl@10", "xm3600-i2t", "lbkl@10"))  # (column, task, tested quantity)


@dataclass
class Board:
    """One leaderboard: the runs on one dataset (one data fingerprint)."""

    fingerprint: str
    datasets: dict[str, str]  # task -> dataset name as the results record it
    columns: list[Column]
    rows: list[dict[str, Any]]
    rank: str | None  # the column the rows are sorted by and neighbours are tested on
    pairs: int = 0  # neighbouring pairs tested (the Holm family)


def rows(col: Collection, columns: tuple[Column, ...] | list[Column] = COLUMNS,
         rank: str = "SP") -> list[dict[str, Any]]:
    """One dict per model (every column key, None if absent), sorted by ``rank``, lower first."""
    out = []
    for model, tasks in col.results.items():
        row: dict[str, Any] = {"model": model}
        for c in columns:
            r = tasks.get(c.task)
            o = (r.scores.get("overall") or {}) if r else {}
            row[c.key] = (sp_value(o) if c.field == "SP" else sp_interval(o)
                          if c.field == "SP_ci95" else o.get(c.field)) if r else None
        out.append(row)

    def key(r: dict[str, Any]) -> tuple[bool, float, str]:
        v = r.get(rank)
        ok = isinstance(v, int | float) and not math.isnan(v)  # inf (∞ SP) after numbers
        return (not ok, float(v) if ok else 0.0, r["model"])

    return sorted(out, key=key)


def neighbour_tests(col: Collection, table: list[dict[str, Any]], rank: str) -> int:
    """Set each row's ``vs_next``: a paired test of its ``rank`` value against the next row's,
    Holm-adjusted across the pairs tested; returns how many were tested."""
    from benchmark.metrics.significance import ALPHA, holm
    from benchmark.report import compare

    _, task, quantity = next(k for k in RANK_KEYS if k[0] == rank)
    res = col.task(task)
    tests: list[dict[str, Any]] = []
    for upper, lower in zip(table, table[1:], strict=False):
        m1, m2 = upper["model"], lower["model"]
        if m1 not in res or m2 not in res:
            upper["vs_next"] = None
            continue
        p, why = compare.pair_p_value(task, quantity, col.paths[(m1, task)], res[m1],
                                      col.paths[(m2, task)], res[m2])
        upper["vs_next"] = {"next": m2, "p": p, "p_holm": None, "why": why}
        if p is not None:
            tests.append(upper["vs_next"])
    for t, adj in zip(tests, holm([t["p"] for t in tests]), strict=True):
        t["p_holm"] = adj
        t["significant"] = adj is not None and adj < ALPHA
    if table:
        table[-1].setdefault("vs_next", None)
    return len(tests)


def boards(col: Collection) -> list[Board]:
    """One leaderboard per data fingerprint (a table never mixes data), in first-seen order."""
    tasks = tuple(dict.fromkeys(c.task for c in COLUMNS))
    out = []
    for fp in col.fingerprints(tasks):
        sub = col.subset(fp)
        present = {t for t in tasks if sub.task(t)}
        columns = [c for c in COLUMNS if c.task in present]
        rank = next((k for k, t, _ in RANK_KEYS if t in present), None)
        table = rows(sub, columns, rank or "")
        table = [r for r in table if any(r[c.key] is not None for c in columns)] or table
        names = {t: next(iter(sub.task(t).values())).task.dataset for t in sorted(present)}
        board = Board(fp, names, columns, table, rank)
        if rank:
            board.pairs = neighbour_tests(sub, table, rank)
        out.append(board)
    return out


def fmt(value: Any, digits: int = 3) -> str:
    """A cell's text: fixed decimals, intervals as [lo, hi], "-" if absent or NaN, ∞ spelled out."""
    if isinstance(value, list | tuple):
        if len(value) != 2 or not _finite(value[0]) or not (_finite(value[1])
                                                            or value[1] == math.inf):
            return "-"
        hi = "∞" if value[1] == math.inf else f"{value[1]:.{digits}f}"
        return f"[{value[0]:.{digits}f}, {hi}]"
    if value == math.inf:
        return INFINITE
    if not _finite(value):
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{float(value):.{digits}f}"


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def vs_next_text(t: dict[str, Any] | None) -> str:
    """The "vs next" cell: ``differs (p 0.003)`` / ``n.s. (p 0.41)`` (Holm p), ``-`` untested."""
    if not t or t.get("p_holm") is None:
        return "-"
    word = "differs" if t["significant"] else "n.s."
    return f"{word} (p {t['p_holm']:.3g})"


def board_note(b: Board, markdown: bool = True) -> str:
    """What a board holds and how neighbours were tested (Markdown, or plain text for HTML)."""
    em, code = ("*", "`") if markdown else ("", "")
    data = ", ".join(f"{t}: {short_path(name)}" for t, name in b.datasets.items())
    lines = [f"Data fingerprint {code}{b.fingerprint}{code} ({data})."]
    if b.rank:
        from benchmark.metrics.significance import ALPHA

        tested = (f"p-values Holm-adjusted across the {b.pairs} neighbouring pair(s) tested in "
                  "this table" if b.pairs else "no pair could be tested here")
        lines.append(
            f"Rows sorted by {b.rank} (lower first; ∞, no semantic win, after every number). "
            f"{em}vs next{em}: whether the row's {b.rank} differs from the next row's by more "
            "than chance: paired test over the items both models were scored on "
            f"(cluster-robust over concepts for 3XCM), {tested}; {em}differs{em} at "
            f"{ALPHA} after adjustment, {em}n.s.{em} otherwise, - when not testable (no "
            "per-item outcomes, another query table, or the last row).")
    return " ".join(lines)


NOTES = ("SP = M_cul / M_sem (3XCM text -> image; lower = less cultural self-preference; "
         f"{INFINITE}: the most there can be). 95% CI: as each result states (by default "
         "over concepts: what generalises to other concepts). SP (i2i): image -> image. "
         "acc@5, nDCG@10: XM3600 image -> text retrieval; LBKL@10, DLBKL@10: divergence of "
         "the retrieved caption languages from the target distribution (the paper's, with "
         "an absent group scored at ε = 1e-9); missing@10: share of top-10 lists without "
         "a target language group; LBJS@10: Jensen-Shannon divergence (bounded by ln 2); "
         "lower = less prevalence bias.")


def _data_value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_data_value(v) for v in value)
    return repr(value) if _finite(value) or value == math.inf else ""


def board_table(b: Board, labels: dict[str, str], table_id: str = "leaderboard") -> Table:
    """The board as a table, each cell's ``data-value`` the exact JSON value."""
    head = [Cell("model", cls="text")] + [Cell(c.header, key=c.key, title=f"{c.task}: {c.field}")
                                          for c in b.columns]
    if b.rank:
        head.append(Cell("vs next", key="vs_next", cls="text",
                         title="Holm-adjusted paired cluster-robust test"))
    rows = []
    for r in b.rows:
        label = labels.get(r["model"], r["model"])
        cells = [Cell(label, header=True)] + [Cell(fmt(r[c.key], c.digits), _data_value(r[c.key]),
                                                    c.key) for c in b.columns]
        if b.rank:
            t = r.get("vs_next") or {}
            cells.append(Cell(vs_next_text(t), _data_value(t.get("p_holm")), "vs_next",
                              "differs" if t.get("significant") else "", str(t.get("why") or "")))
        rows.append(Row(cells, {"model": label}, "model-row"))
    return Table(head, rows, table_id, "leaderboard")


def country_table(col: Collection, task: str, labels: dict[str, str]) -> Table | None:
    """SP per model and country (ISO alpha-3 columns); None when no run has per-country scores."""
    from core import datatables

    res = col.task(task)
    present = {c for r in res.values() for c in r.scores.get("by_country", {})}
    if not present:
        return None
    codes = [c.code for c in datatables.countries() if c.code in present] + sorted(
        present - {c.code for c in datatables.countries()})
    rows = []
    for model, r in res.items():
        by = r.scores.get("by_country", {})
        sp = [sp_value(by.get(c)) for c in codes]
        label = labels.get(model, model)
        rows.append(Row([Cell(label, header=True)] + [
            Cell("∞" if v == math.inf else fmt(v, 2), _data_value(v), c)
            for c, v in zip(codes, sp, strict=True)], {"model": label}))
    return Table([Cell("model", cls="text")] + [Cell(c, key=c) for c in codes], rows)


INFINITE_NOTE = f"∞: {INFINITE}."
