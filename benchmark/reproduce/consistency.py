"""The paper against its own counts: printed SP and win rates (Tables 2, 8, 11) that the
authors' published win counts, rounded as printed, do not give (Table 8's SP also against the
ratio of Table 11's printed win rates). No run can match such a cell; the comparison flags it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from benchmark.report import authors
from benchmark.reproduce.paper import PaperTable, paper_models, read_tables
from core import datatables

EXPERIMENT = "text-to-image"  # Tables 2, 8 and 11 are text -> image
HALF_PP = 0.005  # half a unit of Table 11's last printed digit (percentages, 2 decimals)


@dataclass(frozen=True)
class Flag:
    """One printed cell its own counts disagree with."""

    table: str
    row: str  # the comparison's row label (alias, or "alias · metric")
    column: str
    printed: float
    implied: float  # what the counts give (unrounded)
    how: str  # the arithmetic, in words

    def describe(self) -> str:
        return (f"{self.table} {self.row} / {self.column}: printed {self.printed:g}, its counts "
                f"give {self.how} = {self.implied:.4f}")


def _rounds_to(value: float, printed: float, decimals: int) -> bool:
    return abs(round(value, decimals) - printed) < 1e-9


def _counts() -> dict[tuple[str, str], tuple[int, int, int]]:
    """(Table 6 alias, country code or 'overall') -> (A, B, C) text-to-image wins."""
    by_full = {v.lower(): k for k, v in paper_models().items()}
    out: dict[tuple[str, str], tuple[int, int, int]] = {}
    for name, scope in (("overall_aggregated.csv", None), ("country_aggregated.csv", "country")):
        for r in authors.csv_rows(name):
            alias = by_full.get(r["model"].strip().lower())
            if alias is None or r["experiment"] != EXPERIMENT:
                continue
            where = "overall" if scope is None else datatables.country(r["country"]).code
            out[(alias, where)] = (int(r["A_wins"]), int(r["B_wins"]), int(r["C_wins"]))
    return out


def _win_checks(t: PaperTable, counts: dict, per_country: bool) -> list[Flag]:
    flags = []
    for row in t.rows:
        for col, pv in row.values.items():
            metric = row.metric if per_country else col
            where = datatables.country(col).code if per_country else "overall"
            c = counts.get((row.model, where))
            if c is None or metric is None:
                continue
            a, b, n = c[0], c[1], sum(c)
            label = row.model + (f" · {row.metric}" if per_country else "")
            if metric == "SP":
                if a and not _rounds_to(b / a, pv.value, pv.decimals):
                    flags.append(Flag(t.key, label, col, pv.value, b / a, f"{b}/{a}"))
                continue
            k = {"M_sem_pct": 0, "M_cul_pct": 1, "M_non_pct": 2}.get(metric)
            if k is not None and n and not _rounds_to(100 * c[k] / n, pv.value, pv.decimals):
                flags.append(Flag(t.key, label, col, pv.value, 100 * c[k] / n,
                                  f"100 x {c[k]}/{n}"))
    return flags


def _ratio_checks(t8: PaperTable, t11: PaperTable) -> list[Flag]:
    """Table 8's SP against the ratio of Table 11's win rates (either rounded as printed)."""
    flags = []
    for row in t8.rows:
        if row.metric != "SP":
            continue
        sem, cul = t11.row(row.model, "M_sem_pct"), t11.row(row.model, "M_cul_pct")
        if sem is None or cul is None:
            continue
        for col, pv in row.values.items():
            s, c = sem.values.get(col), cul.values.get(col)
            if s is None or c is None or s.value <= HALF_PP:
                continue
            lo = max(0.0, c.value - HALF_PP) / (s.value + HALF_PP)
            hi = (c.value + HALF_PP) / (s.value - HALF_PP)
            half = 0.5 * 10 ** -pv.decimals
            if hi < pv.value - half - 1e-12 or lo >= pv.value + half + 1e-12:
                flags.append(Flag(t8.key, f"{row.model} · SP", col, pv.value, c.value / s.value,
                                  f"Table 11 {c.text}% / {s.text}%"))
    return flags


@lru_cache(maxsize=1)
def paper_flags() -> tuple[Flag, ...]:
    """Every printed SP / win rate of Tables 2, 8, 11 that its own counts disagree with."""
    t = read_tables()
    counts = _counts()
    flags = (_win_checks(t["table2"], counts, False) + _win_checks(t["table11"], counts, True)
             + _win_checks(t["table8"], counts, True) + _ratio_checks(t["table8"], t["table11"]))
    return tuple(flags)


def flags_by_cell() -> dict[tuple[str, str, str], list[Flag]]:
    """(table, row, column) -> its flags."""
    out: dict[tuple[str, str, str], list[Flag]] = {}
    for f in paper_flags():
        out.setdefault((f.table, f.row, f.column), []).append(f)
    return out
