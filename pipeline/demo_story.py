"""What the demo planted and what the evaluator found: per-country verdicts and one paragraph.

Each verdict rests on the exact (Clopper-Pearson) interval of SP conditional on the country's
semantic + cultural wins, Bonferroni over the countries judged, so all verdicts hold together
with at least 95% confidence; they speak of the demo's 6 concepts only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.metrics.association import sp_interval, sp_value
from benchmark.metrics.clustered import clopper_pearson

log = logging.getLogger(__name__)

FAMILY_ALPHA = 0.05


@dataclass(frozen=True)
class Verdict:
    """One country: its SP, its intervals, and whether the finding matches the plant."""

    country: str
    planted: bool
    n: int
    sp: float | None
    ci95: tuple[float | None, float | None]  # the result's, over concepts
    ci_family: tuple[float | None, float | None]  # exact on these concepts, family-wise

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


def exact_sp_interval(sem: float, cul: float, level: float) -> tuple[float | None, float | None]:
    """Clopper-Pearson limits of SP given sem + cul (None, None without either; upper None: ∞)."""
    lo, hi = clopper_pearson(np.array(cul, float), np.array(sem + cul, float), level)
    if not np.isfinite(lo):
        return None, None
    return float(lo / (1 - lo)), (None if hi >= 1 else float(hi / (1 - hi)))


def verdicts(scores: dict[str, Any], planted: set[str]) -> list[Verdict]:
    """A verdict per country of the result's ``scores['by_country']``."""
    by = scores["by_country"]
    level = 1 - FAMILY_ALPHA / len(by)
    return [Verdict(code, code in planted, int(s["n"]), sp_value(s), tuple(s["SP_ci95"]),
                    exact_sp_interval(s["wins_sem"], s["wins_cul"], level))
            for code, s in sorted(by.items())]


def _fmt(x: float | None) -> str:
    if x is None:
        return "undefined"
    return "∞" if x == float("inf") else f"{x:.2f}"


def _ci(ci: tuple[float | None, float | None]) -> str:
    lo, hi = sp_interval({"SP_ci95": list(ci)})
    return f"[{_fmt(lo)}, {_fmt(hi)}]"


def paragraph(vs: list[Verdict], association: dict[str, Any], n_triplets: int,
              concepts: int | None = None) -> str:
    """The demo's closing paragraph: what was planted, what was found, whether they agree."""
    planted = [v for v in vs if v.planted]
    others = [v for v in vs if not v.planted]
    level = 1 - FAMILY_ALPHA / len(vs)
    marks = ", ".join(f"{k} {a['marked_images']} of {a['images']}" for k, a in
                      sorted(association.items()))
    found = ", ".join(f"{v.country} {_fmt(v.sp)} (family-wise {_ci(v.ci_family)}; over "
                      f"concepts, 95% {_ci(v.ci95)})" for v in planted)
    sps = [v.sp for v in others if v.sp is not None]
    above95 = sum(1 for v in planted if v.ci95[0] is not None and v.ci95[0] > 1)
    ok_p = sum(v.found for v in planted)
    ok_o = sum(v.clear for v in others)
    agree = ok_p == len(planted) and ok_o == len(others)
    few = f"{concepts} concepts" if concepts else "its few concepts"
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
        f"family-wise level (exact intervals given each country's semantic and cultural wins, "
        f"{level:.2%} each, Bonferroni over {len(vs)}, so that all the verdicts hold together "
        f"at 95%). The other {len(others)} countries score {_fmt(min(sps) if sps else None)} "
        f"to {_fmt(max(sps) if sps else None)}; {ok_o} of {len(others)} family-wise intervals "
        f"contain 1. These verdicts are about the model on the demo's {few}; the result's "
        f"own intervals, over concepts (what would generalise to other concepts), rest on "
        f"only those and put {above95} of {len(planted)} planted countries above 1 at 95% "
        f"each, which is not a joint claim. "
        + ("On these concepts the evaluator found the association where it was planted and "
           "nowhere else." if agree else
           "The finding does NOT match the plant: see the table above.")
    )
