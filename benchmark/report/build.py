"""``build_report``: leaderboard, figures and the comparison with the authors, from any set of
results files (what is absent is left out, never an error)."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark import __version__
from benchmark.report import authors, gallery, leaderboard, page, plots
from benchmark.report.collect import Collection, ReportInputError, collect
from benchmark.results import model_slug, now_iso
from core import files

log = logging.getLogger(__name__)


def association_figures(col: Collection, fig_dir: Path) -> list[tuple[Path, str]]:
    """Per-country SP panels and the model x country heat map, for 3xcm and 3xcm-i2i."""
    out: list[tuple[Path, str]] = []
    for task, what in (("3xcm", "3XCM text -> image"), ("3xcm-i2i", "3XCM image -> image")):
        models = {m: r.scores for m, r in col.task(task).items()}
        if not models:
            continue
        p = fig_dir / f"sp-by-country-{task}.png"
        plots.sp_by_country(models, p, what)
        out.append((p, f"{what}: SP by country with 95% intervals, countries ordered by the "
                       "Common Crawl share of their language (Fig. 8)"))
        p = fig_dir / f"sp-heatmap-{task}.png"
        plots.sp_heatmap(models, p, what)
        out.append((p, f"{what}: SP by model and country"))
    return out


def xm3600_figures(col: Collection, fig_dir: Path) -> list[tuple[Path, str]]:
    """Rank-by-tier and language-frequency plots of xm3600-i2t (Figs. 6, 7, 13, 14)."""
    res = col.task("xm3600-i2t")
    counts = {m: r.scores["retrieved_language_counts"] for m, r in res.items()
              if isinstance(r.scores.get("retrieved_language_counts"), dict)}
    if not counts:
        return []
    p1, p2 = fig_dir / "xm3600-rank-by-tier.png", fig_dir / "xm3600-language-frequency.png"
    plots.rank_by_tier({m: res[m].scores for m in counts}, p1, {m: res[m].task.n for m in counts})
    plots.language_frequency({m: res[m].scores for m in counts}, p2)
    return [(p1, "XM3600 image -> text: resource tier of the caption at each rank (Figs. 6, 7)"),
            (p2, "XM3600 image -> text: languages of all retrieved captions (Figs. 13, 14)")]


def matrix_figures(col: Collection, fig_dir: Path) -> list[tuple[Path, str]]:
    """Per model with 3xcm-matrix: the language x culture heat map and own-vs-English bars."""
    out: list[tuple[Path, str]] = []
    for model, r in col.task("3xcm-matrix").items():
        slug = model_slug(model)
        if r.scores.get("matrix"):
            p = fig_dir / f"matrix-{slug}.png"
            plots.matrix_heatmap(r.scores["matrix"], p, model)
            out.append((p, f"{model}: SP by query language and image culture (3xcm-matrix)"))
        if r.scores.get("summary"):
            p = fig_dir / f"own-vs-english-{slug}.png"
            plots.own_vs_english(r.scores["summary"], p, model)
            out.append((p, f"{model}: SP with own-language vs English queries"))
    return out


def analysis_section(col: Collection, fig_dir: Path) -> tuple[str, list[tuple[Path, str]]]:
    """Markdown of the silhouette correlations, and the UMAP PNGs that ``analyze`` wrote
    (copied into ``fig_dir``)."""
    from benchmark.analysis.silhouette import EXPLORATORY_N, correlation_text

    lines = ["| model | metric | SP vs text sil. | SP vs image sil. | SP vs sum |",
             "|---|---|---|---|---|"]
    figs: list[tuple[Path, str]] = []
    for model, r in col.task("analysis").items():
        for metric, c in (r.scores.get("correlations") or {}).items():
            cells = [correlation_text(c[k]) for k in ("text", "image", "sum")]
            lines.append(f"| {model} | {metric} | " + " | ".join(cells) + " |")
        base = col.paths[(model, "analysis")].parent
        pngs = [(f"sp-vs-silhouette-{metric}", name, f"{model}: SP vs silhouette ({metric})")
                for metric, name in (r.scores.get("figures") or {}).items()]
        pngs += [(f"umap-{kind}", info["png"], f"{model}: UMAP of the {kind} embeddings")
                 for kind, info in (r.scores.get("umap") or {}).items()
                 if isinstance(info, dict) and info.get("png")]
        for stem, name, caption in pngs:
            if (base / name).is_file():
                dest = fig_dir / f"{stem}-{model_slug(model)}.png"
                files.atomic_write_bytes(dest, (base / name).read_bytes())
                figs.append((dest, caption))
    lines.append(f"\nr: Pearson with a 95% interval (Fisher z); ρ: Spearman; each p is "
                 f"Holm-adjusted over every correlation of its model; with fewer than "
                 f"{EXPLORATORY_N} countries a correlation is exploratory: it suggests, it "
                 "does not establish.")
    return "\n".join(lines) + "\n", figs


def guarded(what: str, problems: list[str], fn: Any, *args: Any) -> list[tuple[Path, str]]:
    """Run one figure builder; a malformed results file costs its figure, not the report."""
    try:
        return fn(*args)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        msg = f"{what}: skipped, malformed scores ({type(e).__name__}: {e})"
        log.warning("%s", msg)
        problems.append(msg)
        return []


def authors_part(col: Collection, output: Path, fig_dir: Path, folder: Path | None,
                 problems: list[str]) -> tuple[str, str, list[tuple[Path, str]], dict[str, Path]]:
    """The comparison files, its Markdown and HTML, its figure (nothing when no model has
    published numbers)."""
    comp = authors.compare(col, folder)
    if comp.empty:
        return "", "", [], {}
    csv_path = output / "authors-comparison.csv"
    with files.atomic_path(csv_path, suffix=".csv") as tmp:
        comp.to_csv(tmp, index=False)
    comp_md = authors.to_markdown(comp)
    files.atomic_write_text(output / "authors-comparison.md", comp_md)
    country = comp[comp["scope"] == "country"]
    records = country.astype(object).where(country.notna(), None).to_dict("records")
    p = fig_dir / "authors-sp-scatter.png"

    def scatter() -> list[tuple[Path, str]]:
        plots.authors_scatter(records, p)
        return [(p, "Our per-country SP against the authors' published SP (y = x dashed)")]

    figs = guarded("authors scatter", problems, scatter)
    return comp_md, _comparison_html(comp), figs, {
        "authors_csv": csv_path, "authors_md": output / "authors-comparison.md"}


def leaderboard_part(col: Collection) -> tuple[list[str], list[tuple[str, str]]]:
    """The leaderboards (one per data fingerprint) and the per-country SP tables of each,
    as Markdown lines and HTML sections."""
    md: list[str] = []
    sections: list[tuple[str, str]] = []
    boards = leaderboard.boards(col)
    for i, b in enumerate(boards):
        head = "Leaderboard" + (f", data {b.fingerprint[:12]}" if len(boards) > 1 else "")
        md += [f"## {head}", "", leaderboard.board_markdown(b)]
        sections.append((head, leaderboard.board_html(b, "leaderboard" if i == 0
                                                      else f"leaderboard-{b.fingerprint[:12]}")))
        sub = col.subset(b.fingerprint)
        for task, what in (("3xcm", "text -> image"), ("3xcm-i2i", "image -> image")):
            codes, by_country = leaderboard.country_table(sub, task)
            if by_country:
                cmd = leaderboard.country_markdown(codes, by_country)
                h = f"SP by country, {what} ({task})" + (
                    f", data {b.fingerprint[:12]}" if len(boards) > 1 else "")
                md += [f"## {h}", "", cmd]
                sections.append((h, _md_table_html(cmd)))
    return md, sections


#: the kind in the marker of a report folder (see core.files.claim_folder)
REPORT_KIND = "3xcm-report"


def gallery_part(col: Collection, output: Path, datasets: list[Path] | None, page_size: int,
                 problems: list[str]) -> tuple[list[str], str, list[Path]]:
    """The galleries (benchmark.report.gallery): Markdown lines and HTML of the links, and
    every file written under ``output/gallery``."""
    out = gallery.build_galleries(col, output, datasets, page_size)
    problems += out.notes
    if not out.pages:
        return [], "", []
    md = ["## Galleries", "", "Open `gallery/index.html`; per task and model the items behind "
          "the scores:", ""] + [f"- [{t}]({p})" for t, p in out.pages] + [""]
    body = ("<p>The triplets each model got wrong, two models side by side, and XM3600's top "
            "captions per image (static pages beside this file):</p><ul>"
            + "".join(f'<li><a href="{html.escape(p)}">{html.escape(t)}</a></li>'
                      for t, p in out.pages) + "</ul>")
    written = sorted(p for p in (output / "gallery").rglob("*") if p.is_file())
    return md, body, written


def build_report(paths: list[Path], output: Path, authors_folder: Path | None = None,
                 compare_authors: bool = True, title: str = "3XCM report",
                 galleries: bool = True, gallery_datasets: list[Path] | None = None,
                 gallery_page_size: int = gallery.DEFAULT_PAGE_SIZE,
                 intro: str | None = None) -> dict[str, Path]:
    """Write ``leaderboard.md``, ``report.html``, ``figures/*.png``, ``gallery/`` (unless
    ``galleries`` is off) and (when a model has published numbers)
    ``authors-comparison.{csv,md}`` into ``output``; returns the files. ``intro``: a paragraph
    of plain text put first, under "About" (the demo says there what it planted and found)."""
    col = collect(paths)
    if not col.results:
        raise ReportInputError(f"no results files found under {', '.join(map(str, paths))}")
    try:  # a folder a user names: new, empty, or one a report was written to
        files.claim_folder(output, REPORT_KIND)
    except files.FolderNotOursError as e:
        raise ReportInputError(f"--output {e}") from e
    output.mkdir(parents=True, exist_ok=True)
    fig_dir = output / "figures"
    written: dict[str, Path] = {}
    problems: list[str] = []
    md = [f"# {title}", ""]
    sections: list[tuple[str, str]] = []
    if intro:
        md += ["## About", "", intro, ""]
        sections.append(("About", f"<p>{html.escape(intro)}</p>"))
    boards_md, boards_html = leaderboard_part(col)
    md += boards_md
    sections += boards_html
    figs = []
    for what, fn in (("3xcm figures", association_figures), ("xm3600 figures", xm3600_figures),
                     ("3xcm-matrix figures", matrix_figures)):
        figs += guarded(what, problems, fn, col, fig_dir)
    if compare_authors:
        comp_md, comp_html, comp_figs, comp_files = authors_part(col, output, fig_dir,
                                                                 authors_folder, problems)
        if comp_md:
            md.append(comp_md)
            sections.append(("Comparison with the authors' published numbers", comp_html))
            figs += comp_figs
            written.update(comp_files)
    if col.task("analysis"):
        an_md, an_figs = analysis_section(col, fig_dir)
        md += ["## Silhouette vs SP (across countries)", "", an_md]
        sections.append(("Silhouette vs SP", _md_table_html(an_md)))
        figs += an_figs
    gallery_files: list[Path] = []
    if galleries:
        g_md, g_html, gallery_files = gallery_part(col, output, gallery_datasets,
                                                   gallery_page_size, problems)
        if g_md:
            md += g_md
            sections.append(("Galleries", g_html))
    md += ["## Figures", ""] + [f"![{cap}]({p.relative_to(output)})" for p, cap in figs]
    sections.append(("Figures", "".join(page.figure(p, cap) for p, cap in figs)))
    notes = [f"{p}: {why}" for p, why in col.skipped] + problems
    if notes:
        md += ["## Skipped", ""] + [f"- {n}" for n in notes]
        sections.append(("Skipped", "<ul>" + "".join(f"<li>{html.escape(n)}</li>"
                                                      for n in notes) + "</ul>"))
    files.atomic_write_text(output / "leaderboard.md", "\n".join(md) + "\n")
    meta: dict[str, Any] = {"date": now_iso(), "package_version": __version__,
                            "n_files": len(col.paths)}
    files.atomic_write_text(output / "report.html", page.render(title, sections, meta))
    written.update({"leaderboard_md": output / "leaderboard.md",
                    "html": output / "report.html"})
    written.update({p.stem: p for p, _ in figs})
    if gallery_files:
        written["gallery"] = output / "gallery" / "index.html"
    files.mark_folder(output, REPORT_KIND, [*written.values(), *gallery_files])
    return written


def _comparison_html(comp: pd.DataFrame) -> str:
    keep = ["model", "experiment", "country", "ours_n", "authors_n", "ours_wins_sem",
            "authors_A_wins", "ours_wins_cul", "authors_B_wins", "ours_wins_non",
            "authors_C_wins", "ours_SP", "authors_SP", "diff_SP", "ours_z_sem", "authors_z_A",
            "ours_z_cul", "authors_z_B", "ours_z_non", "authors_z_C"]
    overall = comp[comp["scope"] == "overall"][keep].drop(columns=["country"])
    parts = [page.frame_table(overall, "authors-overall")]
    for (model, exp), g in comp[comp["scope"] == "country"].groupby(["model", "experiment"],
                                                                    sort=False):
        parts.append(f"<details><summary>{html.escape(model)}, {exp}: per country</summary>"
                     + page.frame_table(g[keep].drop(columns=["model", "experiment"]),
                                        f"authors-{model_slug(model)}-{exp}") + "</details>")
    return "".join(parts)


def _md_table_html(md: str) -> str:
    """A Markdown pipe table (as written above) as HTML."""
    lines = md.strip().splitlines()
    rows = [ln.strip().strip("|").split("|") for ln in lines if ln.startswith("|")]
    notes = "".join(f'<p class="note">{html.escape(ln)}</p>' for ln in lines
                    if ln.strip() and not ln.startswith("|"))
    head, body = rows[0], rows[2:]
    out = "<table><thead><tr>" + "".join(f"<th>{html.escape(c.strip())}</th>" for c in head)
    out += "</tr></thead><tbody>"
    for r in body:
        out += "<tr>" + "".join(f"<td>{html.escape(c.strip())}</td>" for c in r) + "</tr>"
    return out + "</tbody></table>" + notes
