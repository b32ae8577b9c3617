"""Disjoint sets for the dedup stages (concept clusters, near-duplicate image groups)."""

from __future__ import annotations

from collections.abc import Iterable


class UnionFind:
    """Disjoint sets over 0..n-1 with path halving and union by size."""

    def __init__(self, n: int):
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, a: int) -> int:
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]

    def groups(self, items: Iterable[int]) -> list[list[int]]:
        """``items`` by set, in the order given (the sets by their first item)."""
        out: dict[int, list[int]] = {}
        for a in items:
            out.setdefault(self.find(a), []).append(a)
        return list(out.values())
