"""Simulated 3XCM runs with concept effects planted, for the coverage, error-rate and power
checks of the intervals and tests (tests/benchmark/test_statistics.py; the tables of
docs/analysis.md, "Statistics", come from ``python -m tests.benchmark.coverage_sim``).

A design is countries x concepts with a number of triplets per (concept, country) cell:

- ``paper``: 16 countries, 137 concepts, 11,723 triplets; a concept is asked in each country
  with probability 0.9 (the published data: 14.5 of 16 on average), cell sizes 1 + a
  multinomial split of the rest with gamma(2) weights (mean 5.9 triplets per cell);
- ``demo``: 16 countries x 6 concepts x 12 triplets (72 per country), as the demo.

Each country has its own rates (``base``: SP spread log-evenly over 0.05..8 across countries,
or the demo's plant: SP 7 in four countries and 1 elsewhere). A concept adds a normal effect
(sd ``sigma``) to the semantic and the cultural logit, shared by all its countries, and each
cell one more (sd ``tau``): the triplets of a concept are correlated, which is what the
intervals must carry. Triplets of a cell are independent multinomial draws. The true rate of
a country is the expectation over concepts (computed once by Monte Carlo with 400,000
draws), which is what an interval over concepts claims to cover.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache

import numpy as np

from benchmark.metrics import clustered
from benchmark.metrics.association import association_scores, bootstrap_intervals

COUNTRIES = 16
LANG = np.array([0, 0, 0, 1, 2, 3, 4, 5, 5, 6, 6, 7, 8, 9, 10, 11])  # as data/countries.csv


@dataclass(frozen=True)
class Design:
    name: str
    concepts: int
    triplets: int | None  # paper: exact total; demo: None (per_cell each)
    per_cell: int = 0
    presence: float = 1.0
    sigma: float = 0.45
    tau: float = 0.3
    plant: str = "spread"  # spread | demo | null


PAPER = Design("paper", 137, 11_723, presence=0.9)
DEMO = Design("demo", 6, None, per_cell=12, plant="demo")


def base_logits(design: Design) -> np.ndarray:
    """(countries, 3) logits of sem, cul, non before concept effects."""
    if design.plant == "demo":
        planted = np.isin(np.arange(COUNTRIES), [3, 7, 12, 14])
        p = np.where(planted[:, None], [0.1, 0.7, 0.2], [1 / 3, 1 / 3, 1 / 3])
    else:
        sp = np.exp(np.linspace(np.log(0.05), np.log(8), COUNTRIES))
        if design.plant == "null":
            sp = np.full(COUNTRIES, 0.8)
        sp = sp[np.random.default_rng(7).permutation(COUNTRIES)]
        non = 0.15
        sem = (1 - non) / (1 + sp)
        p = np.column_stack([sem, sp * sem, np.full(COUNTRIES, non)])
    return np.log(p)


def probabilities(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def effects(rng: np.random.Generator, design: Design, shape: tuple[int, ...]) -> np.ndarray:
    """Logit shifts (..., 3): concept effect on sem and cul plus a cell effect."""
    c = rng.normal(0, design.sigma, (shape[0], 1, 3)) + rng.normal(0, design.tau, (*shape, 3))
    c[..., 2] = 0
    return c


@cache
def truth(design: Design, draws: int = 400_000) -> dict[str, np.ndarray]:
    """Expected (sem, cul, non) win probability per country over concepts and cells."""
    rng = np.random.default_rng(12345)
    e = effects(rng, design, (draws, 1))[:, 0]
    p = np.stack([probabilities(base_logits(design)[k] + e).mean(0) for k in range(COUNTRIES)])
    return {"country": p}


def layout(rng: np.random.Generator, design: Design) -> np.ndarray:
    """(concepts, countries) triplets per cell."""
    shape = (design.concepts, COUNTRIES)
    if design.triplets is None:
        return np.full(shape, design.per_cell)
    present = rng.random(shape) < design.presence
    present[np.arange(design.concepts), rng.integers(0, COUNTRIES, design.concepts)] = True
    cells = int(present.sum())
    w = rng.gamma(2.0, size=cells)
    sizes = 1 + rng.multinomial(design.triplets - cells, w / w.sum())
    out = np.zeros(shape, np.int64)
    out[present] = sizes
    return out


@dataclass
class Run:
    """One simulated run: per triplet its concept, country and winner; the truth per cell."""

    concept: np.ndarray
    country: np.ndarray
    winner: np.ndarray
    cell_p: np.ndarray  # (concepts, countries, 3)
    sizes: np.ndarray  # (concepts, countries)


def simulate(rng: np.random.Generator, design: Design, shift: np.ndarray | None = None) -> Run:
    """One run; ``shift`` (countries, 3) is added to the base logits (a second model)."""
    sizes = layout(rng, design)
    logits = base_logits(design)[None] + effects(rng, design, sizes.shape)
    if shift is not None:
        logits = logits + shift[None]
    p = probabilities(logits)
    counts = np.stack([rng.multinomial(n, q) for n, q in zip(sizes.ravel(), p.reshape(-1, 3),
                                                             strict=True)])
    idx = np.repeat(np.arange(sizes.size), sizes.ravel())
    winner = np.concatenate([np.repeat([0, 1, 2], c) for c in counts])
    return Run(idx // COUNTRIES, idx % COUNTRIES, winner, p, sizes)


def true_rates(run: Run, design: Design) -> dict[str, np.ndarray]:
    """(groups, 3) true win probabilities: overall (1 row), by country, by language (the
    expectation over concepts) and by concept (this run's concepts, its cell sizes)."""
    pc = truth(design)["country"]
    w = np.full(COUNTRIES, 1.0)  # every country the same expected size
    lang = np.stack([pc[LANG == g].mean(0) for g in range(LANG.max() + 1)])
    concept = (run.cell_p * run.sizes[..., None]).sum(1) / np.maximum(run.sizes.sum(1), 1)[:, None]
    return {"overall": (w @ pc / w.sum())[None], "country": pc, "language": lang,
            "concept": concept}


GROUPINGS = ("overall", "country", "language", "concept")


def group_codes(run: Run, name: str) -> tuple[np.ndarray, int]:
    if name == "overall":
        return np.zeros(len(run.winner), np.int64), 1
    if name == "country":
        return run.country, COUNTRIES
    if name == "language":
        return LANG[run.country], int(LANG.max()) + 1
    return run.concept, int(run.concept.max()) + 1


def intervals(run: Run, name: str, method: str = "cluster", level: float = 0.95,
              b: int = 1000, seed: int = 0) -> dict[str, np.ndarray]:
    """(groups,) SP limits and (groups, 3) M limits of one grouping by ``method``: cluster (the
    default), iid (the earlier percentile bootstrap), bootstrap (percentile over resampled
    concept units, for comparison)."""
    g, n_groups = group_codes(run, name)
    credit = np.eye(3)[run.winner]
    if method == "default":  # what a 3xcm result reports, through association_scores
        sc = association_scores(credit, {"grp": g, "country": run.country,
                                         "concept": run.concept})
        by = sc["overall"] if name == "overall" else None
        entries = [by] if by else [sc["by_grp"][str(k)] for k in range(n_groups)]
        none = lambda v, d: d if v is None else v  # noqa: E731
        return {"SP": np.array([[none(e["SP_ci95"][0], np.nan), none(e["SP_ci95"][1], np.inf)]
                                for e in entries]),
                "M": np.array([[e[f"{k}_ci95"] for k in ("M_sem", "M_cul", "M_non")]
                               for e in entries], float)}
    if method == "cluster":
        u = clustered.units(g, n_groups, run.concept, run.country)
        r = clustered.rates(credit, g, n_groups, u, level)
        return {"SP": np.column_stack([r["SP_lo"], r["SP_hi"]]),
                "M": np.stack([r["M_lo"], r["M_hi"]], -1), "n": r["n"]}
    sp, m = np.full((n_groups, 2), np.nan), np.full((n_groups, 3, 2), np.nan)
    rng = np.random.default_rng(seed)
    for k in range(n_groups):
        sel = g == k
        if method == "iid":
            wins = np.bincount(run.winner[sel], minlength=3)
            bi = bootstrap_intervals(wins, b, seed + k, level)
            sp[k] = [np.nan if v is None else v for v in bi["SP_ci95"]]
            m[k] = [bi[f"{x}_ci95"] for x in ("M_sem", "M_cul", "M_non")]
            continue
        unit = run.concept[sel] if name != "concept" else np.arange(sel.sum())
        _, inv = np.unique(unit, return_inverse=True)
        tot = np.stack([np.bincount(inv, credit[sel, j]) for j in range(3)], 1)
        w = rng.multinomial(len(tot), np.full(len(tot), 1 / len(tot)), size=b)
        t = w @ tot
        with np.errstate(divide="ignore", invalid="ignore"):
            s = t[:, 1] / t[:, 0]
        a = 100 * (1 - level) / 2
        s = s[np.isfinite(s)]
        sp[k] = np.percentile(s, [a, 100 - a]) if s.size else np.nan
        m[k] = np.percentile(t / t.sum(1, keepdims=True), [a, 100 - a], axis=0).T
    return {"SP": sp, "M": m}


def coverage(design: Design, reps: int, method: str = "cluster", level: float = 0.95,
             seed: int = 0, groupings: tuple[str, ...] = GROUPINGS, b: int = 1000
             ) -> dict[str, dict[str, float]]:
    """Per grouping: share of (replicate, group) intervals that cover the truth for SP and
    each M, SP's misses below/above, and the share of replicates where every country's
    interval covers (``all``)."""
    rng = np.random.default_rng(seed)
    acc: dict[str, dict[str, list[float]]] = {k: {} for k in groupings}
    for r in range(reps):
        run = simulate(rng, design)
        truth_ = true_rates(run, design)
        for name in groupings:
            iv = intervals(run, name, method, level, b, seed * 100_000 + r)
            p = truth_[name]
            sp_true = p[:, 1] / p[:, 0]
            lo, hi = iv["SP"][:, 0], np.nan_to_num(iv["SP"][:, 1], nan=np.inf)
            ok = np.isfinite(iv["SP"][:, 0])
            a = acc[name]
            a.setdefault("SP", []).extend((lo[ok] <= sp_true[ok]) & (sp_true[ok] <= hi[ok]))
            a.setdefault("SP_below", []).extend(sp_true[ok] < lo[ok])
            a.setdefault("SP_above", []).extend(sp_true[ok] > hi[ok])
            a.setdefault("all", []).append(bool(np.all((lo[ok] <= sp_true[ok])
                                                       & (sp_true[ok] <= hi[ok]))))
            for j, k in enumerate(("M_sem", "M_cul", "M_non")):
                ml, mh = iv["M"][:, j, 0], iv["M"][:, j, 1]
                a.setdefault(k, []).extend((ml <= p[:, j]) & (p[:, j] <= mh))
    return {name: {k: float(np.mean(v)) for k, v in a.items()} | {
        "count": len(a["SP"])} for name, a in acc.items()}


def width_ratio(design: Design, seed: int = 0) -> float:
    """How much wider the cluster interval of overall SP is than the iid one (one run)."""
    run = simulate(np.random.default_rng(seed), design)
    c, i = (intervals(run, "overall", m)["SP"][0] for m in ("cluster", "iid"))
    return float((c[1] - c[0]) / (i[1] - i[0]))


def _table(design: Design, reps: dict[str, int]) -> str:
    rows = ["| method | grouping (intervals) | SP | SP misses below / above | M_sem | M_cul | "
            "M_non |", "|---|---|---:|---:|---:|---:|---:|"]
    for method, n in reps.items():
        groups = GROUPINGS if method != "bootstrap" else GROUPINGS[:3]
        res = coverage(design, n, method, groupings=groups, b=500)
        for name, v in res.items():
            rows.append(f"| {method} | {name} ({v['count']}) | {v['SP']:.3f} | "
                        f"{v['SP_below']:.3f} / {v['SP_above']:.3f} | {v['M_sem']:.3f} | "
                        f"{v['M_cul']:.3f} | {v['M_non']:.3f} |")
    return "\n".join(rows)


# -- two models on the same triplets (compare) -------------------------------------------------
def simulate_pair(rng: np.random.Generator, design: Design, shift: np.ndarray | None = None,
                  model_sd: float = 0.3, rho: float = 0.5) -> tuple[Run, np.ndarray]:
    """Model A's run and model B's winners on the same triplets. Both share the concept and
    cell effects; each adds its own concept effect (sd ``model_sd``); within a triplet B
    reuses A's uniform draw with probability ``rho`` (the same triplets are hard for both).
    Without ``shift`` the two models have the same true rates everywhere (a global null)."""
    sizes = layout(rng, design)
    common = base_logits(design)[None] + effects(rng, design, sizes.shape)
    own = [rng.normal(0, model_sd, (design.concepts, 1, 3)) * [1, 1, 0] for _ in range(2)]
    pa = probabilities(common + own[0])
    pb = probabilities(common + own[1] + (0 if shift is None else shift[None]))
    idx = np.repeat(np.arange(sizes.size), sizes.ravel())
    ua = rng.random(len(idx))
    ub = np.where(rng.random(len(idx)) < rho, ua, rng.random(len(idx)))
    draw = lambda p, u: (u[:, None] > np.cumsum(p.reshape(-1, 3)[idx], 1)[:, :2]).sum(1)  # noqa: E731
    run = Run(idx // COUNTRIES, idx % COUNTRIES, draw(pa, ua), pa, sizes)
    return run, draw(pb, ub)


def family_error(design: Design, reps: int, seed: int = 0, alpha: float = 0.05
                 ) -> dict[str, float]:
    """Under a global null: the share of replicates with any Holm-adjusted p < alpha over the
    rows ``compare`` shows (overall and each country x SP, M_sem, M_cul, M_non), and the
    share of rows with an unadjusted p < alpha."""
    from benchmark.metrics.significance import KEYS, holm, paired_association

    rng = np.random.default_rng(seed)
    any_adj, raw, rows = 0, 0, 0
    for _ in range(reps):
        run, wb = simulate_pair(rng, design)
        r = paired_association(run.winner, wb, run.country, run.concept, run.country)
        ps = [s[k]["p"] for s in [r["overall"], *r["by_group"].values()] for k in KEYS]
        adj = holm(ps)
        any_adj += any(p is not None and p < alpha for p in adj)
        raw += sum(p is not None and p < alpha for p in ps)
        rows += sum(p is not None for p in ps)
    return {"fwer": any_adj / reps, "row_rate": raw / max(rows, 1), "rows": rows / reps}


def pair_truth(design: Design, shift: np.ndarray | None, model_sd: float = 0.3,
               draws: int = 200_000) -> np.ndarray:
    """(3,) true overall (sem, cul, non) rates of a model of :func:`simulate_pair`."""
    rng = np.random.default_rng(999)
    e = effects(rng, design, (draws, 1))[:, 0] + rng.normal(0, model_sd, (draws, 3)) * [1, 1, 0]
    lg = base_logits(design) + (0 if shift is None else shift)
    return np.mean([probabilities(lg[k] + e).mean(0) for k in range(COUNTRIES)], 0)


def _sp(p: np.ndarray) -> float:
    return float(p[1] / p[0])


def single_power(design: Design, reps: int, seed: int = 0) -> dict[str, float]:
    """Mean detectable difference of overall SP and M_cul of one run, and how often the
    t test rejects a reference that far from the truth (should be about 0.8)."""
    from benchmark.metrics import clustered

    rng = np.random.default_rng(seed)
    truth_ = true_rates(simulate(rng, design), design)["overall"][0]
    rows = []
    for _ in range(reps):
        run = simulate(rng, design)
        g = np.zeros(len(run.winner), np.int64)
        r = clustered.rates(np.eye(3)[run.winner], g, 1, clustered.units(g, 1, run.concept))
        rows.append((r["SP"][0], r["se_SP"][0], r["mde_SP"][0], r["M"][0, 1], r["se_M"][0, 1],
                     r["mde_M"][0, 1], r["df"][0]))
    a = np.array(rows)
    crit = clustered.t_quantile(a[:, 6], 0.975)
    out = {}
    for name, (v, se, mde), t in (("SP", a[:, :3].T, _sp(truth_)), ("M_cul", a[:, 3:6].T, truth_[1])):
        m = float(mde.mean())
        out[f"mde_{name}"] = m
        out[f"power_{name}"] = float(np.mean(np.abs(v - (t - m)) / se > crit))
    return out


def paired_power(design: Design, reps: int, seed: int = 0, model_sd: float = 0.3
                 ) -> dict[str, float]:
    """Mean detectable ΔSP and ΔM_cul of a paired comparison (overall) under the null, and
    the power of the paired test when B's true SP and M_cul are that far from A's."""
    from benchmark.metrics.significance import paired_association

    rng = np.random.default_rng(seed)
    mdes = {"SP": [], "M_cul": []}
    for _ in range(max(reps // 4, 20)):
        run, wb = simulate_pair(rng, design, model_sd=model_sd)
        o = paired_association(run.winner, wb, None, run.concept, run.country)["overall"]
        for k in mdes:
            mdes[k].append(o[k]["mde"])
    base = pair_truth(design, None, model_sd)
    out: dict[str, float] = {}
    for k, f in (("SP", _sp), ("M_cul", lambda p: float(p[1]))):
        m = float(np.mean(mdes[k]))
        lo, hi = 0.0, 3.0  # shift of B's cultural logit so that B - A is m
        for _ in range(40):
            mid = (lo + hi) / 2
            d = f(pair_truth(design, np.array([0, mid, 0]), model_sd)) - f(base)
            lo, hi = (mid, hi) if d < m else (lo, mid)
        shift = np.array([0, (lo + hi) / 2, 0])
        hits = 0
        for _ in range(reps):
            run, wb = simulate_pair(rng, design, shift, model_sd)
            o = paired_association(run.winner, wb, None, run.concept, run.country)["overall"]
            hits += o[k]["p"] is not None and o[k]["p"] < 0.05
        out[f"mde_{k}"], out[f"power_{k}"] = m, hits / reps
    return out


def at_least(share: float, reps: int, level: float, alpha: float = 0.001) -> bool:
    """Is an observed coverage (or power) ``share`` of ``reps`` consistent with at least
    ``level``? (one-sided binomial test at ``alpha``: False only when clearly below)."""
    from scipy import stats

    return bool(stats.binom.cdf(round(share * reps), reps, level) > alpha)


def at_most(share: float, reps: int, level: float, alpha: float = 0.001) -> bool:
    """Is an observed error rate ``share`` of ``reps`` consistent with at most ``level``?"""
    from scipy import stats

    return bool(stats.binom.sf(round(share * reps) - 1, reps, level) > alpha)


def main(scale: float = 1.0) -> None:
    """The tables of docs/analysis.md, "Statistics" (``scale`` shrinks every count)."""
    def n(x: int) -> int:
        return max(int(x * scale), 10)

    for d, reps in ((PAPER, {"cluster": n(500), "iid": n(200), "bootstrap": n(200)}),
                    (DEMO, {"cluster": n(1000), "iid": n(500), "bootstrap": n(500)})):
        print(f"\n## {d.name}: coverage of 95% intervals; cluster / iid width of overall SP "
              f"{width_ratio(d):.2f}\n")
        print(_table(d, reps), flush=True)
    print("\n## compare under a global null (Holm over 68 rows)\n")
    for d, r in ((PAPER, n(1500)), (DEMO, n(1000))):
        print(d.name, r, family_error(d, r, seed=11), flush=True)
    print("\n## power at the stated detectable difference\n")
    for d, r in ((PAPER, n(1000)), (DEMO, n(500))):
        print(d.name, "single", single_power(d, r, seed=1), flush=True)
        print(d.name, "paired", paired_power(d, max(r // 2, 10), seed=1), flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
