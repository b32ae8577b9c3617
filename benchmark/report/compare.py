"""``python -m benchmark compare RESULT_A RESULT_B``: is model A's score different from B's?

    python -m benchmark compare results/clip-l14/3xcm.json results/mclip/3xcm.json

Both results files must be of the same task, on the same data (``task.data_fingerprint``)
and, for 3XCM, with the same query table (``task.query_texts.sha256``); for XM3600 also
with the same language grouping. Each file's per-item outcomes
(``<task>.outcomes.parquet``, beside the JSON, checked against the sha256 the JSON records)
are paired by item id and resampled together (:mod:`benchmark.metrics.significance`):
3XCM: ΔSP and ΔM_sem/ΔM_cul/ΔM_non overall and per query country; XM3600: Δaccuracy@k,
ΔNDCG@k, ΔLBKL@k, ΔDLBKL@k for every k. Anything that makes the pair incomparable is one
line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from benchmark.metrics import significance as sig
from benchmark.results import ResultFile, read_results
from core import datatables, files
from core.errors import DataError

ASSOCIATION_TASKS = ("3xcm", "3xcm-i2i")
PREVALENCE_TASKS = ("xm3600-i2t",)
PREVALENCE_METRICS = ("accuracy", "ndcg", "lbkl", "dlbkl")


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
    return None


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


def compare_frames(task: str, da: pd.DataFrame, db: pd.DataFrame, n_resamples: int = 1000,
                   seed: int = 0, ks: list[int] | None = None) -> dict[str, Any]:
    """The paired bootstrap of one task's aligned outcomes (see the module docstring)."""
    if task in ASSOCIATION_TASKS:
        res = sig.paired_association(da["winner"].to_numpy(), db["winner"].to_numpy(),
                                     da["query_country"].to_numpy(), n_resamples, seed)
        order = [c.code for c in datatables.countries()]
        by = res.pop("by_group")
        res["by_country"] = {c: by[c] for c in sorted(
            by, key=lambda c: (order.index(c) if c in order else len(order), c))}
        return res
    if task in PREVALENCE_TASKS:
        cols = [f"{m}@{k}" for k in (ks or []) for m in PREVALENCE_METRICS]
        cols = [c for c in cols if c in da.columns and c in db.columns]
        return {"overall": sig.paired_means({c: da[c].to_numpy() for c in cols},
                                            {c: db[c].to_numpy() for c in cols},
                                            n_resamples, seed)}
    raise CompareError(f"compare knows the tasks {', '.join(ASSOCIATION_TASKS + PREVALENCE_TASKS)}"
                       f", not {task}")


def compare_results(pa: Path, pb: Path, n_resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Load, check and compare two results files; the comparison as a JSON-able dict."""
    a, b = load_result(pa), load_result(pb)
    da, db = paired_frames(pa, a, pb, b)
    ks = [int(k) for k in getattr(a.task, "ks", None) or []]
    out = compare_frames(a.task.name, da, db, n_resamples, seed, ks)
    return {"kind": COMPARISON_KIND, "task": a.task.name, "data_fingerprint": a.task.data_fingerprint,
            "query_table_sha256": query_table_sha(a), "model_a": a.model.name,
            "model_b": b.model.name, "file_a": str(pa), "file_b": str(pb),
            "bootstrap_resamples": n_resamples, "seed": seed, "alpha": sig.ALPHA,
            "method": "paired bootstrap over items (same resample for both models); "
                      "percentile 95% interval; p from the centred resamples", **out}


def check_json_target(path: Path) -> None:
    """``--json PATH`` may be new or a comparison this command wrote; anything else is
    refused before any work (never overwrite what we did not write)."""
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


def _row(label: str, n: Any, key: str, d: dict[str, Any]) -> str:
    lo, hi = d["ci95"]
    star = "*" if d["p"] is not None and d["p"] < sig.ALPHA else ""
    ci = f"[{_f(lo, sign=True)}, {_f(hi, sign=True)}]"
    return (f"{label:<9}{n!s:>6}  {key:<15}{_f(d['a']):>7}{_f(d['b']):>7}"
            f"{_f(d['diff'], sign=True):>8}  {ci:<18}{_p(d['p']):>7} {star}")


def format_comparison(c: dict[str, Any]) -> str:
    """A plain-text table: A, B, Δ = A - B, its 95% interval, p (* p < 0.05, not adjusted)."""
    lines = [f"{c['task']}: A = {c['model_a']}, B = {c['model_b']}",
             f"paired bootstrap, {c['bootstrap_resamples']} resamples, seed {c['seed']}; "
             f"Δ = A - B; * p < {c['alpha']} (per row, not adjusted for multiple rows)",
             f"data {c['data_fingerprint'][:12]}"
             + (f", query table {c['query_table_sha256'][:12]}" if c["query_table_sha256"]
                else "")]
    head = f"{'group':<9}{'n':>6}  {'':<15}{'A':>7}{'B':>7}{'Δ':>8}  {'95% CI':<18}{'p':>7}"
    lines += [head, "-" * (len(head) + 2)]
    if c["task"] in ASSOCIATION_TASKS:
        for label, s in [("overall", c["overall"]), *c["by_country"].items()]:
            for i, k in enumerate(("SP", *sig.WIN_KEYS)):
                lines.append(_row(label if i == 0 else "", s["n"] if i == 0 else "", k, s[k]))
        return "\n".join(lines)
    o = c["overall"]
    first = True
    for k, d in o.items():
        if isinstance(d, dict):
            lines.append(_row("overall" if first else "", o["n"] if first else "", k, d))
            first = False
    return "\n".join(lines)


def pair_p_value(task: str, key: str, pa: Path, a: ResultFile, pb: Path, b: ResultFile,
                 n_resamples: int = 1000, seed: int = 0) -> tuple[float | None, str | None]:
    """(unadjusted p of Δ``key`` between two results, None) or (None, why not testable);
    ``key``: ``SP`` for the 3XCM tasks, a metric such as ``lbkl@10`` for XM3600."""
    try:
        da, db = paired_frames(pa, a, pb, b)
    except CompareError as e:
        return None, str(e).split(": ", 1)[-1] if "cannot compare" in str(e) else str(e)
    if task in ASSOCIATION_TASKS:
        d = sig.paired_counts(da["winner"].to_numpy(), db["winner"].to_numpy(), n_resamples,
                              seed)[key]
    elif key in da.columns and key in db.columns:
        d = sig.paired_means({key: da[key].to_numpy()}, {key: db[key].to_numpy()},
                             n_resamples, seed)[key]
    else:
        return None, f"{key} not in the outcomes"
    return (d["p"], None) if d["p"] is not None else (None, f"{key} undefined")
