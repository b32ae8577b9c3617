"""Our three tasks as mteb knows them, and the score keys both ways; plain data importing
nothing of ours, so the wrapper, the tasks and the results reader share it."""

from __future__ import annotations

import re
from typing import Any

HF_SUBSET, SPLIT = "default", "test"
NAMES = {"t2i": "3XCMT2I", "i2i": "3XCMI2I", "i2t": "XM3600I2TMixedPool"}
KINDS = {name: kind for kind, name in NAMES.items()}
OURS = {"t2i": "3xcm", "i2i": "3xcm-i2i", "i2t": "xm3600-i2t"}
MAIN = {"t2i": "sp", "i2i": "sp", "i2t": "dlbkl_at_10"}
CLASS_NAMES = {"XCMTextToImage": "t2i", "XCMImageToImage": "i2i", "XM3600MixedPool": "i2t"}
# BCP-47 language of data/countries.csv -> mteb's ISO 639-3 + script (Yoruba is not in XM3600)
EXTRA_LANGS = {"yo": "yor-Latn"}
DESCRIPTIONS = {
    "t2i": "3XCM association bias, text -> image: a concept in a country's native language "
           "against a semantic, a cultural and a non-relevant image; SP = M_cul / M_sem "
           "(lower is better).",
    "i2i": "3XCM association bias, image -> image: the query's anchor image against the "
           "triplet's three images; SP = M_cul / M_sem (lower is better).",
    "i2t": "XM3600 prevalence bias, image -> text over one mixed pool of the captions in 36 "
           "languages: Accuracy@k, NDCG@k, LBKL@k, DLBKL@k (main; lower is better).",
}

XCM_KEYS = {"n": "n", "wins_sem": "wins_sem", "wins_cul": "wins_cul", "wins_non": "wins_non",
            "ties": "ties", "M_sem": "m_sem", "M_cul": "m_cul", "M_non": "m_non", "SP": "sp",
            "SP_ci95_undefined_resamples": "sp_ci95_undefined_resamples", "z_sem": "z_sem",
            "z_cul": "z_cul", "z_non": "z_non"}
XCM_GROUPS = ("by_country", "by_language", "by_concept")
XM_NESTED = ("retrieved_language_counts", "pool_language_counts", "pool_tier_counts",
             "two_stage_agreement")


CI_KEYS = ("SP_ci95", "M_sem_ci95", "M_cul_ci95", "M_non_ci95")


def xcm_flat(s: dict[str, Any]) -> dict[str, Any]:
    """One group's 3XCM scores (:mod:`benchmark.metrics.association`) in mteb's key style."""
    out = {XCM_KEYS[k]: v for k, v in s.items() if k in XCM_KEYS}
    for k in CI_KEYS:
        if k in s:
            out[f"{k.lower()}_lo"], out[f"{k.lower()}_hi"] = s[k]
    out.update({f"mde_{k.lower()}": v for k, v in (s.get("mde") or {}).items()})
    out.update({k.lower(): s[k] for k in ("SP_note", "units") if k in s})
    return out


def xcm_unflat(s: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`xcm_flat`."""
    inv = {v: k for k, v in XCM_KEYS.items()}
    out = {inv[k]: v for k, v in s.items() if k in inv}
    for k in CI_KEYS:
        if f"{k.lower()}_lo" in s:
            out[k] = [s.get(f"{k.lower()}_lo"), s.get(f"{k.lower()}_hi")]
    out["SP_ci95"] = [s.get("sp_ci95_lo"), s.get("sp_ci95_hi")]
    mde = {k: s[f"mde_{k.lower()}"] for k in ("SP", "M_sem", "M_cul", "M_non")
           if f"mde_{k.lower()}" in s}
    out.update({"mde": mde} if mde else {})
    out.update({k: s[k.lower()] for k in ("SP_note", "units") if k.lower() in s})
    return out


def at_k(s: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("@", "_at_"): v for k, v in s.items()}


def from_at_k(s: dict[str, Any]) -> dict[str, Any]:
    return {re.sub(r"_at_(\d+)$", r"@\1", k): v for k, v in s.items()}


def from_mteb_scores(kind: str, scores: dict[str, Any]) -> dict[str, Any]:
    """Our results file's ``scores`` from one mteb ScoresDict of task ``kind``."""
    if kind == "i2t":
        skip = {"by_locale", "xcm3", "main_score", "hf_subset", "languages", "mteb_version",
                *XM_NESTED}
        out: dict[str, Any] = {"overall": from_at_k({k: v for k, v in scores.items()
                                                     if k not in skip})}
        out["by_locale"] = {c: from_at_k(v) for c, v in scores.get("by_locale", {}).items()}
        out.update({k: scores[k] for k in XM_NESTED if k in scores})
        return out
    out = {"overall": xcm_unflat(scores)}
    out.update({g: {k: xcm_unflat(v) for k, v in scores[g].items()}
                for g in XCM_GROUPS if g in scores})
    return out
