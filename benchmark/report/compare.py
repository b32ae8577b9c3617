"""``python -m benchmark compare RESULT_A RESULT_B``: is model A's score different from B's?

Both results must be of the same task, data, query table, tie rule and language grouping; their
per-item outcomes (sha256 checked) are paired by item id (:mod:`benchmark.metrics.significance`)
and every row's p is Holm-adjusted over the rows shown. An incomparable pair is one line, exit 2.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from benchmark.metrics import significance as sig
from benchmark.metrics.association import credits
from benchmark.results import ResultFile, read_results
from core import datatables, files
from core.errors import DataError

ASSOCIATION_TASKS = ("3xcm", "3xcm-i2i")
PREVALENCE_TASKS = ("xm3600-i2t",)
PREVALENCE_METRICS = ("accuracy", "ndcg", "lbkl", "dlbkl", "missing", "lbjs", "dlbjs")


COMPARISON_KIND = "3xcm-comparison"  # marks a --json file as ours (it may be rewritten)


class CompareError(DataError):
    """Two results that cannot be compared (one line, exit code 2)."""


def load_result(path: Path) -> ResultFile:
    """A results file, or one line saying why ``path`` is not one."""
    try:
        return read_results(path)
    except FileNotFoundError:
        raise CompareError(f"no such results file: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CompareError(f"{path} is not a results file (not JSON: {e})") from None
    except ValidationError as e:
        raise CompareError(f"{path} is not a results file ({e.error_count()} schema "
                           "error(s))") from None


def query_table_sha(r: ResultFile) -> str | None:
    """sha256 of the query table a 3XCM result scored (None: none recorded)."""
    q = getattr(r.task, "query_texts", None)
    return q.get("sha256") if isinstance(q, dict) else None


def incompatibility(a: ResultFile, b: ResultFile) -> str | None:
    """Why two results cannot be compared (None when they can)."""
    if a.task.name != b.task.name:
        return f"different tasks ({a.task.name} vs {b.task.name})"
    if a.task.data_fingerprint != b.task.data_fingerprint:
        return (f"different datasets (fingerprint {a.task.data_fingerprint[:12]} vs "
                f"{b.task.data_fingerprint[:12]})")
    qa, qb = query_table_sha(a), query_table_sha(b)
    if qa != qb:
        return f"different query tables (sha256 {str(qa)[:12]} vs {str(qb)[:12]})"
    ga, gb = getattr(a.task, "grouping", None), getattr(b.task, "grouping", None)
    if ga != gb:
        return f"different language groupings ({ga} vs {gb})"
    ta, tb = tie_rule(a), tie_rule(b)
    if ta != tb:
        return f"different tie rules ({ta} vs {tb})"
    return None


def tie_rule(r: ResultFile) -> str:
    """The tie rule a 3XCM result scored with (results before --ties: the authors' order)."""
    return str(r.settings.get("ties") or "order")


def load_outcomes(path: Path, r: ResultFile) -> pd.DataFrame:
    """The per-item outcomes recorded beside the results file at ``path``."""
    rec = getattr(r, "outcomes", None)
    if not isinstance(rec, dict) or not isinstance(rec.get("file"), str):
        raise CompareError(f"{path} records no per-item outcomes (written by an older "
                           "version): run the task again")
    if not isinstance(rec.get("id_column"), str) or not isinstance(rec.get("group_column"), str):
        raise CompareError(f"{path}: its outcomes record names no id and group columns")
    side = path.parent / Path(rec["file"]).name
    if not side.is_file():
        raise CompareError(f"{side}: the outcomes file of {path} is missing")
    if files.sha256_file(side) != rec.get("sha256"):
        raise CompareError(f"{side} does not match the sha256 {path} records (changed or "
                           "from another run)")
    try:
        df = pd.read_parquet(side)
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise CompareError(f"{side}: unreadable outcomes file ({type(e).__name__})") from None
    need = {rec["id_column"], rec["group_column"]}
    if not need <= set(df.columns) or df[rec["id_column"]].duplicated().any():
        raise CompareError(f"{side}: outcomes without unique {rec.get('id_column')} and "
                           f"{rec.get('group_column')} columns")
    bad = [str(c) for c in df.columns if (str(c).startswith("sim_") or "@" in str(c))
           and not pd.api.types.is_numeric_dtype(df[c])]
    if "winner" in df and (not pd.api.types.is_integer_dtype(df["winner"])
                           or not df["winner"].between(0, 2).all()):
        bad.insert(0, "winner (not 0, 1 or 2)")
    if bad:
        raise CompareError(f"{side}: damaged outcomes file (column {', '.join(bad)})")
    return df.set_index(rec["id_column"])


def paired_frames(pa: Path, a: ResultFile, pb: Path, b: ResultFile
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both outcome tables in one item order; refuses when the items differ."""
    why = incompatibility(a, b)
    if why:
        raise CompareError(f"cannot compare {pa} and {pb}: {why}")
    da, db = load_outcomes(pa, a), load_outcomes(pb, b)
    if set(da.index) != set(db.index):
        only_a, only_b = len(set(da.index) - set(db.index)), len(set(db.index) - set(da.index))
        raise CompareError(f"cannot compare {pa} and {pb}: different items ({only_a} only in "
                           f"A, {only_b} only in B)")
    return da, db.loc[da.index]


def _credit(df: pd.DataFrame, ties: str) -> Any:
    from benchmark.tasks.xcm import SIM_COLUMNS

    if ties == "split" and set(SIM_COLUMNS) <= set(df.columns):
        return credits(df[SIM_COLUMNS].to_numpy(), "split")
    return df["winner"].to_numpy()


def compare_frames(task: str, da: pd.DataFrame, db: pd.DataFrame, ks: list[int] | None = None,
                   ties: str = "order") -> dict[str, Any]:
    """The paired tests of one task's aligned outcomes (see the module docstring)."""
    if task in ASSOCIATION_TASKS:
        concept = da["query_concept"].to_numpy() if "query_concept" in da.columns else None
        res = sig.paired_association(_credit(da, ties), _credit(db, ties),
                                     da["query_country"].to_numpy(), concept,
                                     da["query_country"].to_numpy())
        order = [c.code for c in datatables.countries()]
        by = res.pop("by_group")
        res["by_country"] = {c: by[c] for c in sorted(
            by, key=lambda c: (order.index(c) if c in order else len(order), c))}
        res["unit"] = "concepts" if concept is not None else "triplets (no concept column)"
        return res
    if task in PREVALENCE_TASKS:
        cols = [f"{m}@{k}" for k in (ks or []) for m in PREVALENCE_METRICS]
        cols = [c for c in cols if c in da.columns and c in db.columns]
        return {"overall": sig.paired_means({c: da[c].to_numpy() for c in cols},
                                            {c: db[c].to_numpy() for c in cols}),
                "unit": "query images"}
    raise CompareError(f"compare knows the tasks {', '.join(ASSOCIATION_TASKS + PREVALENCE_TASKS)}"
                       f", not {task}")


def rows(c: dict[str, Any]) -> list[tuple[str, Any, str, dict[str, Any]]]:
    """(group, n, quantity, its dict) of every row the comparison shows, in order."""
    if c["task"] in ASSOCIATION_TASKS:
        return [(label, s["n"], k, s[k]) for label, s in [("overall", c["overall"]),
                                                          *c["by_country"].items()]
                for k in sig.KEYS]
    o = c["overall"]
    return [("overall", o["n"], k, d) for k, d in o.items() if isinstance(d, dict)]


def adjust(c: dict[str, Any], alpha: float) -> None:
    """Holm over every row shown: each row's ``p_holm`` and ``significant``, and the family."""
    shown = rows(c)
    for (_, _, _, d), adj in zip(shown, sig.holm([d["p"] for *_, d in shown]), strict=True):
        d["p_holm"] = adj
        d["significant"] = adj is not None and adj < alpha
    tested = sum(d["p"] is not None for *_, d in shown)
    what = ("overall and per query country x (SP, M_sem, M_cul, M_non)"
            if c["task"] in ASSOCIATION_TASKS else "every metric@k")
    c["family"] = f"Holm over the {tested} rows shown ({what}); * adjusted p < {alpha}"


def compare_results(pa: Path, pb: Path, alpha: float = sig.ALPHA) -> dict[str, Any]:
    """Load, check and compare two results files; the comparison as a JSON-able dict."""
    a, b = load_result(pa), load_result(pb)
    da, db = paired_frames(pa, a, pb, b)
    ks = [int(k) for k in getattr(a.task, "ks", None) or []]
    out = compare_frames(a.task.name, da, db, ks, tie_rule(a))
    unit = out.pop("unit")
    c = {"kind": COMPARISON_KIND, "task": a.task.name, "data_fingerprint": a.task.data_fingerprint,
         "query_table_sha256": query_table_sha(a), "model_a": a.model.name,
         "model_b": b.model.name, "file_a": str(pa), "file_b": str(pb), "alpha": alpha,
         "unit": unit, "method": sig.METHOD.format(unit=unit), **out}
    if a.task.name in ASSOCIATION_TASKS:
        c["ties"] = tie_rule(a)
    adjust(c, alpha)
    return c


def check_json_target(path: Path) -> None:
    """``--json PATH`` may be new or a comparison we wrote; anything else is refused first."""
    if not path.exists():
        return
    try:
        ours = json.loads(path.read_text(encoding="utf-8")).get("kind") == COMPARISON_KIND
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        ours = False
    if not ours:
        raise CompareError(f"--json {path} exists and is not a comparison written by "
                           "`benchmark compare`: refusing to overwrite it; name another file")


def _f(x: float | None, nd: int = 3, sign: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:+.{nd}f}" if sign else f"{x:.{nd}f}"


def _p(p: float | None) -> str:
    return "-" if p is None else (f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}")


def _cells(d: dict[str, Any]) -> list[str]:
    lo, hi = d["ci95"]
    a, b = ("∞" if d.get(f"{s}_note") else _f(d[s]) for s in "ab")
    return [a, b, _f(d["diff"], sign=True),
            f"[{_f(lo, sign=True)}, {_f(hi, sign=True)}]", _p(d["p"]), _p(d.get("p_holm")),
            "*" if d.get("significant") else ""]


def power_line(c: dict[str, Any]) -> str:
    """What the pair of runs could tell apart overall (80% power, alpha 0.05, per row)."""
    o = c["overall"]
    parts = [f"Δ{k} {_f(d.get('mde'))}" for k, d in o.items()
             if isinstance(d, dict) and d.get("mde") is not None]
    if not parts:
        return "power: no difference could be sized (a rate at its bound)"
    return ("power: these runs cannot tell apart true differences below " + ", ".join(parts)
            + " (overall; 80% power, two-sided α = 0.05 per row)")


def format_comparison(c: dict[str, Any]) -> str:
    """A plain-text table: A, B, Δ = A - B, its 95% interval, p, Holm-adjusted p, star."""
    lines = [f"{c['task']}: A = {c['model_a']}, B = {c['model_b']}", c["method"], c["family"],
             power_line(c),
             f"data {c['data_fingerprint'][:12]}"
             + (f", query table {c['query_table_sha256'][:12]}" if c["query_table_sha256"]
                else "")]
    head = (f"{'group':<9}{'n':>6}  {'':<15}{'A':>7}{'B':>7}{'Δ':>8}  {'95% CI':<22}{'p':>8}"
            f"{'p Holm':>8}")
    lines += [head, "-" * (len(head) + 2)]
    last = None
    for label, n, k, d in rows(c):
        first = label != last
        last = label
        a, b, diff, ci, p, ph, star = _cells(d)
        lines.append(f"{label if first else '':<9}{n if first else '':>6}  {k:<15}{a:>7}{b:>7}"
                     f"{diff:>8}  {ci:<22}{p:>8}{ph:>8} {star}")
    if any(d.get("a_note") or d.get("b_note") for *_, d in rows(c)):
        lines.append("∞: SP without a semantic win (Δ undefined; its p tests cul / (sem + cul))")
    return "\n".join(lines)


HEADER = ["group", "n", "quantity", "A", "B", "diff", "ci95_lo", "ci95_hi", "p", "p_holm",
          "significant", "mde"]


def format_csv(c: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for g, n, k, d in rows(c):
        w.writerow(["" if v is None else v for v in (
            g, n, k, d["a"], d["b"], d["diff"], *d["ci95"], d["p"], d.get("p_holm"),
            d.get("significant"), d.get("mde"))])
    return buf.getvalue()


def format_markdown(c: dict[str, Any]) -> str:
    """A Markdown table to paste into a paper, with its method, family and power as notes."""
    out = [f"**{c['task']}**: A = {c['model_a']}, B = {c['model_b']}; Δ = A - B", "",
           "| group | n | quantity | A | B | Δ | 95% CI | p | p (Holm) |",
           "|---|---:|---|---:|---:|---:|---|---:|---:|"]
    for g, n, k, d in rows(c):
        a, b, diff, ci, p, ph, star = _cells(d)
        out.append(f"| {g} | {n} | {k} | {a} | {b} | {diff}{star} | {ci} | {p} | {ph} |")
    out += ["", f"{c['method']}. {c['family']}. {power_line(c)}."
            + (" ∞: no semantic win." if "∞" in "".join(out) else "")]
    return "\n".join(out) + "\n"


def pair_p_value(task: str, key: str, pa: Path, a: ResultFile, pb: Path, b: ResultFile
                 ) -> tuple[float | None, str | None]:
    """(unadjusted p of Δ``key`` between two results, None) or (None, why not testable)."""
    try:
        da, db = paired_frames(pa, a, pb, b)
    except CompareError as e:
        return None, str(e).split(": ", 1)[-1] if "cannot compare" in str(e) else str(e)
    if task in ASSOCIATION_TASKS:
        d = compare_frames(task, da, db, ties=tie_rule(a))["overall"][key]
    elif key in da.columns and key in db.columns:
        d = sig.paired_means({key: da[key].to_numpy()}, {key: db[key].to_numpy()})[key]
    else:
        return None, f"{key} not in the outcomes"
    return (d["p"], None) if d["p"] is not None else (None, f"{key} undefined")
