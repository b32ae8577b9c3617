"""Our 3XCM numbers next to the paper authors' published ones (``data/authors_rq2/``).

Their SP is ``B_wins / A_wins`` (A semantic, B cultural, C non-relevant wins); model names map
through ``model_names.csv`` (or the same name, any case). Differences are ours minus theirs.
"""

from __future__ import annotations

import io
import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.metrics.association import sp_value
from benchmark.report.collect import Collection
from core import datatables
from core.errors import DataError
from core.text import StrictDictReader

log = logging.getLogger(__name__)

EXPERIMENTS = {"3xcm": "text-to-image", "3xcm-i2i": "image-to-image"}
WIN_COLS = ("A_wins", "B_wins", "C_wins")
Z_COLS = ("z_A", "z_B", "z_C")
OURS = ("n", "wins_sem", "wins_cul", "wins_non", "M_sem", "M_cul", "M_non", "SP",
        "z_sem", "z_cul", "z_non")
INT_COLS = ("ours_n", "ours_wins_sem", "ours_wins_cul", "ours_wins_non", "authors_n",
            "authors_A_wins", "authors_B_wins", "authors_C_wins")
DIFFS = (("M_sem", "M_sem"), ("M_cul", "M_cul"), ("M_non", "M_non"), ("SP", "SP"),
         ("z_sem", "z_A"), ("z_cul", "z_B"), ("z_non", "z_C"))


def csv_rows(name: str, folder: Path | None = None) -> list[dict[str, str]]:
    """Rows of one of the authors' CSVs: ``data/authors_rq2/<name>``, or ``folder/<name>``."""
    if folder is None:
        return datatables.data_csv(f"authors_rq2/{name}")
    text = (folder / name).read_text(encoding="utf-8")
    return list(StrictDictReader(io.StringIO(text, newline=""), str(folder / name), DataError))


def model_names(folder: Path | None = None) -> dict[str, str]:
    """Our model name -> the authors' model name (``model_names.csv``)."""
    return {r["model"]: r["authors_model"] for r in csv_rows("model_names.csv", folder)}


SCOPES = {"overall": ("overall_aggregated.csv", None),
          "country": ("country_aggregated.csv", "country"),
          "language": ("language_aggregated.csv", "native_language"),
          "concept": ("concept_aggregated.csv", "concept")}


def load_scope(scope: str, folder: Path | None = None) -> pd.DataFrame:
    """The authors' rows of one scope: ``group`` ('' overall), ``authors_model``, ``experiment``,
    the A/B/C wins (int) and z-scores (floats parsed exactly as written)."""
    name, column = SCOPES[scope]
    rows = csv_rows(name, folder)  # Python's own number parsing: the written floats exactly
    df = pd.DataFrame([{**r, **{k: int(r[k]) for k in WIN_COLS},
                        **{k: float(r[k]) for k in Z_COLS}} for r in rows])
    if column is None:
        df.insert(0, "group", "")
    df = df.rename(columns={column or "group": "group", "model": "authors_model"})
    df.insert(0, "scope", scope)
    return df.astype({c: "int64" for c in WIN_COLS})


def authors_name(model: str, names: dict[str, str], known: set[str]) -> str | None:
    """The authors' name of our ``model``: the mapping table, else the same name (any case)."""
    if model in names:
        return names[model]
    lower = {k.lower(): k for k in known}
    return lower.get(model.lower())


def their_numbers(row: Any) -> dict[str, Any]:
    """The authors' counts, win rates, SP and z-means of one of their rows (None: all None)."""
    if row is None:
        return {f"authors_{k}": None for k in ("n", *WIN_COLS, "M_sem", "M_cul", "M_non", "SP",
                                                  *Z_COLS)}
    a, b, c = (int(row[k]) for k in WIN_COLS)
    n = a + b + c
    return {"authors_n": n, "authors_A_wins": a, "authors_B_wins": b, "authors_C_wins": c,
            "authors_M_sem": a / n if n else None, "authors_M_cul": b / n if n else None,
            "authors_M_non": c / n if n else None,
            "authors_SP": b / a if a else (math.inf if b else None),  # ∞: no semantic win
            **{f"authors_{k}": float(row[k]) for k in Z_COLS}}


def _row(model: str, amodel: str, task: str, scope: str, code: str,
         ours: dict[str, Any] | None, theirs: pd.Series | None) -> dict[str, Any]:
    label = datatables.country(code).label if code and code in {c.code for c in datatables.countries()} \
        else code
    out: dict[str, Any] = {"model": model, "authors_model": amodel, "task": task,
                           "experiment": EXPERIMENTS[task], "scope": scope, "country": code,
                           "label": label}
    out.update({f"ours_{k}": (ours or {}).get(k) for k in OURS})
    out["ours_SP"] = sp_value(ours)
    out.update(their_numbers(theirs))
    for mine, their in DIFFS:
        a, b = out[f"ours_{mine}"], out[f"authors_{their}"]
        ok = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
        out[f"diff_{mine}"] = a - b if ok else None
    return out


def compare(col: Collection, folder: Path | None = None) -> pd.DataFrame:
    """One row per (model present in both, task, overall | country): ours, theirs, ours - theirs."""
    country = load_scope("country", folder)  # their overall and per-country rows, ISO codes
    country["group"] = [datatables.country(n).code for n in country["group"]]
    ref = pd.concat([load_scope("overall", folder), country], ignore_index=True).rename(
        columns={"group": "country"})
    names = model_names(folder)
    known = set(ref["authors_model"])
    rows: list[dict[str, Any]] = []
    order = {c.code: i for i, c in enumerate(datatables.countries())}
    for task, experiment in EXPERIMENTS.items():
        for model, res in col.task(task).items():
            amodel = authors_name(model, names, known)
            sub = ref[(ref["authors_model"] == amodel) & (ref["experiment"] == experiment)]
            if amodel is None or sub.empty:
                log.info("%s: no published %s numbers to compare with", model, experiment)
                continue
            ov = sub[sub["scope"] == "overall"]
            rows.append(_row(model, amodel, task, "overall", "", res.scores.get("overall"),
                             ov.iloc[0] if len(ov) else None))
            theirs = {r["country"]: r for _, r in sub[sub["scope"] == "country"].iterrows()}
            ours = res.scores.get("by_country", {})
            for code in sorted(set(ours) | set(theirs), key=lambda c: (order.get(c, 99), c)):
                rows.append(_row(model, amodel, task, "country", code, ours.get(code),
                                 theirs.get(code)))
    df = pd.DataFrame(rows)
    ints = [c for c in INT_COLS if c in df]
    return df.astype({c: "Int64" for c in ints}) if ints else df


def _f(x: Any, nd: int = 3, sign: bool = False) -> str:
    if x is None or pd.isna(x):
        return "-"
    if x == math.inf:
        return "∞"
    return f"{x:+.{nd}f}" if sign else f"{x:.{nd}f}"


def to_markdown(df: pd.DataFrame) -> str:
    """Overall table, then one per-country table per (model, experiment)."""
    if df.empty:
        return "No model of these results has published numbers from the authors.\n"
    lines = ["## Ours vs the authors' published numbers", "",
             "Differences are ours minus theirs. A/B/C = semantic/cultural/non-relevant wins. "
             "SP ∞: no semantic win.", "",
             "| model | experiment | SP ours | SP theirs | diff | M_sem ours | M_sem theirs "
             "| M_cul ours | M_cul theirs | A/B/C theirs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in df[df["scope"] == "overall"].to_dict("records"):
        lines.append(
            f"| {r['model']} | {r['experiment']} | {_f(r['ours_SP'])} | {_f(r['authors_SP'])} "
            f"| {_f(r['diff_SP'], sign=True)} | {_f(r['ours_M_sem'])} | {_f(r['authors_M_sem'])} "
            f"| {_f(r['ours_M_cul'])} | {_f(r['authors_M_cul'])} "
            f"| {r['authors_A_wins']}/{r['authors_B_wins']}/{r['authors_C_wins']} |")
    for (model, exp), g in df[df["scope"] == "country"].groupby(["model", "experiment"],
                                                                 sort=False):
        lines += ["", f"### {model}, {exp}: per country", "",
                  "| country | SP ours | SP theirs | diff | n ours | n theirs |",
                  "|---|---|---|---|---|---|"]
        for r in g.to_dict("records"):
            lines.append(f"| {r['country']} | {_f(r['ours_SP'])} | {_f(r['authors_SP'])} "
                         f"| {_f(r['diff_SP'], sign=True)} | {_f(r['ours_n'], 0)} "
                         f"| {_f(r['authors_n'], 0)} |")
    return "\n".join(lines) + "\n"
