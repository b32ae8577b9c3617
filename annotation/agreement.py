"""Decisions and agreement over the annotators' answers: pure functions on plain data.

An undefined statistic (one value everywhere, no units) is ``None``, never NaN (strict JSON).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

KEEP = "keep"
REMOVE = "remove"
NEEDS_REVIEW = "needs_review"


@dataclass(frozen=True)
class Decision:
    """The outcome for one image: ``keep``, ``remove`` or ``needs_review`` and why."""

    outcome: str
    n_keep: int
    n_remove: int
    reason: str


def majority(n_keep: int, n_remove: int, required: int) -> Decision:
    """Strict majority of the votes; fewer than ``required`` or a tie: ``needs_review``."""
    n = n_keep + n_remove
    tally = f"keep {n_keep}, remove {n_remove}"
    if n < required:
        return Decision(NEEDS_REVIEW, n_keep, n_remove, f"{n}/{required} annotators ({tally})")
    if n_keep == n_remove:
        return Decision(NEEDS_REVIEW, n_keep, n_remove, f"tie ({tally})")
    outcome = KEEP if n_keep > n_remove else REMOVE
    return Decision(outcome, n_keep, n_remove, f"majority of {n} ({tally})")


def krippendorff_alpha(
    ratings: Mapping[str, Mapping[str, str]], categories: Sequence[str] | None = None
) -> float | None:
    """Nominal Krippendorff's alpha of ``{coder: {unit: category}}``, or ``None`` if undefined."""
    import krippendorff
    import numpy as np

    coders = sorted(ratings)
    units = sorted({u for r in ratings.values() for u in r})
    cats = list(categories) if categories else sorted({c for r in ratings.values() for c in r.values()})
    code = {c: float(i) for i, c in enumerate(cats)}
    data = np.full((len(coders), len(units)), np.nan)
    col = {u: j for j, u in enumerate(units)}
    for i, coder in enumerate(coders):
        for unit, cat in ratings[coder].items():
            data[i, col[unit]] = code[cat]
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    data = data[:, pairable]
    if data.shape[1] == 0 or len(set(data[~np.isnan(data)].tolist())) < 2:
        return None
    value = float(
        krippendorff.alpha(
            reliability_data=data,
            level_of_measurement="nominal",
            value_domain=[code[c] for c in cats],
        )
    )
    return None if math.isnan(value) else value


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' (1971) kappa of a units x categories table of counts, the same number (>= 2) of
    ratings per unit (else ``ValueError``); ``None`` when undefined (no units, ``P_e == 1``)."""
    if not counts:
        return None
    totals = {sum(row) for row in counts}
    if len(totals) != 1:
        raise ValueError(f"Fleiss' kappa needs the same number of ratings per unit, got {totals}")
    n = totals.pop()
    if n < 2:
        raise ValueError("Fleiss' kappa needs at least two ratings per unit")
    n_units = len(counts)
    k = len(counts[0])
    p_i = [(sum(c * c for c in row) - n) / (n * (n - 1)) for row in counts]
    p_bar = sum(p_i) / n_units
    p_j = [sum(row[j] for row in counts) / (n_units * n) for j in range(k)]
    p_e = sum(p * p for p in p_j)
    if math.isclose(p_e, 1.0):
        return None
    return (p_bar - p_e) / (1 - p_e)


def agreement(
    votes: Mapping[str, Mapping[str, str]], n_raters: int, categories: Sequence[str]
) -> dict[str, object]:
    """Alpha and kappa of ``{unit: {annotator: category}}`` over the units with exactly
    ``n_raters`` votes, so both describe the same set."""
    full = {u: v for u, v in votes.items() if len(v) == n_raters}
    by_coder: dict[str, dict[str, str]] = {}
    for unit, answers in full.items():
        for coder, cat in answers.items():
            by_coder.setdefault(coder, {})[unit] = cat
    table = [[Counter(answers.values())[c] for c in categories] for answers in full.values()]
    kappa = fleiss_kappa(table) if n_raters >= 2 else None
    alpha = krippendorff_alpha(by_coder, categories) if by_coder else None
    return {
        "n_units": len(full),
        "n_raters": n_raters,
        "krippendorff_alpha": alpha,
        "fleiss_kappa": kappa,
    }


def tag_precision_recall(
    predicted: Mapping[str, Iterable[str]], reference: Mapping[str, Iterable[str]]
) -> dict[str, object]:
    """Micro precision / recall / F1 of concept sets over ``reference``, and exact matches."""
    tp = n_pred = n_ref = exact = 0
    for unit, ref in reference.items():
        r, p = set(ref), set(predicted.get(unit, ()))
        tp += len(p & r)
        n_pred += len(p)
        n_ref += len(r)
        exact += p == r
    precision = tp / n_pred if n_pred else None
    recall = tp / n_ref if n_ref else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall > 0
        else None
    )
    n = len(reference)
    return {
        "n_units": n,
        "true_positives": tp,
        "n_predicted": n_pred,
        "n_reference": n_ref,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "exact_match": exact / n if n else None,
    }
