"""The leaderboard's rules: one table per data fingerprint, neighbours marked by a
Holm-adjusted paired test, non-results listed as skipped, NaN shown as missing, ISO-3
country codes, one SP colour scale."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmark.metrics.significance import holm
from benchmark.report import compare, leaderboard
from benchmark.report.build import build_report
from benchmark.report.collect import collect
from benchmark.report.plots import SP_SCALE, sp_colours
from tests.benchmark.fake_results import write_fake_results, write_outcome_run

BIASED = (0.40, 0.45, 0.15)  # SP about 1.1
FAIR = (0.60, 0.20, 0.20)  # SP about 0.33


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("board") / "r"
    write_outcome_run(root, "biased-a", BIASED, 1)
    write_outcome_run(root, "biased-b", BIASED, 2)
    write_outcome_run(root, "fair", FAIR, 3)
    write_outcome_run(root / "other", "elsewhere", BIASED, 4, fingerprint="1" * 64)
    (root / "list.json").write_text("[]")
    (root / "foo.json").write_text('{"foo": 1}')
    return root


def test_neighbours_are_tested_with_holm(results):
    col = collect([results])
    boards = leaderboard.boards(col)
    assert [b.fingerprint for b in boards] == ["0" * 64, "1" * 64]
    b = boards[0]
    assert [r["model"] for r in b.rows][0] == "fair" and b.rank == "SP" and b.pairs == 2
    assert {r["model"] for r in b.rows} == {"fair", "biased-a", "biased-b"}
    raw = []
    for upper, lower in zip(b.rows, b.rows[1:], strict=False):
        res = col.task("3xcm")
        p, why = compare.pair_p_value("3xcm", "SP", col.paths[(upper["model"], "3xcm")],
                                      res[upper["model"]], col.paths[(lower["model"], "3xcm")],
                                      res[lower["model"]])
        assert why is None and upper["vs_next"]["p"] == p and upper["vs_next"]["next"] == \
            lower["model"]
        raw.append(p)
    assert [r["vs_next"]["p_holm"] for r in b.rows[:2]] == holm(raw)
    assert b.rows[0]["vs_next"]["significant"]  # fair vs biased: found
    assert not b.rows[1]["vs_next"]["significant"]  # two draws of one bias: not
    assert b.rows[2]["vs_next"] is None
    assert leaderboard.vs_next_text(b.rows[0]["vs_next"]).startswith("differs (p ")
    assert leaderboard.vs_next_text(b.rows[1]["vs_next"]).startswith("n.s. (p ")
    assert [r["model"] for r in boards[1].rows] == ["elsewhere"] and boards[1].pairs == 0


def test_report_one_table_per_fingerprint_and_skipped(results, tmp_path):
    written = build_report([results], tmp_path / "out", compare_authors=False)
    md = written["leaderboard_md"].read_text()
    assert "## Leaderboard, data 000000000000" in md and "## Leaderboard, data 111111111111" in md
    first, second = md.split("## Leaderboard, data 111111111111")
    assert "| elsewhere |" not in first and "| elsewhere |" in second
    assert "| fair |" not in second.split("## SP by country")[0]
    assert f"`{'0' * 64}`" in first and "Holm-adjusted across the 2 neighbouring pair(s)" in first
    skipped = md.split("## Skipped")[1]
    assert "list.json: not a results file: a JSON list, not an object" in skipped
    assert "foo.json: not a results file: no schema_version, model, task, scores" in skipped
    html = written["html"].read_text()
    assert html.count('class="leaderboard"') == 2 and 'id="leaderboard-111111111111"' in html
    assert 'data-key="vs_next" class="differs"' in html


def test_one_fingerprint_keeps_one_table(tmp_path):
    write_fake_results(tmp_path / "r", {"a": 1, "b": 2}, xm=False, with_matrix=False)
    md = build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False)[
        "leaderboard_md"].read_text()
    assert md.count("## Leaderboard") == 1 and "## Leaderboard\n" in md
    assert "| - |" in md  # no outcomes recorded: the pair is not tested, never a guess


def test_nan_is_missing_not_nan(tmp_path):
    write_fake_results(tmp_path / "r", {"a": 1}, xm=False, with_matrix=False)
    path = tmp_path / "r/a/3xcm.json"
    data = json.loads(path.read_text())
    data["scores"]["overall"]["M_sem"] = math.nan
    data["scores"]["by_country"]["THA"]["SP"] = math.nan
    path.write_text(json.dumps(data))  # a NaN token, as a hand-edited or foreign file has
    written = build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False)
    md, html = written["leaderboard_md"].read_text(), written["html"].read_text()
    assert "nan" not in md.lower().replace("nanmean", "")
    assert 'data-key="M_sem" data-value="">-</td>' in html
    assert leaderboard.fmt(math.nan) == "-" and leaderboard.fmt([0.1, math.nan]) == "-"


def test_country_labels_are_iso3_everywhere(tmp_path):
    write_fake_results(tmp_path / "r", {"clip-l14": 1}, xm=False, with_matrix=False)
    build_report([tmp_path / "r"], tmp_path / "o")
    md = (tmp_path / "o/leaderboard.md").read_text()
    head = next(ln for ln in md.splitlines() if ln.startswith("| model | USA"))
    assert "| GBR |" in head and "| DEU |" in head and " UK " not in head and "GER" not in head
    comp = (tmp_path / "o/authors-comparison.md").read_text()
    assert "| GBR |" in comp and "| UK |" not in comp and "| GER |" not in comp


def test_one_sp_colour_scale():
    got = sp_colours(np.array([1.0, 2.0, 0.5, 8.0, 0.0, np.nan]))
    assert got[:5].tolist() == [0.0, 1.0, -1.0, 2.0, -2.0] and np.isnan(got[5])
    assert SP_SCALE == (0.25, 4.0)


def test_log_axis_minor_labels_are_plain_numbers():
    from benchmark.report.plots import _minor_label

    assert [_minor_label(v) for v in (0.02, 0.03, 0.5, 2.0, 3.0, 50.0, 0.0)] == [
        "0.02", "", "0.5", "2", "", "50", ""]


def test_no_semantic_win_is_infinite_on_every_board(tmp_path):
    """An SP without a semantic win (the most self-preference there can be) is "∞ (no
    semantic win)" on the leaderboard, ∞ in the per-country table, sorts after every finite
    SP, and never reads as 0 or as missing; win rates carry their intervals."""
    write_fake_results(tmp_path / "r", {"a": 1, "b": 2}, xm=False, with_matrix=False)
    path = tmp_path / "r/a/3xcm.json"
    data = json.loads(path.read_text())
    o = data["scores"]["overall"]
    o.update(SP=None, SP_note="∞ (no semantic win)", wins_sem=0, M_sem=0.0,
             SP_ci95=[3.5, None])
    data["scores"]["by_country"]["THA"].update(SP=None, wins_sem=0, SP_ci95=[2.0, None])
    path.write_text(json.dumps(data))
    written = build_report([tmp_path / "r"], tmp_path / "o", compare_authors=False)
    md, html = written["leaderboard_md"].read_text(), written["html"].read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("| a |") or ln.startswith("| b |")]
    assert rows[0].startswith("| b |") and rows[1].startswith("| a |")  # ∞ after finite
    assert "| ∞ (no semantic win) | [3.500, ∞] |" in rows[1]
    assert "| ∞ |" in md  # the per-country table
    assert 'data-key="SP" data-value="inf">∞ (no semantic win)</td>' in html
    assert "M_cul 95% CI" in md.splitlines()[[i for i, ln in enumerate(md.splitlines())
                                              if ln.startswith("| model | n")][0]]
    assert leaderboard.fmt(math.inf) == "∞ (no semantic win)"
    assert leaderboard.fmt([0.5, math.inf]) == "[0.500, ∞]"
