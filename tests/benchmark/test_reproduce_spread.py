"""Differences in units of our bootstrap standard error, and the paper against its own counts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchmark.report.collect import collect
from benchmark.reproduce import consistency, render, spread
from benchmark.reproduce.compare import compare
from benchmark.reproduce.paper import PaperRow, PaperTable, PaperValue
from tests.benchmark.reproduce_data import group, spec, write_result


def test_group_se_is_the_binomial_error_of_a_win_rate():
    se = spread.group_se(group(10000, 9606, 230))
    for key, wins in (("M_sem", 9606), ("M_cul", 230)):
        p = wins / 10000
        assert se[key] == pytest.approx(math.sqrt(p * (1 - p) / 10000), rel=0.05)
    # SP = cul/sem: delta method sqrt(cul)/sem for small cul
    assert se["SP"] == pytest.approx(math.sqrt(230 * (1 - 0.023)) / 9606, rel=0.08)
    assert spread.group_se(group(10000, 9606, 230)) == se  # seeded: the same every time
    assert spread.group_se(None) == dict.fromkeys(("M_sem", "M_cul", "M_non", "SP"))


def test_query_mean_se_resamples_the_outcomes(tmp_path):
    rng = np.random.default_rng(0)
    acc = (rng.random(3600) < 0.4).astype(float)
    path = write_result(tmp_path, spec("clip-l14"), "xm3600-i2t", {"overall": {"n": 3600}})
    side = path.with_name("xm3600-i2t.outcomes.parquet")
    pd.DataFrame({"query_image_id": [f"i{i}" for i in range(3600)],
                  "query_locale": ["en"] * 3600, "accuracy@5": acc}).to_parquet(side)
    from benchmark.results import read_results
    from core import files

    raw = read_results(path).model_dump()
    raw["outcomes"] = {"file": side.name, "sha256": files.sha256_file(side), "rows": 3600,
                       "id_column": "query_image_id", "group_column": "query_locale"}
    files.atomic_write_json(path, raw)
    se = spread.query_mean_se(path, read_results(path), ["accuracy@5", "lbkl@5"])
    assert se["accuracy@5"] == pytest.approx(acc.std() / math.sqrt(3600), rel=0.06)
    assert se["lbkl@5"] is None  # no such column


def test_printed_values_against_their_counts():
    """The check computes printed vs count ratio: 25/560 rounds to 0.04, not the printed
    0.05; a printed 0.04 is no flag."""
    def t8(printed: str) -> PaperTable:
        v = PaperValue(float(printed), 2, printed)
        return PaperTable("table8", "t8", "f", ("USA",),
                          (PaperRow("XLM-R-B/16plus", "XLM-R-B/16plus", "SP", {"USA": v}),))

    counts = {("XLM-R-B/16plus", "USA"): (560, 25, 24)}
    (flag,) = consistency._win_checks(t8("0.05"), counts, True)
    assert flag.implied == pytest.approx(25 / 560) and flag.how == "25/560"
    assert consistency._win_checks(t8("0.04"), counts, True) == []
    # on the shipped tables: this very cell, from the counts and from Table 11's ratio
    real = [f for f in consistency.paper_flags()
            if (f.table, f.row, f.column) == ("table8", "XLM-R-B/16plus · SP", "USA")]
    assert {f.how for f in real} == {"25/560", "Table 11 4.11% / 91.95%"}


def test_comparison_reports_se_units_and_paper_flags(tmp_path):
    out = tmp_path / "results"
    usa = group(609, 560, 25)  # the authors' counts for XLM-R-B/16plus in the USA
    write_result(out, spec("mclip-xlmr-b16plus"), "3xcm",
                 {"overall": group(11723, 10800, 500), "by_country": {"USA": usa}},
                 settings={"conventions": {"profile": "authors"}})
    comp = compare(collect([out]))
    cells = {(s.key, c.row, c.column): c for s in comp.sections for c in s.cells}
    sp = cells[("table8", "XLM-R-B/16plus · SP", "USA")]
    assert sp.ours == pytest.approx(25 / 560) and sp.paper == 0.05
    assert "25/560" in sp.paper_flag
    assert sp.diff_se == pytest.approx((25 / 560 - 0.05) / sp.se) and sp.se > 0
    m = cells[("table11", "XLM-R-B/16plus · M_sem_pct", "USA")]
    assert m.se == pytest.approx(100 * math.sqrt(560 / 609 * 49 / 609 / 609), rel=0.06)
    md = render.to_markdown(comp, render.Context())
    assert "## The paper against its own counts" in md and "25/560 = 0.0446" in md
    assert render.PAPER_MARK in md
    assert "diff_in_se" in render.to_csv(comp).splitlines()[0]
