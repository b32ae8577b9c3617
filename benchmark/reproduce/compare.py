"""Our results against the paper's Tables 1, 2, 5, 7, 8, 11 and the authors' RQ2 CSVs, cell by
cell (where each number comes from: docs/reproduce.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.report import authors
from benchmark.report.collect import Collection
from benchmark.reproduce import spread
from benchmark.reproduce.cells import Cell, Section, dig, number
from benchmark.reproduce.consistency import flags_by_cell
from benchmark.reproduce.paper import PaperTable, alias_of, read_tables
from benchmark.reproduce.provenance import ModelCheck, check_model
from benchmark.results import ResultFile
from core import datatables

log = logging.getLogger(__name__)

SILHOUETTE = "euclidean"  # the authors' silhouette distance (raw embeddings)
Getter = Callable[[dict[str, ResultFile], str | None], float | None]  # (results, metric) -> ours


@dataclass
class Comparison:
    """Every compared section, the check of each of our models, what had no paper row."""

    sections: list[Section]
    checks: dict[str, ModelCheck]
    unmatched: list[str] = field(default_factory=list)  # our models that are no paper model


def _scores(res: dict[str, ResultFile], task: str) -> dict[str, Any] | None:
    r = res.get(task)
    return r.scores if r is not None else None


def xm_getter(column: str) -> tuple[str, Getter]:
    """Tables 1 and 5: the xm3600-i2t overall score of ``column`` (NDCG: the authors' ideal)."""
    kind = "accuracy" if column.startswith("accuracy") else "ndcg" if column.startswith(
        "ndcg") else "kl"
    key = column.replace("ndcg@", "ndcg_authors@")
    return kind, lambda res, _m: number(dig(_scores(res, "xm3600-i2t"), "overall", key))


def _pct(v: float | None) -> float | None:
    return None if v is None else v * 100


def t2_getter(column: str) -> tuple[str, Getter]:
    """Table 2: overall win rates in % and SP of 3xcm."""
    if column == "SP":
        return "sp", lambda res, _m: number(dig(_scores(res, "3xcm"), "overall", "SP"))
    key = column.removesuffix("_pct")
    return "win_rate_pct", lambda res, _m: _pct(number(dig(_scores(res, "3xcm"), "overall", key)))


def t11_getter(column: str) -> tuple[str, Getter]:
    """Table 11: per-country win rates in % (the row's metric names the win rate)."""
    code = datatables.country(column).code
    return "win_rate_pct", lambda res, m: _pct(number(dig(
        _scores(res, "3xcm"), "by_country", code, (m or "").removesuffix("_pct"))))


def t8_getter(column: str) -> tuple[str, Getter]:
    """Table 8: per-country SP, text (TS) and image (IS) silhouette, by the row's metric."""
    code = datatables.country(column).code

    def get(res: dict[str, ResultFile], metric: str | None) -> float | None:
        if metric == "SP":
            v = number(dig(_scores(res, "3xcm"), "by_country", code, "SP"))
            return v if v is not None else number(dig(_scores(res, "analysis"), "by_country",
                                                      code, "SP"))
        side = {"TS": "text", "IS": "image"}.get(metric or "")
        return number(dig(_scores(res, "analysis"), "by_country", code, "silhouette",
                          SILHOUETTE, side or "?"))

    return "silhouette", get


def t7_getter(column: str) -> tuple[str, Getter]:
    """Table 7: Pearson r between per-country SP and the text / image silhouette."""
    side = "text" if column.startswith("text") else "image"
    return "pearson", lambda res, _m: number(dig(_scores(res, "analysis"), "correlations",
                                                 SILHOUETTE, side, "r"))


GETTERS: dict[str, Callable[[str], tuple[str, Getter]]] = {
    "table1": xm_getter, "table5": xm_getter, "table2": t2_getter, "table11": t11_getter,
    "table8": t8_getter, "table7": t7_getter,
}
SOURCES = {"table1": "xm3600-i2t", "table5": "xm3600-i2t", "table2": "3xcm", "table11": "3xcm",
           "table8": "3xcm + analysis", "table7": "analysis"}


Paths = dict[tuple[str, str], Path]


def cell_se(key: str, column: str, metric: str | None, model: str | None,
            res: dict[str, ResultFile], paths: Paths) -> float | None:
    """The bootstrap standard error of our value of one cell (None where there is none)."""
    if key in ("table1", "table5"):
        r, path = res.get("xm3600-i2t"), paths.get((model or "", "xm3600-i2t"))
        if r is None or path is None:
            return None
        cols = [c.replace("ndcg@", "ndcg_authors@") for c in read_tables()[key].columns]
        return spread.query_mean_se(path, r, cols).get(column.replace("ndcg@", "ndcg_authors@"))
    if key == "table2":
        group, what, scale = dig(_scores(res, "3xcm"), "overall"), column, 100.0
    elif key in ("table11", "table8"):
        group = dig(_scores(res, "3xcm"), "by_country", datatables.country(column).code)
        what, scale = metric or "", 100.0 if key == "table11" else 1.0
    else:
        return None
    what = what.removesuffix("_pct")
    if what not in (*spread.WIN_KEYS, "SP"):
        return None
    se = spread.group_se(group if isinstance(group, dict) else None, f"{model}:{key}:{column}")
    v = se.get(what)
    return None if v is None else v * (1.0 if what == "SP" else scale)


def table_section(table: PaperTable, ours: dict[str, tuple[str, dict[str, ResultFile]]],
                  paths: Paths | None = None) -> Section:
    """Every cell of one paper table (``ours``: paper alias -> (our model, results by task))."""
    getters = {c: GETTERS[table.key](c) for c in table.columns}
    flags = flags_by_cell()
    sec = Section(table.key, table.title, f"data/paper/{table.file} vs our {SOURCES[table.key]}")
    averages: list[str] = []
    for row in table.rows:
        if row.model == "Average":
            averages.append(row.metric or "")
            continue
        model, res = ours.get(row.model, (None, {}))
        label = row.model + (f" · {row.metric}" if row.metric else "")
        for col in table.columns:
            kind, get = getters[col]
            if table.key == "table8" and row.metric == "SP":
                kind = "sp"
            pv = row.values.get(col)
            se = cell_se(table.key, col, row.metric, model, res, paths or {}) if res else None
            flag = "; ".join(f.describe() for f in flags.get((table.key, label, col), []))
            sec.cells.append(Cell(label, col, kind, get(res, row.metric) if res else None,
                                  pv.value if pv else None, pv.decimals if pv else None, model,
                                  se, flag))
    for metric in averages:  # Table 7's Average: the mean of our r, only over all its models
        row = table.row("Average", metric or None)
        for col in table.columns:
            mine = [c for c in sec.cells if c.column == col]
            vals = [c.ours for c in mine]
            mean = sum(vals) / len(vals) if vals and all(v is not None for v in vals) else None
            pv = row.values.get(col) if row else None
            sec.cells.append(Cell("Average", col, getters[col][0], mean,
                                  pv.value if pv else None, pv.decimals if pv else None))
    if averages:
        sec.notes.append("Average: the mean of our r over the rows above, shown only when all "
                         "of them are computed.")
    if table.key in ("table1", "table5"):
        sec.notes.append("NDCG: ours is ndcg_authors@k (the ideal DCG of the retrieved top-100 "
                         "list, as the authors computed it).")
    return sec


def engine_section(table: PaperTable, ours: dict[str, tuple[str, dict[str, ResultFile]]]
                   ) -> Section | None:
    """Tables 1 and 5 by engine: per model the other engine's value against the paper, and the
    run's engine minus the other on the same embeddings (no published value)."""
    sec = Section(f"{table.key}-engines", f"{table.title.split(':')[0]} by engine: the other "
                  "engine on the same embeddings, and the difference",
                  f"data/paper/{table.file} vs xm3600-i2t scores.engine_comparison")
    engines: set[str] = set()
    for row in table.rows:
        model, res = ours.get(row.model, (None, {}))
        ec = dig(_scores(res, "xm3600-i2t"), "engine_comparison") if res else None
        if not isinstance(ec, dict) or not ec.get("other_engine"):
            continue
        engines.add(f"{ec['engine']} vs {ec['other_engine']}")
        for col in table.columns:
            kind, _ = xm_getter(col)
            key = col.replace("ndcg@", "ndcg_authors@")
            pv = row.values.get(col)
            sec.cells.append(Cell(f"{row.model} · {ec['other_engine']}", col, kind,
                                  number(dig(ec, "other_overall", key)),
                                  pv.value if pv else None, pv.decimals if pv else None, model))
            sec.cells.append(Cell(f"{row.model} · {ec['engine']} − {ec['other_engine']}", col,
                                  kind, number(dig(ec, "difference", key)), None, None, model))
    if not sec.cells:
        return None
    sec.notes.append("Rows '· ENGINE': that engine's top-100 lists on the same cached "
                     "embeddings, against the paper; rows 'A − B': the run's engine minus the "
                     "other (no published value: what the search engine alone changes). "
                     f"Engines: {', '.join(sorted(engines))}.")
    return sec


def merge(groups: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Several of our group summaries pooled into one (wins summed, z-means weighted by n)."""
    if not groups:
        return None
    if len(groups) == 1:
        return groups[0]
    n = sum(int(g.get("n") or 0) for g in groups)
    if not n:
        return None
    wins = [sum(int(g.get(k) or 0) for g in groups) for k in ("wins_sem", "wins_cul", "wins_non")]
    out: dict[str, Any] = {"n": n, "M_sem": wins[0] / n, "M_cul": wins[1] / n,
                           "M_non": wins[2] / n, "SP": wins[1] / wins[0] if wins[0] else None}
    for k in ("z_sem", "z_cul", "z_non"):
        vals = [(number(g.get(k)), int(g.get("n") or 0)) for g in groups]
        out[k] = (sum(v * w for v, w in vals) / n) if all(v is not None for v, _ in vals) else None
    return out


def _primary(tag: str) -> str:
    return tag.split("-")[0].split("_")[0].lower()


def our_group(scores: dict[str, Any], scope: str, group: str) -> dict[str, Any] | None:
    """Our summary of the authors' group ``group`` of ``scope`` (None when we have none)."""
    if scope == "overall":
        return scores.get("overall")
    if scope == "country":
        try:
            code = datatables.country(group).code
        except datatables.TableError:
            return None
        return (scores.get("by_country") or {}).get(code)
    if scope == "language":
        codes = {_primary(c.language) for c in datatables.countries()
                 if c.language_name.lower() == group.lower()}
        by = scores.get("by_language") or {}
        return merge([v for k, v in by.items() if _primary(k) in codes
                      or k.lower() == group.lower()])
    by = {k.strip().lower(): v for k, v in (scores.get("by_concept") or {}).items()}
    return by.get(group.strip().lower())


AUTHORS_METRICS = (("n", "n", "count"), ("M_sem", "M_sem", "win_rate"),
                   ("M_cul", "M_cul", "win_rate"), ("M_non", "M_non", "win_rate"),
                   ("SP", "SP", "sp"), ("z_sem", "z_A", "z"), ("z_cul", "z_B", "z"),
                   ("z_non", "z_C", "z"))


def authors_sections(col: Collection, folder: Path | None = None) -> list[Section]:
    """One section per scope of the authors' CSVs, for every model of ours they published."""
    names = authors.model_names(folder)
    out: list[Section] = []
    for scope in authors.SCOPES:
        ref = authors.load_scope(scope, folder)
        known = set(ref["authors_model"])
        sec = Section(f"authors-{scope}", f"The authors' RQ2 results, {scope}",
                      f"data/authors_rq2/{authors.SCOPES[scope][0]}")
        ran: set[str] = set()
        for task, experiment in authors.EXPERIMENTS.items():
            for model, res in col.task(task).items():
                amodel = authors.authors_name(model, names, known)
                if amodel is None:
                    continue
                ran.add(amodel)
                sub = ref[(ref["authors_model"] == amodel) & (ref["experiment"] == experiment)]
                for _, row in sub.iterrows():
                    theirs = authors.their_numbers(row)
                    mine = our_group(res.scores, scope, str(row["group"])) or {}
                    label = " · ".join(x for x in (model, experiment, str(row["group"])) if x)
                    se = spread.group_se(mine or None, label)
                    for ours_key, their_key, kind in AUTHORS_METRICS:
                        sec.cells.append(Cell(label, ours_key, kind, number(mine.get(ours_key)),
                                              number(theirs[f"authors_{their_key}"]), None,
                                              model, se.get(ours_key)))
        absent = sorted(known - ran)
        if absent:
            sec.notes.append("Not run here (no cells listed): " + ", ".join(absent) + ".")
        out.append(sec)
    return out


def ours_by_alias(col: Collection) -> tuple[dict[str, tuple[str, dict[str, ResultFile]]],
                                             list[str]]:
    """paper alias -> (our model, its results by task); and our models with no paper alias."""
    ours: dict[str, tuple[str, dict[str, ResultFile]]] = {}
    unmatched: list[str] = []
    for model in col.models:
        alias = alias_of(model)
        if alias is None:
            unmatched.append(model)
        elif alias in ours:
            log.warning("%s and %s are both the paper's %s; comparing %s", ours[alias][0], model,
                        alias, ours[alias][0])
        else:
            ours[alias] = (model, col.results[model])
    return ours, unmatched


def compare(col: Collection, authors_folder: Path | None = None) -> Comparison:
    """Every cell of every compared table, and the check of each of our models."""
    ours, unmatched = ours_by_alias(col)
    sections = []
    for t in read_tables().values():
        sections.append(table_section(t, ours, col.paths))
        if t.key in ("table1", "table5") and (eng := engine_section(t, ours)) is not None:
            sections.append(eng)
    sections += authors_sections(col, authors_folder)
    checks = {m: check_model(m, alias_of(m), list(col.results[m].values())) for m in col.models}
    return Comparison(sections, checks, unmatched)
