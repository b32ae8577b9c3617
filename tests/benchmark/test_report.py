"""``report``: files, the leaderboard's numbers against the JSON, the authors' numbers."""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from benchmark import registry
from benchmark.cli import main
from benchmark.report.authors import model_names
from benchmark.report.build import build_report
from benchmark.report.leaderboard import COLUMNS
from core import datatables
from tests.benchmark.fake_results import write_fake_results

MODELS = {"clip-l14": 1, "my-own-model": 2}  # one with published numbers, one without


class Rows(HTMLParser):
    """Collects the leaderboard's rows: model -> {data-key: data-value}."""

    def __init__(self) -> None:
        super().__init__()
        self.in_board, self.rows, self.cur = False, {}, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.in_board = a.get("id") == "leaderboard"
        elif self.in_board and tag == "tr" and a.get("class") == "model-row":
            self.cur = self.rows.setdefault(a["data-model"], {})
        elif self.in_board and tag == "td" and self.cur is not None:
            self.cur[a["data-key"]] = a["data-value"]

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_board = False


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    write_fake_results(root / "results", MODELS)
    out = root / "report"
    assert main(["report", str(root / "results"), "--output", str(out)]) == 0
    return root, out


def overall(root: Path, model: str, task: str) -> dict:
    return json.loads((root / "results" / model / f"{task}.json").read_text())["scores"]["overall"]


def test_files_exist(report):
    _, out = report
    for name in ("leaderboard.md", "report.html", "authors-comparison.csv",
                 "authors-comparison.md"):
        assert (out / name).stat().st_size > 0, name
    figs = {p.name for p in (out / "figures").glob("*.png")}
    assert {"sp-by-country-3xcm.png", "sp-heatmap-3xcm.png", "sp-by-country-3xcm-i2i.png",
            "sp-heatmap-3xcm-i2i.png", "xm3600-rank-by-tier.png",
            "xm3600-language-frequency.png", "matrix-clip-l14.png",
            "own-vs-english-clip-l14.png", "authors-sp-scatter.png"} <= figs
    from PIL import Image

    for p in (out / "figures").glob("*.png"):
        with Image.open(p) as im:
            im.load()  # a whole PNG, not only its signature
            assert im.format == "PNG" and min(im.size) >= 100, p.name
            assert np.unique(np.asarray(im.convert("L"))).size > 2, f"{p.name} is blank"
    board = (out / "leaderboard.md").read_text()
    for model in MODELS:
        assert f"| {model} |" in board, model
    with (out / "authors-comparison.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {r["model"] for r in rows} <= set(MODELS)
    md = (out / "authors-comparison.md").read_text()
    for r in rows:  # the Markdown holds the CSV's rows: the overall ones in the first table
        if r["scope"] == "overall":
            assert f"| {r['model']} | {r['experiment']} |" in md, r
        else:
            assert f"### {r['model']}, {r['experiment']}: per country" in md, r
            assert f"| {r['country']} |" in md, r
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(figs)  # self-contained
    assert "http://" not in html and "https://" not in html and "<script" not in html


def test_html_has_one_row_per_model_with_the_json_numbers(report):
    root, out = report
    parser = Rows()
    parser.feed((out / "report.html").read_text())
    assert set(parser.rows) == set(MODELS)
    for model, cells in parser.rows.items():
        assert set(cells) == {c.key for c in COLUMNS} | {"vs_next"}
        for c in COLUMNS:
            want = overall(root, model, c.task)[c.field]
            if isinstance(want, list):
                assert [float(v) for v in cells[c.key].split(",")] == want
            else:
                assert float(cells[c.key]) == want, (model, c.key)
    md = (out / "leaderboard.md").read_text()
    for model in MODELS:
        sp = overall(root, model, "3xcm")["SP"]
        assert f"| {model} | " in md and f"{sp:.3f}" in md
        by = json.loads((root / "results" / model / "3xcm.json").read_text())["scores"]
        row = "| " + " | ".join([model] + [f"{by['by_country'][c.code]['SP']:.2f}"
                                           for c in datatables.countries()]) + " |"
        assert row in md  # the per-country SP table, countries in the table's order


def _authors_rows(name: str) -> list[dict[str, str]]:
    text = datatables.data_file(f"authors_rq2/{name}").text
    return list(csv.DictReader(io.StringIO(text, newline="")))


def test_comparison_carries_the_authors_numbers_exactly(report):
    root, out = report
    with (out / "authors-comparison.csv").open(newline="", encoding="utf-8") as f:
        comp = list(csv.DictReader(f))
    assert {r["model"] for r in comp} == {"clip-l14"}  # my-own-model has no published numbers
    theirs = {(r["experiment"], ""): r for r in _authors_rows("overall_aggregated.csv")
              if r["model"] == "clip-vit-large-patch14"}
    theirs.update({(r["experiment"], datatables.country(r["country"]).code): r
                   for r in _authors_rows("country_aggregated.csv")
                   if r["model"] == "clip-vit-large-patch14"})
    assert len(comp) == 2 * 17 and len(theirs) == 2 * 17
    task_of = {"text-to-image": "3xcm", "image-to-image": "3xcm-i2i"}
    for r in comp:
        t = theirs[(r["experiment"], r["country"])]
        for k in ("A_wins", "B_wins", "C_wins"):
            assert r[f"authors_{k}"] == t[k]
        for k in ("z_A", "z_B", "z_C"):
            assert float(r[f"authors_{k}"]) == float(t[k])
        a, b, c = int(t["A_wins"]), int(t["B_wins"]), int(t["C_wins"])
        assert float(r["authors_SP"]) == b / a
        assert float(r["authors_M_sem"]) == a / (a + b + c)
        assert int(r["authors_n"]) == a + b + c
        res = json.loads((root / "results/clip-l14" / f"{task_of[r['experiment']]}.json")
                         .read_text())["scores"]
        ours = res["overall"] if r["scope"] == "overall" else res["by_country"][r["country"]]
        assert float(r["ours_SP"]) == ours["SP"]
        assert int(r["ours_wins_cul"]) == ours["wins_cul"]
        assert float(r["diff_SP"]) == pytest.approx(ours["SP"] - b / a, abs=1e-12)
    html = (out / "report.html").read_text()
    overall_t2i = theirs[("text-to-image", "")]
    assert f'data-value="{int(overall_t2i["A_wins"])}"' in html
    assert f'data-value="{float(overall_t2i["z_A"])!r}"' in html


def test_model_name_table_covers_the_papers_models():
    names = model_names()
    published = {r["model"] for r in _authors_rows("overall_aggregated.csv")}
    assert sorted(names.values()) == sorted(published)  # each of theirs exactly once
    for name, entry in registry.models().items():
        if entry.paper:
            assert name in names, f"paper model {name} missing from model_names.csv"


def test_only_3xcm_results_and_bad_input(tmp_path, capsys):
    write_fake_results(tmp_path / "r", {"solo": 5}, xm=False, with_matrix=False)
    (tmp_path / "r/solo/3xcm-i2i.json").unlink()
    (tmp_path / "r/notes.json").write_text('{"not": "results"}')
    written = build_report([tmp_path / "r"], tmp_path / "out")
    assert not (tmp_path / "out/authors-comparison.csv").exists()
    assert {p.name for p in (tmp_path / "out/figures").glob("*.png")} == {
        "sp-by-country-3xcm.png", "sp-heatmap-3xcm.png"}
    assert written["html"].read_text().count('class="model-row"') == 1
    assert main(["report", str(tmp_path / "empty-nowhere"), "--output", str(tmp_path / "o")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("error:") for line in err) and len(err) == 2


def test_malformed_scores_cost_a_figure_not_the_report(tmp_path):
    write_fake_results(tmp_path / "r", {"ok": 1, "broken": 2}, xm=False, with_matrix=False)
    path = tmp_path / "r/broken/3xcm-i2i.json"
    data = json.loads(path.read_text())
    data["scores"]["by_country"]["USA"] = {"n": 3}  # no SP, no interval
    path.write_text(json.dumps(data))
    written = build_report([tmp_path / "r"], tmp_path / "out", compare_authors=False)
    md = written["leaderboard_md"].read_text()
    assert "## Skipped" in md and "figure sp-by-country-3xcm-i2i: skipped, malformed scores" in md
    assert written["html"].read_text().count('class="model-row"') == 2
    assert {"sp-heatmap-3xcm-i2i", "sp-by-country-3xcm"} <= set(written)  # only its figure


def test_report_writes_only_into_a_folder_it_wrote(tmp_path, capsys):
    """--output naming a folder of someone else's files is refused (one line, exit 2) and the
    files stay; a report folder is rewritten in place, a user's note in it kept."""
    from core.files import read_marker

    write_fake_results(tmp_path / "r", {"solo": 5}, xm=False, with_matrix=False)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "report.html").write_text("my page\n")
    assert main(["report", str(tmp_path / "r"), "--output", str(theirs), "--no-authors"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --output") and "refusing" in err[0]
    assert (theirs / "report.html").read_text() == "my page\n"
    out = tmp_path / "out"
    build_report([tmp_path / "r"], out, compare_authors=False)
    (out / "notes.txt").write_text("keep\n")
    written = build_report([tmp_path / "r"], out, compare_authors=False)
    assert (out / "notes.txt").read_text() == "keep\n"
    marker = read_marker(out)
    assert marker["kind"] == "3xcm-report" and "notes.txt" not in marker["files"]
    assert {"leaderboard.md", "report.html"} <= set(marker["files"])
    assert set(marker["files"]) == {p.relative_to(out).as_posix() for p in written.values()}
