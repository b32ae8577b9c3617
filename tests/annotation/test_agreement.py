"""Decision rule and agreement statistics against hand-computed values and the package."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest

from annotation.agreement import (
    agreement,
    fleiss_kappa,
    krippendorff_alpha,
    majority,
    tag_precision_recall,
)


def test_majority_rule():
    assert majority(2, 1, 3).outcome == "keep"
    assert majority(0, 3, 3).outcome == "remove"
    assert majority(2, 2, 3).outcome == "needs_review"
    assert majority(2, 2, 3).reason == "tie (keep 2, remove 2)"
    d = majority(2, 0, 3)
    assert (d.outcome, d.reason) == ("needs_review", "2/3 annotators (keep 2, remove 0)")
    assert majority(1, 0, 1).outcome == "keep"


# Wikipedia's worked example of Fleiss' kappa: 10 subjects, 14 raters, 5 categories;
# P bar = 0.378, P_e = 0.213, kappa = 0.210.
WIKI = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_textbook_and_hand_values():
    assert fleiss_kappa(WIKI) == pytest.approx(0.20993, abs=1e-5)
    # (keep, remove) counts A (3,0) B (1,2) C (2,1) D (3,0) E (0,3): kappa = 4/9 (by hand)
    assert fleiss_kappa([[3, 0], [1, 2], [2, 1], [3, 0], [0, 3]]) == pytest.approx(4 / 9)
    # perfect agreement with both categories used: kappa = 1
    assert fleiss_kappa([[3, 0], [0, 3]]) == pytest.approx(1.0)
    # one category only: P_e = 1, undefined
    assert fleiss_kappa([[3, 0], [3, 0]]) is None
    assert fleiss_kappa([]) is None
    with pytest.raises(ValueError, match="same number of ratings"):
        fleiss_kappa([[3, 0], [1, 1]])


def test_krippendorff_alpha_hand_value_and_package():
    ratings = {  # the five images of the integration test: alpha = 13/27 (by hand)
        "u1": {"A": "keep", "B": "remove", "C": "keep", "D": "keep", "E": "remove"},
        "u2": {"A": "keep", "B": "remove", "C": "remove", "D": "keep", "E": "remove"},
        "u3": {"A": "keep", "B": "keep", "C": "keep", "D": "keep", "E": "remove"},
    }
    assert krippendorff_alpha(ratings, ["keep", "remove"]) == pytest.approx(13 / 27)
    # missing values and four categories: the wrapper agrees with the package on its README data
    rows = [
        [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
        [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
        [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
    ]
    expected = krippendorff.alpha(reliability_data=rows, level_of_measurement="nominal")
    as_dict = {f"c{i}": {f"u{j}": str(int(v)) for j, v in enumerate(r) if not math.isnan(v)}
               for i, r in enumerate(rows)}
    assert krippendorff_alpha(as_dict) == pytest.approx(expected)
    # a single value everywhere: undefined
    assert krippendorff_alpha({"a": {"x": "keep"}, "b": {"x": "keep"}}) is None


def test_agreement_uses_units_with_exactly_n_votes():
    votes = {
        "A": {"u1": "keep", "u2": "keep", "u3": "keep"},
        "B": {"u1": "remove", "u2": "remove", "u3": "keep"},
        "C": {"u1": "keep", "u2": "remove", "u3": "keep"},
        "D": {"u1": "keep", "u2": "keep", "u3": "keep"},
        "E": {"u1": "remove", "u2": "remove", "u3": "remove"},
        "F": {"u1": "keep", "u2": "remove"},  # still open: left out
        "G": {"u1": "keep", "u2": "remove", "u3": "keep", "u4": "remove"},  # extra reviewer
    }
    ag = agreement(votes, 3, ["keep", "remove"])
    assert ag["n_units"] == 5
    assert ag["fleiss_kappa"] == pytest.approx(4 / 9)
    assert ag["krippendorff_alpha"] == pytest.approx(13 / 27)
    assert agreement({}, 3, ["keep", "remove"]) == {
        "n_units": 0, "n_raters": 3, "krippendorff_alpha": None, "fleiss_kappa": None}


def test_tag_precision_recall_micro():
    gemini = {"a": ["food", "market"], "b": ["temple"], "c": ["dance", "food"], "d": ["x"]}
    people = {"a": ["food", "market"], "b": ["temple", "dance"], "c": ["dance"]}
    s = tag_precision_recall(gemini, people)
    assert (s["true_positives"], s["n_predicted"], s["n_reference"]) == (4, 5, 5)
    assert s["precision"] == pytest.approx(0.8) and s["recall"] == pytest.approx(0.8)
    assert s["f1"] == pytest.approx(0.8) and s["exact_match"] == pytest.approx(1 / 3)
    empty = tag_precision_recall({"a": []}, {"a": []})
    assert empty["precision"] is None and empty["recall"] is None and empty["exact_match"] == 1.0
