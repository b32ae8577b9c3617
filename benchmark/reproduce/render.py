"""``paper-comparison.md``, ``.html`` and ``.csv``: the comparison, cell by cell, under a banner
naming every model whose results are not the paper's real checkpoint (rows marked †)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.report import page
from benchmark.reproduce.cells import TOLERANCES, Cell, Section
from benchmark.reproduce.compare import Comparison
from benchmark.reproduce.plan import REPRODUCE_KIND
from core import __version__, files
from core.provenance import utcnow

TITLE = "Reproducing the paper: our numbers against the published ones"
MARK = {"ok": "✓", "outside": "✗ outside", "missing": "missing", "unpublished": "unpublished"}
FOLD = 120  # sections with more cells are folded in the HTML page


@dataclass
class Context:
    """What the page says around the cells: where results came from, what failed."""

    results_dir: str = ""
    n_files: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (model/task, reason)
    notes: list[str] = field(default_factory=list)


def grouped(failures: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """Failed jobs grouped by their reason (a model that cannot load fails all its jobs)."""
    by: dict[str, list[str]] = {}
    for job, why in failures:
        by.setdefault(why, []).append(job)
    return [(jobs, why) for why, jobs in by.items()]


def fmt(x: float | None, cell: Cell, sign: bool = False) -> str:
    if x is None:
        return "-" if sign else "missing"
    nd = 0 if cell.kind == "count" else 4 if cell.decimals is None else cell.decimals + 2
    return f"{x:+.{nd}f}" if sign else f"{x:.{nd}f}"


def fake_models(comp: Comparison) -> dict[str, str]:
    """Our models with paper numbers whose results are not from the real checkpoint."""
    return {m: c.reason for m, c in comp.checks.items() if c.alias and not c.real}


MODEL_HEAD = ["our model", "paper name", "checkpoint", "revision", "conventions",
              "the paper's checkpoint?"]
SUMMARY_HEAD = ["table", "cells", "within tolerance", "outside", "missing (not computed)"]


def summary_rows(comp: Comparison) -> list[list[str]]:
    return [[s.title, str(len(s.cells)), *(str(s.counts()[k]) for k in ("ok", "outside",
                                                                         "missing"))]
            for s in comp.sections]


def model_rows(comp: Comparison) -> list[list[str]]:
    return [[m, c.alias or "-", c.checkpoint, c.revision or "-", c.conventions or "not recorded",
             "yes" if c.real else f"no: {c.reason}"] for m, c in comp.checks.items()]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    esc = [[x.replace("|", "\\|") for x in r] for r in rows]
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(r) + " |" for r in esc])


CELL_HEAD = ["row", "column", "ours", "paper", "ours - paper", "in SE", "tolerance", "within"]
PAPER_MARK = " ⚠ paper's own counts disagree"


def cell_row(cell: Cell, fakes: dict[str, str]) -> list[str]:
    mark = MARK[cell.status]
    mark = f"**{mark}**" if cell.status == "outside" else mark
    nd = 0 if cell.kind == "count" else 4 if cell.decimals is None else cell.decimals
    z = cell.diff_se  # the difference in units of our bootstrap standard error
    return [cell.row + (" †" if cell.model in fakes else ""), cell.column, fmt(cell.ours, cell),
            "-" if cell.paper is None else f"{cell.paper:.{nd}f}",
            fmt(cell.diff, cell, sign=True), "-" if z is None else f"{z:+.1f}",
            cell.tolerance.label(), mark + (PAPER_MARK if cell.paper_flag else "")]


def flag_lines(comp: Comparison) -> list[str]:
    """The paper's printed values its own counts disagree with (every compared section)."""
    return list(dict.fromkeys(c.paper_flag for s in comp.sections for c in s.cells
                              if c.paper_flag))


SE_NOTE = ("\"in SE\": ours minus the paper in units of our bootstrap standard error (win rates "
           "and SP: the group's triplets resampled; Tables 1 and 5: the query images resampled "
           "from the per-query outcomes; none for silhouettes, r, z-means and counts). "
           "Beyond ±2 the difference is larger than our own sampling noise, inside the "
           "tolerance or not.")


def to_markdown(comp: Comparison, ctx: Context) -> str:
    fakes = fake_models(comp)
    md = [f"# {TITLE}", "", f"Generated {utcnow()} by benchmark {__version__} from "
          f"{ctx.n_files} results file(s) in `{ctx.results_dir}`.", ""]
    if fakes:
        md += ["> **These models are not the paper's real checkpoints: their numbers mean "
               "nothing against the paper** (their rows are marked †):",
               *(f"> - {m}: {why}" for m, why in fakes.items()), ""]
    md += ["## Models", ""]
    md += _md_table(MODEL_HEAD, model_rows(comp))
    if comp.unmatched:
        md += ["", "Models with no published numbers: " + ", ".join(comp.unmatched) + "."]
    if ctx.failures:
        md += ["", "## Failed jobs", ""] + [f"- {', '.join(jobs)}: {why}"
                                            for jobs, why in grouped(ctx.failures)]
    md += [""] + [f"{n}\n" for n in ctx.notes] + ["## Summary", ""]
    md += _md_table(SUMMARY_HEAD, summary_rows(comp))
    md += ["", "## Tolerances", "",
           "A cell is within its tolerance when our value, rounded to the decimals the paper "
           "printed, is within the tolerance of the printed value (the paper's own rounding "
           "is never a difference).", ""]
    md += _md_table(["kind", "tolerance", "why"],
                    [[k, t.label(), t.why] for k, t in TOLERANCES.items()])
    md += ["", SE_NOTE]
    flags = flag_lines(comp)
    if flags:
        md += ["", "## The paper against its own counts", "",
               "Printed values that the authors' published win counts do not give (rounded "
               "as printed); no run can match them, whatever its tolerance "
               "(`benchmark/reproduce/consistency.py`):", ""] + [f"- {f}" for f in flags]
    for s in comp.sections:
        md += ["", f"## {s.title}", "", f"Source: {s.source}.", ""]
        md += [*s.notes, ""] if s.notes else []
        md += _md_table(CELL_HEAD, [cell_row(c, fakes) for c in s.cells]) if s.cells else [
            "(no cells)"]
    return "\n".join(md) + "\n"


def _cells_blocks(s: Section, fakes: dict[str, str]) -> list[dict]:
    rows = [[x.strip("*") for x in cell_row(c, fakes)] for c in s.cells]
    classes = [c.status if c.status in ("outside", "missing") else "" for c in s.cells]
    c = s.counts()
    fold = (f"{len(s.cells)} cells: {c['ok']} within, {c['outside']} outside, {c['missing']} "
            "missing") if len(s.cells) > FOLD else ""
    return ([page.para(f"Source: {s.source}.", "note")] + [page.para(n, "note") for n in s.notes]
            + [page.table(page.simple_table(CELL_HEAD, rows, 2, classes), fold)])


def to_html(comp: Comparison, ctx: Context) -> str:
    fakes = fake_models(comp)
    top = [{"kind": "banner", "items": [f"{m}: {w}" for m, w in fakes.items()],
            "text": "These models are not the paper's real checkpoints: their numbers mean "
                    "nothing against the paper (rows marked †):"}] if fakes else []
    models = [page.table(page.simple_table(MODEL_HEAD, model_rows(comp), 2))]
    if comp.unmatched:
        models.append(page.para(f"Models with no published numbers: "
                                f"{', '.join(comp.unmatched)}.", "note"))
    sections = [("Models", top + models)]
    if ctx.failures:
        sections.append(("Failed jobs", [page.bullets([f"{', '.join(jobs)}: {why}"
                                                       for jobs, why in grouped(ctx.failures)])]))
    sections.append(("Summary", [page.para(n, "note") for n in ctx.notes] + [page.table(
        page.simple_table(SUMMARY_HEAD, summary_rows(comp)))]))
    sections.append(("Tolerances", [page.table(page.simple_table(
        ["kind", "tolerance", "why"], [[k, t.label(), t.why] for k, t in TOLERANCES.items()])),
        page.para(SE_NOTE, "note")]))
    flags = flag_lines(comp)
    if flags:
        sections.append(("The paper against its own counts", [page.bullets(flags)]))
    sections += [(s.title, _cells_blocks(s, fakes)) for s in comp.sections]
    return page.render(TITLE, sections, {"date": utcnow(), "package_version": __version__,
                                         "n_files": ctx.n_files})


def to_csv(comp: Comparison) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "row", "column", "model", "kind", "ours", "paper", "paper_decimals",
                "diff", "tolerance", "status", "se", "diff_in_se", "paper_flag"])
    def r(x: float | None) -> str:
        return "" if x is None else repr(x)

    for s in comp.sections:
        for c in s.cells:
            w.writerow([s.key, c.row, c.column, c.model or "", c.kind, r(c.ours), r(c.paper),
                        "" if c.decimals is None else c.decimals, r(c.diff), c.tolerance.label(),
                        c.status, r(c.se), r(c.diff_se), c.paper_flag])
    return buf.getvalue()


def write(comp: Comparison, out_dir: Path, ctx: Context) -> dict[str, Path]:
    """Write ``paper-comparison.{md,html,csv}`` into ``out_dir`` (atomically)."""
    paths = {k: out_dir / f"paper-comparison.{k}" for k in ("md", "html", "csv")}
    files.atomic_write_text(paths["md"], to_markdown(comp, ctx))
    files.atomic_write_text(paths["html"], to_html(comp, ctx))
    files.atomic_write_text(paths["csv"], to_csv(comp))
    files.mark_folder(out_dir, REPRODUCE_KIND, paths.values())
    return paths
