"""``--candidate-countries``: the controlled design (semantic and non-relevant candidates only
from a fixed set of countries), recorded, validated and refused when malformed."""

from __future__ import annotations

import json

import pytest

from builder.catalog import Catalog
from tests.worlds import build_world
from triplets import cli
from triplets.rules import check_triplets
from triplets.sample_run import run_params, validate_workdir
from triplets.sampling import SampleConfig, SamplingError

CONCEPTS = ["train", "school", "taxi", "craft"]
CONTROL = ("USA", "DEU", "FRA", "ESP", "JPN", "CHN", "BRA", "NGA")


def test_candidates_come_only_from_the_set_and_every_image_still_anchors(tmp_path):
    wd = build_world(tmp_path / "w", CONCEPTS, per_cell=2)
    assert cli.main(["sample", "--workdir", str(wd.root), "--seed", "1", "--per-image", "2",
                     "--candidate-countries", ",".join(CONTROL).lower()]) == 0
    bad, rows = validate_workdir(wd.root)
    assert bad == []
    assert len(rows) == 2 * len(CONCEPTS) * 16 * 2  # every kept image anchors twice
    assert {r["semantic_country"] for r in rows} <= set(CONTROL)
    assert {r["non_relevant_country"] for r in rows} <= set(CONTROL)
    # every country is still queried (its cultural candidate is its own image)
    assert len({r["query_country"] for r in rows}) == 16
    with Catalog.open(wd) as cat:
        params = run_params(cat)
        summary = cat.last_run("triplets")["summary"]
    assert params["candidate_countries"] == sorted(CONTROL)
    assert "candidates from " + ",".join(sorted(CONTROL)) in summary
    # the validator holds a row to the recorded set
    rows[0] = {**rows[0], "semantic_country": "THA"}
    found = check_triplets(rows, None, tags_known=False, distinct_language=False,
                           seed_required=False, check_query_text=False,
                           candidate_countries=CONTROL)
    assert [(v.row_id, v.rule) for v in found if v.rule == "candidate_country"] == [
        (rows[0]["triplet_id"], "candidate_country")]


def test_the_default_records_nothing_new(tmp_path):
    wd = build_world(tmp_path / "w", CONCEPTS[:2], per_cell=1)
    assert cli.main(["sample", "--workdir", str(wd.root), "--seed", "0"]) == 0
    with Catalog.open(wd) as cat:
        params = run_params(cat)
    assert params == {"seed": 0, "per_image": 1, "distinct_language": True}
    assert SampleConfig(seed=0).record() == params
    assert "candidate_countries" not in json.dumps(params)


@pytest.mark.parametrize("value, hint", [("USA,XXX", "unknown: XXX"), ("USA", "at least two")])
def test_a_bad_set_is_one_line_and_exit_2(value, hint, tmp_path, capsys):
    wd = build_world(tmp_path / "w", CONCEPTS[:2], per_cell=1)
    assert cli.main(["sample", "--workdir", str(wd.root), "--candidate-countries", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and hint in err[0]
    with pytest.raises(SamplingError):
        SampleConfig(seed=0, candidate_countries=tuple(value.split(",")))
