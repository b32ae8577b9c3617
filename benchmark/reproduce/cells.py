"""Cells of the paper comparison: our value, the published one, their difference, a tolerance
(checked on our value rounded as the paper printed; a value we lack is missing, never 0)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

EPS = 1e-9  # float noise in the rounded comparison (values are printed with <= 4 decimals)


@dataclass(frozen=True)
class Tolerance:
    """``abs``: |ours - paper| <= value; ``rel``: <= value * |paper|; ``exact``: equal."""

    kind: str
    value: float
    why: str
    unit: str = ""

    def label(self) -> str:
        if self.kind == "exact":
            return "exact"
        if self.kind == "rel":
            return f"±{self.value * 100:g}% relative"
        return f"±{self.value:g}" + (f" {self.unit}" if self.unit else "")

    def within(self, ours: float, paper: float, decimals: int | None = None) -> bool:
        o = round(ours, decimals) if decimals is not None else ours
        d = abs(o - paper)
        if self.kind == "exact":
            return d == 0
        bound = self.value * abs(paper) if self.kind == "rel" else self.value
        return d <= bound + EPS


TOLERANCES: dict[str, Tolerance] = {
    "win_rate_pct": Tolerance(
        "abs", 1.0,
        "±1 percentage point on the paper's % columns, i.e. ±0.01 as a fraction (the issue's "
        "tolerance for win rates). One triplet is 0.009 points of 11,723 and ~0.15 points of a "
        "country's ~650: 1 point leaves room for a few near-ties that fp16/bf16 arithmetic "
        "flips, while a wrong prompt or preprocessing moves win rates by several points.",
        unit="pp"),
    "win_rate": Tolerance(
        "abs", 0.01,
        "±0.01 (win rates as fractions; the issue's tolerance): see the % columns above."),
    "sp": Tolerance(
        "abs", 0.01,
        "±0.01 (the issue's tolerance; the paper prints SP with 2 decimals). Where a group's SP "
        "is large (CLIP-L/14 in India: 15.88 from ~43 semantic wins) one triplet moves SP by "
        "far more than 0.01, so such a cell passes only when the win counts agree: read it with "
        "the win rates of the same group."),
    "kl": Tolerance(
        "rel", 0.02,
        "±2% relative (the issue's tolerance): LBKL/DLBKL span 0.02 to 7 across models and "
        "cut-offs, so no absolute bound fits both ends; a query whose top k misses a group "
        "entirely contributes ~9.7 (ε = 1e-9), so a few such queries more or less move the "
        "mean by about 1%."),
    "accuracy": Tolerance(
        "abs", 0.01,
        "±0.01 absolute (36 of 3,600 queries): printed to 0.001, one query is 0.0003; the "
        "authors searched an approximate HNSW index (chromadb defaults) over fp16/bf16 "
        "embeddings where we search exactly, which can move a few dozen queries across the "
        "top-k boundary; a wrong convention moves it by several points (Table 1 spans "
        "0.36-0.98)."),
    "ndcg": Tolerance(
        "abs", 0.01,
        "±0.01 absolute, as accuracy (a mean over 3,600 queries of a value in [0, 1]); ours is "
        "ndcg_authors@k, the authors' ideal DCG (data/authors/CONVENTIONS.md §2)."),
    "silhouette": Tolerance(
        "abs", 0.02,
        "±0.02 absolute: printed with 2 decimals (rounding alone is ±0.005); a silhouette lies "
        "in [-1, 1] and averages thousands of points, but the authors' raw euclidean distances "
        "scale with any change of the embedding norm (dtype, processor), worth about one "
        "printed unit."),
    "pearson": Tolerance(
        "abs", 0.05,
        "±0.05 absolute: r is computed over 16 countries from SP and silhouettes that are "
        "themselves compared at ±0.01 / ±0.02; with n = 16 its sampling error is "
        "(1 - r²)/√15 ≈ 0.1-0.26, so small input differences move r by hundredths; a sign "
        "change or a gap of 0.1 is a real disagreement (check Table 8 first)."),
    "z": Tolerance(
        "abs", 0.01,
        "±0.01 absolute (the authors' CSVs, full precision): a z-mean averages thousands of "
        "standardised similarities, so dtype noise moves it by ~0.001 and a different "
        "preprocessing by 0.05 or more."),
    "count": Tolerance(
        "exact", 0.0,
        "exact: the number of triplets of a group depends on the data alone; a difference means "
        "another dataset or grouping, and every other cell of that group is then suspect."),
}


@dataclass(frozen=True)
class Cell:
    """One compared number. ``model`` is our model behind ``ours`` (None for derived rows)."""

    row: str
    column: str
    kind: str  # key of TOLERANCES
    ours: float | None
    paper: float | None
    decimals: int | None = None  # the paper's printed decimals (None: full precision)
    model: str | None = None
    se: float | None = None  # bootstrap standard error of ours (benchmark.reproduce.spread)
    paper_flag: str = ""  # the printed value disagrees with the paper's own counts (why)

    @property
    def tolerance(self) -> Tolerance:
        return TOLERANCES[self.kind]

    @property
    def diff(self) -> float | None:
        return None if self.ours is None or self.paper is None else self.ours - self.paper

    @property
    def diff_se(self) -> float | None:
        """``diff`` in units of our bootstrap standard error (None without one)."""
        d = self.diff
        return d / self.se if d is not None and self.se is not None and self.se > 0 else None

    @property
    def status(self) -> str:
        """``ok``, ``outside`` (the tolerance), ``missing`` (ours) or ``unpublished``."""
        if self.paper is None:
            return "unpublished"
        if self.ours is None:
            return "missing"
        return "ok" if self.tolerance.within(self.ours, self.paper, self.decimals) else "outside"


@dataclass
class Section:
    """One compared table: its cells in display order and what to say about it."""

    key: str
    title: str
    source: str
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        c = Counter(cell.status for cell in self.cells)
        return {k: c.get(k, 0) for k in ("ok", "outside", "missing", "unpublished")}


def number(x: object) -> float | None:
    """A finite float of a results-file value, else None (absent, null, not a number)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    f = float(x)
    return f if f == f and abs(f) != float("inf") else None


def dig(d: object, *path: str) -> object:
    """``d[path[0]][path[1]]...``, None where any step is absent."""
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d
