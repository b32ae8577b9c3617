"""The intervals and tests hold their error rates, by simulation with concept effects planted
(tests/benchmark/coverage_sim.py): at the paper's size (11,723 triplets, 137 concepts, 16
countries) and the demo's (72 triplets per country over 6 concepts).

- the default 95% intervals of SP and each win rate, overall and by country, language and
  concept, cover their truth at least 95% of the time, and miss on both sides alike;
- the earlier triplet bootstrap (``--ci iid``) does not: the defect these replace;
- ``compare``'s stars (Holm over its 68 rows) keep the family-wise error at 5% under a
  global null, where unadjusted stars would not;
- the stated detectable differences are detected about 80% of the time.

Each check runs here at a size CI affords; the ``slow`` versions (``pytest -m slow``) are the
full simulations behind the tables of docs/analysis.md, "Statistics"."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.metrics.significance import KEYS, paired_association
from benchmark.report import compare
from tests.benchmark import coverage_sim as cs


def _check_coverage(res: dict, reps: int) -> None:
    for name, v in res.items():
        for k in ("SP", "M_sem", "M_cul", "M_non"):
            assert cs.at_least(v[k], reps, 0.95), (name, k, v)
        assert cs.at_most(v["SP_below"], reps, 0.025), (name, v)
        assert cs.at_most(v["SP_above"], reps, 0.025), (name, v)


@pytest.mark.parametrize("design,reps", [(cs.PAPER, 40), (cs.DEMO, 150)],
                         ids=["paper", "demo"])
def test_default_intervals_hold_their_level(design, reps):
    _check_coverage(cs.coverage(design, reps, "default"), reps)


def test_triplet_bootstrap_undercovers_when_concepts_are_shared():
    """The earlier interval (kept as --ci iid) treats the triplets as independent: with the
    concepts' effects it covers the overall SP far less than 95% of the time, 2.5 times
    narrower than the interval over concepts."""
    reps = 60
    res = cs.coverage(cs.PAPER, reps, "iid", groupings=("overall",), b=300)["overall"]
    assert not cs.at_least(res["SP"], reps, 0.95) and res["SP"] < 0.8
    assert 2.0 < cs.width_ratio(cs.PAPER) < 3.2


def _stars(design: cs.Design, reps: int, seed: int = 0) -> tuple[float, float]:
    """Under a global null, through compare's own adjustment: the share of runs with any
    star, and with any unadjusted p < 0.05 (what a star meant before)."""
    rng = np.random.default_rng(seed)
    starred = raw = 0
    for _ in range(reps):
        run, wb = cs.simulate_pair(rng, design)
        res = paired_association(run.winner, wb, run.country, run.concept, run.country)
        c = {"task": "3xcm", "overall": res["overall"], "by_country": res["by_group"]}
        compare.adjust(c, 0.05)
        rows = compare.rows(c)
        assert len(rows) == 4 * (1 + cs.COUNTRIES) and "68 rows" in c["family"]
        starred += any(d["significant"] for *_, d in rows)
        raw += any(d["p"] is not None and d["p"] < 0.05 for *_, d in rows)
    return starred / reps, raw / reps


@pytest.mark.parametrize("design,reps", [(cs.PAPER, 150), (cs.DEMO, 300)],
                         ids=["paper", "demo"])
def test_compare_family_wise_error_under_a_global_null(design, reps):
    fwer, raw = _stars(design, reps)
    assert cs.at_most(fwer, reps, 0.05), fwer
    assert raw > 0.5  # unadjusted, some row of 68 is "significant" in most null runs


def test_detectable_differences_have_their_power():
    reps = 200
    res = cs.single_power(cs.PAPER, reps)
    for k in ("SP", "M_cul"):
        assert 0.7 <= res[f"power_{k}"] <= 0.9, res


def test_row_p_values_are_uniform_under_the_null():
    """Per row (SP, M_sem, M_cul, M_non, overall and by country) an unadjusted p < 0.05 in
    about 5% of null runs: the test itself is calibrated, not only after Holm."""
    rng = np.random.default_rng(3)
    hits = {k: 0 for k in KEYS}
    reps = 60
    for _ in range(reps):
        run, wb = cs.simulate_pair(rng, cs.PAPER)
        r = paired_association(run.winner, wb, run.country, run.concept, run.country)
        for s in [r["overall"], *r["by_group"].values()]:
            for k in KEYS:
                hits[k] += s[k]["p"] < 0.05
    for k, h in hits.items():
        rate = h / (reps * (1 + cs.COUNTRIES))
        assert 0.02 <= rate <= 0.08, (k, rate)


# -- the full simulations (docs/analysis.md, "Statistics") --------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("design,reps", [(cs.PAPER, 300), (cs.DEMO, 1000)],
                         ids=["paper", "demo"])
def test_default_intervals_full_simulation(design, reps):
    res = cs.coverage(design, reps, "cluster")
    _check_coverage(res, reps)
    if design is cs.PAPER:  # the countries are fixed: overall and per country not too wide
        assert res["overall"]["SP"] < 0.985 and res["country"]["SP"] < 0.975, res


@pytest.mark.slow
@pytest.mark.parametrize("design,reps", [(cs.PAPER, 1000), (cs.DEMO, 1000)],
                         ids=["paper", "demo"])
def test_compare_family_wise_error_full_simulation(design, reps):
    fwer, _ = _stars(design, reps, seed=1)
    assert cs.at_most(fwer, reps, 0.05), fwer


@pytest.mark.slow
def test_power_full_simulation():
    single = cs.single_power(cs.PAPER, 1000, seed=1)
    paired = cs.paired_power(cs.PAPER, 400, seed=1)
    for res in (single, paired):
        for k in ("SP", "M_cul"):
            assert 0.7 <= res[f"power_{k}"] <= 0.9, res
