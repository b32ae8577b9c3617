"""The rebalance pass: the same moves as a walk over every candidate, without the walk.

Issue 27: the repair pass walked the whole candidate group for every triplet whose candidate
served twice; the non-relevant group is the whole tagged pool, so sampling was O(n^2) (18 of
19 s at 30,000 images). :func:`naive_rebalance` is that walk, kept as the reference.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

import pytest

from core import datatables
from triplets import sampling
from triplets.pool import Pool, PoolImage
from triplets.sampling import CANDIDATE_ROLES, SampleConfig, Triplet, eligible, rebalance

COUNTRIES = ["USA", "JPN", "THA", "BRA", "DEU", "FRA"]
LANG = {c.code: c.language for c in datatables.countries()}


def naive_rebalance(triplets, pool, cfg, lang):
    """The walk: for each over-used candidate, every image of its group in id order."""
    by_id = pool.by_id()
    groups = {r: defaultdict(list) for r in CANDIDATE_ROLES}
    for im in sorted(pool.images, key=lambda im: im.image_id):
        groups["semantic"][im.concept].append(im)
        if im.tagged:
            groups["cultural"][im.country].append(im)
            groups["non_relevant"][""].append(im)
    per_anchor = defaultdict(set)
    for t in triplets:
        per_anchor[t.query_image_id].update(getattr(t, f"{r}_image_id") for r in CANDIDATE_ROLES)
    out, moved = list(triplets), 0
    for role in CANDIDATE_ROLES:
        uses = Counter(getattr(t, f"{role}_image_id") for t in out)
        for idx, t in enumerate(out):
            cur = getattr(t, f"{role}_image_id")
            if uses[cur] < 2:
                continue
            a = by_id[t.query_image_id]
            key = {"semantic": a.concept, "cultural": a.country, "non_relevant": ""}[role]
            taken = {by_id[getattr(t, f"{r}_image_id")].sha256 for r in CANDIDATE_ROLES if r != role}
            best = None
            for im in groups[role][key]:
                u = uses[im.image_id]
                if (u + 2 <= uses[cur] and (best is None or u < uses[best.image_id])
                        and im.image_id not in per_anchor[a.image_id]
                        and eligible(role, im, a, taken, cfg, lang)):
                    best = im
                    if u == 0:
                        break
            if best is None:
                continue
            fields = {f"{role}_image_id": best.image_id, f"{role}_item_id": best.item_id}
            if role != "cultural":
                fields[f"{role}_country"] = best.country
            if role != "semantic":
                fields[f"{role}_concept"] = best.concept
            out[idx] = replace(t, **fields)
            uses[cur] -= 1
            uses[best.image_id] += 1
            per_anchor[a.image_id].add(best.image_id)
            moved += 1
    return out, moved


def make_pool(per_cell: int, n_concepts: int = 10) -> Pool:
    images = []
    for c in range(n_concepts):
        for k in COUNTRIES:
            for i in range(per_cell):
                iid = f"{k.lower()}-c{c:02d}-{i:04d}"
                images.append(PoolImage(
                    image_id=iid, item_id=len(images) + 1, sha256=f"{iid}-sha", concept=f"c{c:02d}",
                    country=k, query_language=LANG[k], search_query="q", search_rank=1,
                    source_url="u", page_url=None, title=None, width=8, height=8, ext="png",
                    tags=(f"c{c:02d}",) if (c + i) % 7 else None))
    images.sort(key=lambda im: im.image_id)
    return Pool(images)


def skewed(pool: Pool, rotate: int) -> list[Triplet]:
    """One triplet per image whose candidates crowd the first images of the id order: the
    first half of each role's images serve twice, the rest never (the walk's worst case:
    the never-used alternatives sit at the end of the order)."""
    ims = pool.images
    tagged = [im for im in ims if im.tagged]
    out = []
    for i, a in enumerate(ims):
        s, cu, n = ims[(i // 2 + rotate) % len(ims)], tagged[i // 2 % len(tagged)], \
            tagged[(i // 2 + 3) % len(tagged)]
        out.append(Triplet(
            triplet_id=f"{a.image_id}-t0", query_image_id=a.image_id, query_concept=a.concept,
            query_country=a.country, query_language=LANG[a.country], query_text="q",
            semantic_image_id=s.image_id, semantic_country=s.country,
            cultural_image_id=cu.image_id, cultural_concept=cu.concept,
            non_relevant_image_id=n.image_id, non_relevant_concept=n.concept,
            non_relevant_country=n.country, query_item_id=a.item_id, semantic_item_id=s.item_id,
            cultural_item_id=cu.item_id, non_relevant_item_id=n.item_id))
    return out


@pytest.mark.parametrize("per_cell,rotate", [(3, 0), (5, 7), (8, 1)])
def test_rebalance_moves_what_the_walk_moves(per_cell, rotate):
    pool = make_pool(per_cell)
    trip = skewed(pool, rotate)
    for distinct in (True, False):
        cfg = SampleConfig(seed=0, distinct_language=distinct)
        got, moved = rebalance(trip, pool, cfg, LANG)
        want, want_moved = naive_rebalance(trip, pool, cfg, LANG)
        assert moved == want_moved > 0
        assert got == want


def test_rebalance_does_not_walk_the_group_per_triplet(monkeypatch):
    """Use-count lookups grow with the pool, not with pool x triplets (the walk looked up
    every image of the group for each over-used candidate: about n^2 / 4 here)."""
    lookups = Counter()

    class Counting(Counter):
        def __getitem__(self, key):
            lookups["n"] += 1
            return super().__getitem__(key)

    monkeypatch.setattr(sampling, "Counter", Counting)
    pool = make_pool(40)  # 2,400 images
    trip = skewed(pool, 0)
    _, moved = rebalance(trip, pool, SampleConfig(seed=0), LANG)
    assert moved > 500
    assert lookups["n"] < 20 * len(pool.images)
