"""Fake but well-formed results files for report tests: real score structures computed by
the real metric functions on seeded random similarities, written with ``benchmark.results``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmark.metrics.association import association_scores, group_scores
from benchmark.models.base import ModelSpec
from benchmark.results import ResultFile, TaskInfo, model_slug, write_results
from core import datatables
from core.provenance import utcnow


def summarize(winner: np.ndarray, ties: np.ndarray, z: np.ndarray, n_resamples: int = 1000,
              seed: int = 0) -> dict:
    """``iid`` scores of one set of triplet outcomes, each triplet a unit."""
    n = len(winner)
    credit = np.eye(3)[np.asarray(winner, np.int64)] if n else np.zeros((0, 3))
    return group_scores(None, credit, ties, np.asarray(z).reshape(n, 3), np.arange(n), None,
                        "iid", n_resamples, seed)[""]


def _result(model: str, task: str, n: int, scores: dict, **task_extra: object) -> ResultFile:
    return ResultFile(date=utcnow(), model=ModelSpec(name=model, family="fake",
                                                      checkpoint=f"fake-{model}"),
                      task=TaskInfo(name=task, dataset="fake", data_fingerprint="0" * 64, n=n,
                                    **task_extra),
                      scores=scores)


def association(seed: int, per_country: int = 40, bias: float = 0.0) -> dict:
    """3xcm-like scores over all countries; ``bias`` raises the cultural similarity."""
    rng = np.random.default_rng(seed)
    codes = [c.code for c in datatables.countries()]
    country = np.repeat(codes, per_country)
    lang = np.array([datatables.country(c).language for c in country])
    sims = rng.normal(0.0, 1.0, (len(country), 3)) + np.array([0.8, bias, 0.0])
    return association_scores(sims, {"country": country, "language": lang}, n_resamples=200,
                              seed=seed)


def xm3600(seed: int, n: int = 50, ranks: int = 10) -> dict:
    rng = np.random.default_rng(seed)
    langs = list(datatables.languages())
    p = np.array([lg.cc_share for lg in langs]) + 1.0
    draws = rng.choice(len(langs), size=(n, ranks), p=p / p.sum())
    by_language = {lg.code: [int((draws[:, r] == i).sum()) for r in range(ranks)]
                   for i, lg in enumerate(langs)}
    by_tier: dict[str, list[int]] = {}
    for lg in langs:
        cur = by_tier.setdefault(lg.tier, [0] * ranks)
        by_tier[lg.tier] = [a + b for a, b in zip(cur, by_language[lg.code], strict=True)]
    overall = {"n": n}
    for k in (1, 5, 10):
        for m in ("accuracy", "ndcg", "ndcg_authors", "lbkl", "dlbkl", "missing", "lbjs", "dlbjs"):
            overall[f"{m}@{k}"] = float(rng.uniform(0.05, 0.95))
    return {"overall": overall,
            "pool_language_counts": {lg.code: 2 * (i % 3 + 1) for i, lg in enumerate(langs)},
            "pool_tier_counts": {"high": 12, "medium": 50, "low": 80},
            "retrieved_language_counts": {"ranks": ranks, "by_language": by_language,
                                          "by_tier": by_tier}}


def matrix(seed: int, per_country: int = 30) -> dict:
    rng = np.random.default_rng(seed)
    keys = ("n", "wins_sem", "wins_cul", "wins_non", "M_sem", "M_cul", "M_non", "SP", "SP_ci95")
    langs = list(dict.fromkeys(c.language for c in datatables.countries()))
    cell = {}
    for lg in langs:
        cell[lg] = {}
        for c in datatables.countries():
            w = rng.choice(3, size=per_country, p=[0.6, 0.3, 0.1])
            s = summarize(w, np.zeros(per_country, bool), np.zeros((per_country, 3)), 100, seed)
            cell[lg][c.code] = {k: s[k] for k in keys}
    summary = {c.code: {"language": c.language, "own_language": cell[c.language][c.code],
                        "english": cell["en"][c.code],
                        "difference": {"n_paired": per_country, "SP_diff": 0.1,
                                       "SP_diff_ci95": [-0.2, 0.4]}}
               for c in datatables.countries()}
    return {"matrix": cell, "summary": summary}


def write_fake_results(out: Path, models: dict[str, int], xm: bool = True,
                       with_matrix: bool = True) -> list[Path]:
    """Write 3xcm, 3xcm-i2i (and xm3600-i2t, 3xcm-matrix) results for ``models`` (name ->
    seed) under ``out``; returns the paths written."""
    paths = []
    for model, seed in models.items():
        for task, bias in (("3xcm", 0.6), ("3xcm-i2i", 0.2)):
            sc = association(seed + (0 if task == "3xcm" else 1000), bias=bias)
            paths.append(write_results(out, _result(model, task, sc["overall"]["n"], sc)))
        if xm:
            paths.append(write_results(out, _result(model, "xm3600-i2t", 50, xm3600(seed))))
        if with_matrix:
            paths.append(write_results(out, _result(model, "3xcm-matrix", 480, matrix(seed))))
    return paths


def write_outcome_run(out: Path, model: str, rates: tuple[float, float, float], seed: int,
                      per_country: int = 60, fingerprint: str = "0" * 64,
                      task: str = "3xcm") -> Path:
    """A 3xcm results file with its per-triplet outcomes sidecar (as the task writes them):
    winners drawn with ``rates`` (sem, cul, non), similarities one-hot on the winner."""
    from core import files

    rng = np.random.default_rng(seed)
    codes = [c.code for c in datatables.countries()]
    country = np.repeat(codes, per_country)
    win = rng.choice(3, size=len(country), p=list(rates))
    sims = np.eye(3)[win]
    scores = association_scores(sims, {"country": country}, n_resamples=100, seed=seed)
    folder = out / model_slug(model)
    folder.mkdir(parents=True, exist_ok=True)
    side = folder / f"{task}.outcomes.parquet"
    import pandas as pd

    pd.DataFrame({"triplet_id": [f"t{i}" for i in range(len(win))], "query_country": country,
                  "winner": win.astype(np.int8)}).to_parquet(side, index=False)
    rec = {"file": side.name, "sha256": files.sha256_file(side), "rows": len(win),
           "unit": "triplet", "id_column": "triplet_id", "group_column": "query_country"}
    r = ResultFile(date=utcnow(), model=ModelSpec(name=model, family="fake",
                                                   checkpoint=f"fake-{model}"),
                   task=TaskInfo(name=task, dataset=f"fake-{fingerprint[:4]}",
                                 data_fingerprint=fingerprint, n=len(win),
                                 query_texts={"sha256": "q" * 64}),
                   scores=scores, outcomes=rec)
    return write_results(out, r)
