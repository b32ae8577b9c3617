"""Prevalence-bias metrics of image -> text retrieval over a mixed-language caption pool.

Pure functions on the top-k lists of a retrieval run, per query (callers average): ``rel``
(n, K) bool relevance by rank, ``n_relevant`` (n,) captions per query image, ``groups`` (n, K)
language group by rank. Definitions: docs/xm3600.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EPSILON = 1e-9
METRICS = ("accuracy", "ndcg", "ndcg_authors", "lbkl", "dlbkl", "missing", "lbjs", "dlbjs")
GROUPINGS = ("authors", "tier", "language")
TIERS = ("high", "medium", "low")


def rank_weights(k: int) -> np.ndarray:
    """``w_i = 1 / log2(i + 1)`` for ranks i = 1..k (float64)."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def _check_k(a: np.ndarray, k: int) -> None:
    if not 1 <= k <= a.shape[1]:
        raise ValueError(f"k={k} outside 1..{a.shape[1]} (the retrieved list length)")


def accuracy_at_k(rel: np.ndarray, k: int) -> np.ndarray:
    """(n,) 1.0 where one of the first k retrieved captions is relevant, else 0.0."""
    rel = np.asarray(rel, bool)
    _check_k(rel, k)
    return rel[:, :k].any(axis=1).astype(np.float64)


def dcg_at_k(rel: np.ndarray, k: int) -> np.ndarray:
    """(n,) ``sum_{i<=k} rel_i / log2(i+1)`` with binary relevance."""
    rel = np.asarray(rel, bool)
    _check_k(rel, k)
    return rel[:, :k].astype(np.float64) @ rank_weights(k)


def _ideal(m: np.ndarray, k: int) -> np.ndarray:
    """IDCG for m relevant items put first (m clipped to k)."""
    cum = np.concatenate([[0.0], np.cumsum(rank_weights(k))])
    return cum[np.clip(np.asarray(m, np.int64), 0, k)]


def ndcg_at_k(rel: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """(n,) NDCG@k, ideal DCG from the true number of relevant captions (0 if none found)."""
    dcg = dcg_at_k(rel, k)
    idcg = _ideal(n_relevant, k)
    out = np.zeros_like(dcg)
    np.divide(dcg, idcg, out=out, where=(dcg > 0) & (idcg > 0))
    return out


def ndcg_authors_at_k(rel: np.ndarray, k: int) -> np.ndarray:
    """(n,) NDCG@k, ideal from the whole retrieved list ``rel`` sorted and cut at k (the paper's)."""
    dcg = dcg_at_k(rel, k)
    idcg = _ideal(np.asarray(rel, bool).sum(axis=1), k)
    out = np.zeros_like(dcg)
    np.divide(dcg, idcg, out=out, where=idcg > 0)
    return out


def group_shares(groups: np.ndarray, n_groups: int, k: int, weighted: bool = False) -> np.ndarray:
    """(n, G) share of each group among the first k (rank-weighted by 1/log2(i+1) if asked)."""
    groups = np.asarray(groups, np.int64)
    _check_k(groups, k)
    n = groups.shape[0]
    w = rank_weights(k) if weighted else np.ones(k)
    flat = (np.arange(n)[:, None] * n_groups + groups[:, :k]).ravel()
    counts = np.bincount(flat, weights=np.broadcast_to(w, (n, k)).ravel(),
                         minlength=n * n_groups)
    return counts.reshape(n, n_groups) / w.sum()


def kl_divergence(p: np.ndarray, q: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """(n,) ``sum_g p_g ln(p_g / q_g)``; q_g = 0 -> epsilon; p_g = 0 terms are 0; p (G,) or (n, G)."""
    q = np.asarray(q, np.float64)
    p = np.broadcast_to(np.asarray(p, np.float64), q.shape)
    q = np.where(q == 0.0, epsilon, q)
    terms = np.zeros_like(q)
    pos = p > 0
    terms[pos] = p[pos] * np.log(p[pos] / q[pos])
    return terms.sum(axis=1)


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(n,) Jensen-Shannon divergence (natural log) of each row of ``q`` from ``p``."""
    q = np.asarray(q, np.float64)
    p = np.broadcast_to(np.asarray(p, np.float64), q.shape)
    m = (p + q) / 2
    return (kl_divergence(p, m, 1.0) + kl_divergence(q, m, 1.0)) / 2  # m > 0 where p or q is


def missing_at_k(groups: np.ndarray, target: np.ndarray, n_groups: int, k: int) -> np.ndarray:
    """(n,) 1.0 where a group with a positive target share has no caption among the first k."""
    shares = group_shares(groups, n_groups, k)
    p = np.broadcast_to(np.asarray(target, np.float64), shares.shape)
    return ((p > 0) & (shares == 0)).any(axis=1).astype(np.float64)


def lbkl_at_k(groups: np.ndarray, target: np.ndarray, n_groups: int, k: int,
              epsilon: float = EPSILON) -> np.ndarray:
    """(n,) language-bias KL of the first k against ``target``."""
    return kl_divergence(target, group_shares(groups, n_groups, k), epsilon)


def dlbkl_at_k(groups: np.ndarray, target: np.ndarray, n_groups: int, k: int,
               epsilon: float = EPSILON) -> np.ndarray:
    """(n,) discounted language-bias KL: rank i weighted by 1/log2(i+1)."""
    return kl_divergence(target, group_shares(groups, n_groups, k, weighted=True), epsilon)


def rank_counts(groups: np.ndarray, n_groups: int) -> np.ndarray:
    """(K, G) int: ``c[i, g]`` = how many queries have a group-g item at rank i+1."""
    groups = np.asarray(groups, np.int64)
    n, k = groups.shape
    flat = (np.arange(k)[None, :] * n_groups + groups).ravel()
    return np.bincount(flat, minlength=k * n_groups).reshape(k, n_groups)


def per_query_scores(
    rel: np.ndarray, n_relevant: np.ndarray, groups: np.ndarray, target: np.ndarray,
    n_groups: int, ks: Sequence[int], epsilon: float = EPSILON,
) -> dict[str, np.ndarray]:
    """``{"<metric>@k": (n,)}`` for every metric and k, from the whole retrieved lists."""
    out: dict[str, np.ndarray] = {}
    for k in ks:
        out[f"accuracy@{k}"] = accuracy_at_k(rel, k)
        out[f"ndcg@{k}"] = ndcg_at_k(rel, n_relevant, k)
        out[f"ndcg_authors@{k}"] = ndcg_authors_at_k(rel, k)
        out[f"lbkl@{k}"] = lbkl_at_k(groups, target, n_groups, k, epsilon)
        out[f"dlbkl@{k}"] = dlbkl_at_k(groups, target, n_groups, k, epsilon)
        out[f"missing@{k}"] = missing_at_k(groups, target, n_groups, k)
        out[f"lbjs@{k}"] = js_divergence(target, group_shares(groups, n_groups, k))
        out[f"dlbjs@{k}"] = js_divergence(target, group_shares(groups, n_groups, k, True))
    return out


def mean_scores(per_query: dict[str, np.ndarray], mask: np.ndarray | None = None) -> dict[str, float]:
    """Means over queries (or over the queries selected by ``mask``), plus ``n``."""
    out: dict[str, float] = {}
    for name, v in per_query.items():
        sel = v if mask is None else v[mask]
        out.setdefault("n", int(sel.shape[0]))
        out[name] = float(sel.mean()) if sel.size else float("nan")
    return out


@dataclass(frozen=True)
class Grouping:
    """How languages fall into groups; ``fixed_target`` None: each image's caption shares."""

    name: str
    names: tuple[str, ...]
    group_of: dict[str, int]  # language code -> group index
    fixed_target: tuple[float, ...] | None

    @property
    def n_groups(self) -> int:
        return len(self.names)

    def describe_target(self) -> dict[str, float] | str:
        if self.fixed_target is None:
            return "shares of the query image's captions per group"
        return dict(zip(self.names, self.fixed_target, strict=True))


def make_grouping(name: str, languages: Sequence[tuple[str, str]]) -> Grouping:
    """The grouping ``name`` (docs/xm3600.md, "Groupings") over [(code, tier), ...]."""
    if name == "authors":
        return Grouping(name, ("low", "high_medium"),
                        {c: 0 if t == "low" else 1 for c, t in languages}, (0.5, 0.5))
    if name == "tier":
        bad = sorted({t for _, t in languages} - set(TIERS))
        if bad:
            raise ValueError(f"unknown tier(s) {bad}; expected {TIERS}")
        return Grouping(name, TIERS, {c: TIERS.index(t) for c, t in languages}, None)
    if name == "language":
        codes = tuple(c for c, _ in languages)
        return Grouping(name, codes, {c: i for i, c in enumerate(codes)}, None)
    raise ValueError(f"unknown grouping {name!r}; choose one of {GROUPINGS}")


def caption_share_targets(
    caption_owner: np.ndarray, caption_group: np.ndarray, n_images: int, n_groups: int,
) -> np.ndarray:
    """(n_images, G): each image's share of captions per group (rows of zeros if none)."""
    flat = np.asarray(caption_owner, np.int64) * n_groups + np.asarray(caption_group, np.int64)
    counts = np.bincount(flat, minlength=n_images * n_groups).reshape(n_images, n_groups)
    tot = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, tot, out=np.zeros(counts.shape), where=tot > 0)
