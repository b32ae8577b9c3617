"""``build_report``: leaderboard, figures and the comparison with the authors, from any set of
results files (what is absent is left out, never an error). Tables hold every model, a figure
at most :data:`MAX_MODELS`; a malformed file costs its own figure or page, with a note.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.analysis.silhouette import EXPLORATORY_N, correlation_text
from benchmark.report import authors, gallery, leaderboard, page, plots
from benchmark.report.collect import Collection, ReportInputError, collect
from benchmark.report.page import para
from benchmark.results import ResultFile, model_slug
from core import __version__, files
from core.provenance import utcnow

log = logging.getLogger(__name__)

MAX_MODELS = 12  # models in one figure (panels, heat-map rows); every model is in the tables


def per_dataset(col: Collection, tasks: tuple[str, ...]) -> list[tuple[str, str, Collection]]:
    """(file-name suffix, caption suffix, runs) per data fingerprint of ``tasks``."""
    fps = col.fingerprints(tasks)
    return [("" if len(fps) == 1 else f"-{fp[:12]}", "" if len(fps) == 1 else f", data {fp[:12]}",
             col.subset(fp)) for fp in fps]


def shown(res: dict[str, ResultFile], field: str = "SP") -> tuple[dict[str, ResultFile], str]:
    """At most :data:`MAX_MODELS` runs, lowest overall ``field`` first, and the caption's note."""
    def key(m: str) -> tuple[bool, float, str]:
        v = (res[m].scores.get("overall") or {}).get(field)
        ok = isinstance(v, int | float) and math.isfinite(v)
        return (not ok, float(v) if ok else 0.0, m)

    keep = sorted(res, key=key)[:MAX_MODELS]
    note = (f" ({len(keep)} of {len(res)} models, lowest {field} first; every model is in the "
            "tables)" if len(keep) < len(res) else "")
    return {m: res[m] for m in keep}, note


class FigureMaker:
    """Draws figures into ``fig_dir``; one failing on malformed scores is left out, noted."""

    def __init__(self, col: Collection, fig_dir: Path, problems: list[str]):
        self.col, self.fig_dir, self.problems, self.out = col, fig_dir, problems, []

    def __call__(self, name: str, caption: str, draw: Callable[..., Any], data: Any,
                 *rest: Any) -> None:
        path = self.fig_dir / f"{name}.png"
        try:
            draw(data, path, *rest)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            plots.style.setup().close("all")  # the half-drawn figure, not kept open
            msg = f"figure {name}: skipped, malformed scores ({type(e).__name__}: {e})"
            log.warning("%s", msg)
            self.problems.append(msg)
            return
        self.out.append((path, caption))

    def label(self, res: dict[str, ResultFile]) -> dict[str, dict[str, Any]]:
        return {self.col.label(m): r.scores for m, r in res.items()}


def association_figures(fig: FigureMaker) -> None:
    """Per-country SP panels and the model x country heat map, for 3xcm and 3xcm-i2i."""
    for task, what in (("3xcm", "3XCM text -> image"), ("3xcm-i2i", "3XCM image -> image")):
        for suffix, data, sub in per_dataset(fig.col, (task,)):
            res, note = shown(sub.task(task))
            models, title = fig.label(res), what + data
            fig(f"sp-by-country-{task}{suffix}", f"{title}: SP by country with 95% intervals, "
                "countries ordered by the Common Crawl share of their language (Fig. 8)" + note,
                plots.sp_by_country, models, title)
            fig(f"sp-heatmap-{task}{suffix}", f"{title}: SP by model and country" + note,
                plots.sp_heatmap, models, title)


def xm3600_figures(fig: FigureMaker) -> None:
    """Rank-by-tier and language-frequency plots of xm3600-i2t (Figs. 6, 7, 13, 14)."""
    for suffix, data, sub in per_dataset(fig.col, ("xm3600-i2t",)):
        res = {m: r for m, r in sub.task("xm3600-i2t").items()
               if isinstance(r.scores.get("retrieved_language_counts"), dict)}
        res, note = shown(res, "lbkl@10")
        if not res:
            continue
        scores, n = fig.label(res), {fig.col.label(m): r.task.n for m, r in res.items()}
        fig(f"xm3600-rank-by-tier{suffix}", "XM3600 image -> text: resource tier of the caption "
            f"at each rank (Figs. 6, 7){data}{note}", plots.rank_by_tier, scores, n)
        fig(f"xm3600-language-frequency{suffix}", "XM3600 image -> text: languages of all "
            f"retrieved captions (Figs. 13, 14){data}{note}",
            plots.language_frequency, scores)


def matrix_figures(fig: FigureMaker) -> None:
    """Per model with 3xcm-matrix: the language x culture heat map and own-vs-English bars."""
    for suffix, data, sub in per_dataset(fig.col, ("3xcm-matrix",)):
        for model, r in sorted(sub.task("3xcm-matrix").items())[:MAX_MODELS]:
            slug, label = model_slug(model) + suffix, fig.col.label(model)
            if r.scores.get("matrix"):
                fig(f"matrix-{slug}", f"{label}: SP by query language and image culture "
                    f"(3xcm-matrix{data})",
                    plots.matrix_heatmap, r.scores["matrix"], label)
            if r.scores.get("summary"):
                fig(f"own-vs-english-{slug}", f"{label}: SP with own-language vs English "
                    f"queries{data}",
                    plots.own_vs_english, r.scores["summary"], label)


CORRELATION_NOTE = (f"r: Pearson with a 95% interval (Fisher z); ρ: Spearman; each p is "
                    f"Holm-adjusted over every correlation of its model; with fewer than "
                    f"{EXPLORATORY_N} countries a correlation is exploratory: it suggests, it "
                    "does not establish.")


def analysis_part(col: Collection, fig: FigureMaker) -> page.Table:
    """Every model's silhouette correlations, and the PNGs ``analyze`` wrote (copied)."""
    rows = []
    for i, (model, r) in enumerate(sorted(col.task("analysis").items())):
        for metric, c in (r.scores.get("correlations") or {}).items():
            rows.append([col.label(model), str(metric)]
                        + [correlation_text(c[k]) for k in ("text", "image", "sum")])
        if i >= MAX_MODELS:
            continue
        base, label = col.paths[(model, "analysis")].parent, col.label(model)
        pngs = [(f"sp-vs-silhouette-{metric}", name, f"{label}: SP vs silhouette ({metric})")
                for metric, name in (r.scores.get("figures") or {}).items()]
        pngs += [(f"umap-{kind}", info["png"], f"{label}: UMAP of the {kind} embeddings")
                 for kind, info in (r.scores.get("umap") or {}).items()
                 if isinstance(info, dict) and info.get("png")]
        for stem, name, caption in pngs:
            src = base / Path(str(name)).name  # never a path outside the model's folder
            if src.is_file():
                fig(f"{stem}-{model_slug(model)}", caption,
                    lambda s, p: files.atomic_write_bytes(p, s.read_bytes()), src)
    return page.simple_table(["model", "metric", "SP vs text sil.", "SP vs image sil.",
                              "SP vs sum"], rows, text_cols=2)


def authors_part(col: Collection, output: Path, folder: Path | None,
                 fig: FigureMaker) -> tuple[str, list, dict]:
    """The comparison files, its Markdown, HTML blocks and scatter (nothing without numbers)."""
    comp = authors.compare(col, folder)
    if comp.empty:
        return "", [], {}
    csv_path = output / "authors-comparison.csv"
    files.atomic_write_text(csv_path, comp.to_csv(index=False))
    comp_md = authors.to_markdown(comp)
    files.atomic_write_text(output / "authors-comparison.md", comp_md)
    country = comp[comp["scope"] == "country"]
    records = country.astype(object).where(country.notna(), None).to_dict("records")
    fig("authors-sp-scatter", "Our per-country SP against the authors' published SP (y = x "
        "dashed)", plots.authors_scatter, records)
    return comp_md, _comparison_blocks(comp, col), {
        "authors_csv": csv_path, "authors_md": output / "authors-comparison.md"}


def leaderboard_part(col: Collection) -> tuple[list[str], list[tuple[str, list]]]:
    """The leaderboards and per-country SP tables, as Markdown lines and HTML sections."""
    md: list[str] = []
    sections: list[tuple[str, list]] = []
    boards = leaderboard.boards(col)
    for i, b in enumerate(boards):
        data = f", data {b.fingerprint[:12]}" if len(boards) > 1 else ""
        table = leaderboard.board_table(b, col.labels, "leaderboard" if i == 0
                                        else f"leaderboard-{b.fingerprint[:12]}")
        md += [f"## Leaderboard{data}", "", page.markdown(table), leaderboard.NOTES, "",
               leaderboard.board_note(b), ""]
        sections.append((f"Leaderboard{data}", [page.table(table), para(
            leaderboard.board_note(b, markdown=False), "note")]))
        sub = col.subset(b.fingerprint)
        for task, what in (("3xcm", "text -> image"), ("3xcm-i2i", "image -> image")):
            t = leaderboard.country_table(sub, task, col.labels)
            if t is not None:
                head = f"SP by country, {what} ({task}){data}"
                shows_inf = any(c.text == "∞" for r in t.rows for c in r.cells)
                inf = [leaderboard.INFINITE_NOTE] if shows_inf else []
                md += [f"## {head}", "", page.markdown(t), *inf]
                sections.append((head, [page.table(t), *(para(n, "note") for n in inf)]))
    return md, sections


#: the kind in the marker of a report folder (see core.files.may_write_into)
REPORT_KIND = "3xcm-report"


def claim_output(output: Path) -> Path:
    """Claim ``output`` before writing; its ``figures/`` and ``gallery/`` must not be symlinks."""
    output = output.resolve()
    try:
        files.claim(output, REPORT_KIND)
    except files.FolderNotOursError as e:
        raise ReportInputError(f"--output {e}") from e
    for sub in ("figures", "gallery"):
        if (output / sub).is_symlink():
            raise ReportInputError(f"--output {output}: {sub}/ is a symlink; a report writes "
                                   "only into real folders inside --output (remove the link)")
    return output


def gallery_part(col: Collection, output: Path, datasets: list[Path] | None, page_size: int,
                 problems: list[str]) -> tuple[list[str], list, list[Path]]:
    """The galleries: Markdown lines, HTML blocks of the links, and every file written."""
    out = gallery.build_galleries(col, output, datasets, page_size)
    problems += out.notes
    if not out.pages:
        return [], [], []
    md = ["## Galleries", "", "Open `gallery/index.html`; per task and model the items behind "
          "the scores:", ""] + [f"- [{page.md_cell(t)}]({p})" for t, p in out.pages] + [""]
    blocks = [para("The triplets each model got wrong, two models side by side, and XM3600's "
                   "top captions per image (static pages beside this file):"),
              page.links(out.pages)]
    return md, blocks, out.written


def build_report(paths: list[Path], output: Path, authors_folder: Path | None = None,
                 compare_authors: bool = True, title: str = "3XCM report",
                 galleries: bool = True, gallery_datasets: list[Path] | None = None,
                 gallery_page_size: int = gallery.DEFAULT_PAGE_SIZE,
                 intro: str | None = None) -> dict[str, Path]:
    """Write ``leaderboard.md``, ``report.html``, ``figures/``, ``gallery/`` and the authors'
    comparison into ``output``; returns the files. ``intro``: plain text first, under "About"."""
    col = collect(paths)
    if not col.results:
        raise ReportInputError(f"no results files found under {', '.join(map(str, paths))}")
    output = claim_output(output)
    written: dict[str, Path] = {}
    problems: list[str] = []
    fig = FigureMaker(col, output / "figures", problems)
    md = [f"# {title}", ""]
    sections: list[tuple[str, list]] = []
    if intro:
        md += ["## About", "", intro, ""]
        sections.append(("About", [para(intro)]))
    boards_md, boards_html = leaderboard_part(col)
    md += boards_md
    sections += boards_html
    for make in (association_figures, xm3600_figures, matrix_figures):
        make(fig)
    if compare_authors:
        comp_md, comp_blocks, comp_files = authors_part(col, output, authors_folder, fig)
        if comp_md:
            md.append(comp_md)
            sections.append(("Comparison with the authors' published numbers", comp_blocks))
            written.update(comp_files)
    if col.task("analysis"):
        t = analysis_part(col, fig)
        md += ["## Silhouette vs SP (across countries)", "", page.markdown(t), "", CORRELATION_NOTE]
        sections.append(("Silhouette vs SP", [page.table(t), page.para(CORRELATION_NOTE, "note")]))
    gallery_files: list[Path] = []
    if galleries:
        g_md, g_blocks, gallery_files = gallery_part(col, output, gallery_datasets,
                                                     gallery_page_size, problems)
        if g_md:
            md += g_md
            sections.append(("Galleries", g_blocks))
    md += ["## Figures", ""] + [f"![{page.md_cell(cap)}]({p.relative_to(output)})"
                                for p, cap in fig.out]
    sections.append(("Figures", [page.figures(fig.out)]))
    notes = [f"{p}: {why}" for p, why in col.skipped] + problems
    if notes:
        md += ["## Skipped", ""] + [f"- {n}" for n in notes]
        sections.append(("Skipped", [page.bullets(notes)]))
    files.atomic_write_text(output / "leaderboard.md", "\n".join(md) + "\n")
    meta: dict[str, Any] = {"date": utcnow(), "package_version": __version__,
                            "n_files": len(col.runs)}
    files.atomic_write_text(output / "report.html", page.render(title, sections, meta))
    written.update({"leaderboard_md": output / "leaderboard.md",
                    "html": output / "report.html"})
    written.update({p.stem: p for p, _ in fig.out})
    if gallery_files:
        written["gallery"] = output / "gallery" / "index.html"
    files.mark_folder(output, REPORT_KIND, [*written.values(), *gallery_files])
    return written


AUTHORS_KEEP = ["model", "experiment", "country", "ours_n", "authors_n", "ours_wins_sem",
                "authors_A_wins", "ours_wins_cul", "authors_B_wins", "ours_wins_non",
                "authors_C_wins", "ours_SP", "authors_SP", "diff_SP", "ours_z_sem", "authors_z_A",
                "ours_z_cul", "authors_z_B", "ours_z_non", "authors_z_C"]


def _comparison_blocks(comp: pd.DataFrame, col: Collection) -> list[dict[str, Any]]:
    comp = comp.assign(model=comp["model"].map(col.label))
    overall = comp[comp["scope"] == "overall"][AUTHORS_KEEP].drop(columns=["country"])
    blocks = [page.table(page.frame_table(overall, "authors-overall"))]
    for (model, exp), g in comp[comp["scope"] == "country"].groupby(["model", "experiment"],
                                                                    sort=False):
        t = page.frame_table(g[AUTHORS_KEEP].drop(columns=["model", "experiment"]),
                             f"authors-{model_slug(model)}-{exp}")
        blocks.append(page.table(t, f"{model}, {exp}: per country"))
    return blocks
