"""The paper's tables (``data/paper/*.csv``) as typed records: the one reader of them. Values
keep their printed text and decimals; model names are normalised to Table 6's aliases."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from benchmark.report.authors import model_names
from core import datatables


@dataclass(frozen=True)
class PaperValue:
    """One printed number: its value, its decimals as printed, its text."""

    value: float
    decimals: int
    text: str


@dataclass(frozen=True)
class PaperRow:
    """One row: the model's Table 6 alias, its printed name, its metric, the values by column."""

    model: str
    printed: str
    metric: str | None
    values: dict[str, PaperValue]


@dataclass(frozen=True)
class PaperTable:
    key: str
    title: str
    file: str
    columns: tuple[str, ...]
    rows: tuple[PaperRow, ...]

    def row(self, model: str, metric: str | None = None) -> PaperRow | None:
        for r in self.rows:
            if r.model == model and r.metric == metric:
                return r
        return None


# key -> (file, title); the order is the report's order
TABLES: dict[str, tuple[str, str]] = {
    "table1": ("table1_rq1_xm3600.csv",
               "Table 1: RQ1 on Crossmodal-3600, image -> text over the mixed 36-language pool"),
    "table5": ("table5_rq1_lbkl_dlbkl_at_k.csv", "Table 5: LBKL and DLBKL at k = 5, 25, 50, 99"),
    "table2": ("table2_rq2_3xcm.csv", "Table 2: RQ2 on 3XCM, text -> image win rates and SP"),
    "table11": ("table11_country_win_pct.csv",
                "Table 11: win rates (%) per query country, text -> image"),
    "table8": ("table8_country_sp_silhouette.csv",
               "Table 8: SP, text silhouette (TS) and image silhouette (IS) per country"),
    "table7": ("table7_sp_silhouette_pearson.csv",
               "Table 7: Pearson r between per-country SP and the text / image silhouette"),
}


@lru_cache(maxsize=4)
def _aliases(root: str) -> dict[str, str]:
    """Printed model name -> its Table 6 alias."""
    return {r["printed"].strip(): r["alias"].strip()
            for r in datatables.data_csv("paper/aliases.csv")}


@lru_cache(maxsize=4)
def _models(root: str) -> dict[str, str]:
    return {r["alias"]: r["full_name"] for r in datatables.data_csv("paper/table6_models.csv")}


def paper_models() -> dict[str, str]:
    """Table 6: alias -> the model's full name (the authors' name of it)."""
    return dict(_models(str(datatables.data_dir())))


def canonical(printed: str) -> str:
    """The Table 6 alias of a printed model name (unknown names, e.g. "Average", unchanged)."""
    return _aliases(str(datatables.data_dir())).get(printed.strip(), printed.strip())


def alias_of(model: str) -> str | None:
    """The paper's alias of one of our model names (None when it is not a paper model)."""
    full = {v.lower(): k for k, v in paper_models().items()}
    known = {a.lower(): a for a in paper_models()}
    names = model_names()
    if model in names:
        return full.get(names[model].lower())
    return full.get(model.lower()) or known.get(model.lower())


def _value(text: str) -> PaperValue | None:
    text = (text or "").strip()
    if not text:
        return None
    return PaperValue(float(text), len(text.split(".", 1)[1]) if "." in text else 0, text)


def read_table(key: str) -> PaperTable:
    """One paper table (``key`` of :data:`TABLES`)."""
    file, title = TABLES[key]
    rows = datatables.data_csv(f"paper/{file}")
    if not rows:
        return PaperTable(key, title, file, (), ())
    head = list(rows[0])
    keys = [c for c in ("model", "metric") if c in head]
    columns = tuple(c for c in head if c not in keys)
    out = []
    for r in rows:
        values = {c: v for c in columns if (v := _value(r[c])) is not None}
        out.append(PaperRow(canonical(r["model"]), r["model"], r.get("metric"), values))
    return PaperTable(key, title, file, columns, tuple(out))


def read_tables() -> dict[str, PaperTable]:
    """Every compared paper table, in report order."""
    return {k: read_table(k) for k in TABLES}
