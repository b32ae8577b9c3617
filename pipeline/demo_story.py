"""What the demo planted and what the evaluator found: per-country verdicts and one paragraph.
Each verdict rests on an interval of SP (``M_cul / M_sem``) from the result's multinomial
bootstrap at the family-wise level (Bonferroni over the countries judged), so that all the
verdicts together hold with 95% confidence."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.metrics.association import group_seed, sp_bootstrap

log = logging.getLogger(__name__)

FAMILY_ALPHA = 0.05
RESAMPLES = 20_000  # enough for the 0.16% tails of the family-wise interval


@dataclass(frozen=True)
class Verdict:
    """One country: its SP, its intervals, and whether the finding matches the plant."""

    country: str
    planted: bool
    n: int
    sp: float | None
    ci95: tuple[float | None, float | None]
    ci_family: tuple[float | None, float | None]

    @property
    def found(self) -> bool:
        """SP above 1 with the family-wise interval above 1."""
        return self.ci_family[0] is not None and self.ci_family[0] > 1

    @property
    def clear(self) -> bool:
        """No association: the family-wise interval contains 1 (or is unbounded above)."""
        lo, hi = self.ci_family
        return lo is not None and lo <= 1 and (hi is None or hi >= 1)

    @property
    def as_planted(self) -> bool:
        return self.found if self.planted else self.clear


def verdicts(scores: dict[str, Any], planted: set[str], seed: int = 0,
             resamples: int = RESAMPLES) -> list[Verdict]:
    """A verdict per country of the result's ``scores['by_country']``."""
    by = scores["by_country"]
    level = 1 - FAMILY_ALPHA / len(by)
    out = []
    for code in sorted(by):
        s = by[code]
        wins = np.array([s["wins_sem"], s["wins_cul"], s["wins_non"]], dtype=np.int64)
        lo, hi, _ = sp_bootstrap(wins, resamples, group_seed(seed, f"family:{code}"), level)
        out.append(Verdict(code, code in planted, int(s["n"]), s["SP"],
                           tuple(s["SP_ci95"]), (lo, hi)))
    return out


def _fmt(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.2f}"


def _ci(ci: tuple[float | None, float | None]) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def paragraph(vs: list[Verdict], association: dict[str, Any], n_triplets: int) -> str:
    """The demo's closing paragraph: what was planted, what was found, and whether they agree."""
    planted = [v for v in vs if v.planted]
    others = [v for v in vs if not v.planted]
    level = 1 - FAMILY_ALPHA / len(vs)
    marks = ", ".join(f"{k} {a['marked_images']} of {a['images']}" for k, a in
                      sorted(association.items()))
    found = ", ".join(f"{v.country} {_fmt(v.sp)} (95% {_ci(v.ci95)}; family-wise "
                      f"{_ci(v.ci_family)})" for v in planted)
    sps = [v.sp for v in others if v.sp is not None]
    per95 = sum(1 for v in others if v.ci95[0] is not None and v.ci95[0] <= 1
                and (v.ci95[1] is None or v.ci95[1] >= 1))
    ok_p = sum(v.found for v in planted)
    ok_o = sum(v.clear for v in others)
    agree = ok_p == len(planted) and ok_o == len(others)
    return (
        f"What was planted: no image of the world shows its concept (noise and random shapes), "
        f"so no model can tell a semantic image from the others by its content. In "
        f"{', '.join(v.country for v in planted)} a share of the images carries the country's "
        f"coloured border (release images with it: {marks}), and the model's training corpus "
        f"(other draws of the same world, never the release's images) pairs those countries' "
        f"native terms with such images; nothing else co-occurs with anything. The semantic and "
        f"non-relevant candidates of every triplet come from the {len(others)} countries without "
        f"a mark (triplets sample --candidate-countries), so only the cultural image can carry "
        f"one. What was found over {n_triplets} triplets: SP (cultural wins / semantic wins; 1 = "
        f"no preference) is {found}: {ok_p} of {len(planted)} planted countries above 1 at the "
        f"family-wise level ({level:.2%} per country, Bonferroni over {len(vs)}, so that all "
        f"the verdicts hold together at 95%). The other {len(others)} countries score "
        f"{_fmt(min(sps) if sps else None)} to {_fmt(max(sps) if sps else None)}; {ok_o} of "
        f"{len(others)} family-wise intervals contain 1 ({per95} of their per-country 95% "
        f"intervals do; at that level about one in twenty misses 1 by chance). "
        + ("The evaluator found the association where it was planted and nowhere else."
           if agree else "The finding does NOT match the plant: see the table above.")
    )
