"""Seeded, balanced sampling of 3XCM triplets (docs/release.md, "sample"): candidates from
least-recently-used rotations, then :func:`rebalance`; every random choice is seeded by
sha256 of (seed, purpose), so the same catalog and seed give the same triplets."""

from __future__ import annotations

import bisect
import json
import random
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace

from core import datatables
from core.files import sha256_text
from triplets.pool import Pool, PoolImage, native_term
from triplets.rules import TRIPLET_COLUMNS


class SamplingError(ValueError):
    """A sampling setting that cannot be used (one line; the CLI exits with code 2)."""


@dataclass(frozen=True)
class SampleConfig:
    """The sampling settings, recorded with the run (``seed`` is the one source of randomness)."""

    seed: int
    per_image: int = 1  # triplets anchored on each kept image
    distinct_language: bool = True  # semantic candidate from a country of another language
    # semantic and non-relevant candidates only from these countries (None: any other country)
    candidate_countries: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.per_image < 1:
            raise SamplingError(f"--per-image must be at least 1, got {self.per_image}")
        if self.candidate_countries is not None:
            codes = {c.code for c in datatables.countries()}
            unknown = sorted(set(self.candidate_countries) - codes)
            if unknown or len(self.candidate_countries) < 2:
                raise SamplingError(
                    f"--candidate-countries wants at least two of {', '.join(sorted(codes))}; "
                    f"got {','.join(self.candidate_countries) or 'none'}"
                    + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
            object.__setattr__(self, "candidate_countries",
                               tuple(sorted(set(self.candidate_countries))))

    def record(self) -> dict:
        """The settings as recorded (``candidate_countries`` only when set)."""
        out = asdict(self)
        if self.candidate_countries is None:
            del out["candidate_countries"]
        else:
            out["candidate_countries"] = list(self.candidate_countries)
        return out


@dataclass(frozen=True)
class Triplet:
    """One triplet, with the release's columns (``TRIPLET_COLUMNS``) and the catalog item ids."""

    triplet_id: str
    query_image_id: str
    query_concept: str
    query_country: str
    query_language: str
    query_text: str
    semantic_image_id: str
    semantic_country: str
    cultural_image_id: str
    cultural_concept: str
    non_relevant_image_id: str
    non_relevant_concept: str
    non_relevant_country: str
    query_item_id: int = 0
    semantic_item_id: int = 0
    cultural_item_id: int = 0
    non_relevant_item_id: int = 0

    def release_row(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in TRIPLET_COLUMNS}


@dataclass
class SampleResult:
    triplets: list[Triplet]
    counts: Counter = field(default_factory=Counter)
    balance: dict = field(default_factory=dict)


def rng_for(seed: int, *purpose: object) -> random.Random:
    """A generator seeded by sha256 of (seed, purpose): independent streams per purpose."""
    digest = sha256_text(json.dumps([seed, *purpose], ensure_ascii=False))
    return random.Random(int(digest[:16], 16))  # the first 8 bytes, big-endian


def interleave(groups: dict[str, list[PoolImage]], rng: random.Random) -> list[PoolImage]:
    """Round robin over the groups (group order shuffled by ``rng``)."""
    keys = sorted(groups)
    rng.shuffle(keys)
    lists = [list(groups[k]) for k in keys]
    out: list[PoolImage] = []
    depth = max((len(x) for x in lists), default=0)
    for i in range(depth):
        out.extend(x[i] for x in lists if i < len(x))
    return out


class Rotation:
    """Least-recently-used rotation: take the first eligible image, move it to the back."""

    def __init__(self, images: Iterable[PoolImage]):
        self.queue: deque[PoolImage] = deque(images)

    def find(self, ok: Callable[[PoolImage], bool]) -> int | None:
        for i, im in enumerate(self.queue):
            if ok(im):
                return i
        return None

    def commit(self, index: int) -> PoolImage:
        im = self.queue[index]
        del self.queue[index]
        self.queue.append(im)
        return im


def _cell_lists(images: list[PoolImage], seed: int) -> dict[tuple[str, str], list[PoolImage]]:
    """(concept, country) -> its images in a seeded order."""
    cells: dict[tuple[str, str], list[PoolImage]] = defaultdict(list)
    for im in images:
        cells[(im.concept, im.country)].append(im)
    for key in sorted(cells):
        rng_for(seed, "cell", *key).shuffle(cells[key])
    return cells


def build_rotations(pool: Pool, seed: int) -> tuple[dict, dict, Rotation]:
    """Semantic rotations per concept, cultural per country, one non-relevant rotation."""
    cells = _cell_lists(pool.images, seed)
    concepts = sorted({c for c, _ in cells})
    countries = sorted({k for _, k in cells})
    semantic = {
        c: Rotation(interleave({k: cells[(c, k)] for k in countries if (c, k) in cells},
                               rng_for(seed, "semantic", c)))
        for c in concepts
    }
    # Untagged images can never be cultural or non-relevant candidates: leave them out here.
    tagged = {key: [im for im in v if im.tagged] for key, v in cells.items()}
    per_country = {
        k: interleave({c: tagged[(c, k)] for c in concepts if tagged.get((c, k))},
                      rng_for(seed, "cultural", k))
        for k in countries
    }
    cultural = {k: Rotation(v) for k, v in per_country.items()}
    non_relevant = Rotation(interleave(per_country, rng_for(seed, "non_relevant")))
    return semantic, cultural, non_relevant


def sample_triplets(pool: Pool, cfg: SampleConfig) -> SampleResult:
    """Sample ``cfg.per_image`` triplets per kept image (see the module docstring)."""
    counts: Counter = Counter()
    lang = {c.code: c.language for c in datatables.countries()}
    semantic, cultural, non_relevant = build_rotations(pool, cfg.seed)
    anchors = list(pool.images)
    rng_for(cfg.seed, "anchors").shuffle(anchors)
    out: list[Triplet] = []
    used: dict[str, set[str]] = {a.image_id: set() for a in anchors}  # per anchor, all rounds
    for j in range(cfg.per_image):
        for a in anchors:
            t = _one(a, j, pool, (semantic, cultural, non_relevant), lang, cfg, counts,
                     used[a.image_id])
            if t is not None:
                out.append(t)
                used[a.image_id].update(
                    (t.semantic_image_id, t.cultural_image_id, t.non_relevant_image_id))
    out, counts["rebalanced_candidates"] = rebalance(out, pool, cfg, lang)
    order = release_order()
    out.sort(key=lambda t: order(t.query_country, t.query_concept, t.triplet_id))
    counts["triplets"] = len(out)
    counts["anchors"] = len(anchors)
    return SampleResult(out, counts, balance_stats(out, pool))


def release_order() -> Callable[[str, str, str], tuple]:
    """The sort key of triplets everywhere: countries in the table's order, concept, id."""
    order = {c.code: i for i, c in enumerate(datatables.countries())}
    return lambda country, concept, triplet_id: (order.get(country, len(order)), concept,
                                                 triplet_id)


CANDIDATE_ROLES = ("semantic", "cultural", "non_relevant")


def eligible(role: str, im: PoolImage, a: PoolImage, taken: set[str], cfg: SampleConfig,
             lang: dict[str, str]) -> bool:
    """Whether ``im`` may be the ``role`` candidate of ``a`` (``taken``: the others' sha256)."""
    c, k = a.concept, a.country
    if im.sha256 == a.sha256 or im.sha256 in taken:
        return False
    if role != "cultural" and cfg.candidate_countries is not None \
            and im.country not in cfg.candidate_countries:
        return False
    if role == "semantic":
        return im.concept == c and im.country != k and not (
            cfg.distinct_language and lang.get(im.country) == lang.get(k))
    if im.concept == c or im.tags is None or c in im.tags:
        return False
    return im.country == k if role == "cultural" else im.country != k


class UseBuckets:
    """The images of one candidate group bucketed by how often they serve a role, so the
    least-used eligible image is found without walking the group."""

    def __init__(self, images: list[PoolImage], uses: Counter):
        self.images = images
        self.pos = {im.image_id: i for i, im in enumerate(images)}
        self.by_use: dict[int, list[int]] = defaultdict(list)
        for i, im in enumerate(images):  # positions ascending: each bucket in group order
            self.by_use[uses[im.image_id]].append(i)

    def move(self, image_id: str, old: int, new: int) -> None:
        """``image_id`` now serves ``new`` times instead of ``old``."""
        i = self.pos.get(image_id)
        if i is None:
            return
        bucket = self.by_use[old]
        del bucket[bisect.bisect_left(bucket, i)]
        bisect.insort(self.by_use[new], i)

    def least_used(self, at_most: int, ok: Callable[[PoolImage], bool]) -> PoolImage | None:
        """The first least-used image (at most ``at_most`` uses) that ``ok`` accepts, or None."""
        for u in sorted(k for k, v in self.by_use.items() if v and k <= at_most):
            for i in self.by_use[u]:
                if ok(self.images[i]):
                    return self.images[i]
        return None


def rebalance(triplets: list[Triplet], pool: Pool, cfg: SampleConfig,
              lang: dict[str, str]) -> tuple[list[Triplet], int]:
    """Repair the greedy draws: where an image serves a role at least twice more often than an
    eligible alternative, give the triplet the least-used alternative (the first by image id);
    returns the triplets and the number of candidates moved."""
    by_id = pool.by_id()
    ordered = sorted(pool.images, key=lambda im: im.image_id)
    groups: dict[str, dict[str, list[PoolImage]]] = {r: defaultdict(list) for r in CANDIDATE_ROLES}
    for im in ordered:
        groups["semantic"][im.concept].append(im)
        if im.tagged:
            groups["cultural"][im.country].append(im)
            groups["non_relevant"][""].append(im)
    per_anchor: dict[str, set[str]] = defaultdict(set)
    for t in triplets:
        per_anchor[t.query_image_id].update(getattr(t, f"{r}_image_id") for r in CANDIDATE_ROLES)
    out, moved = list(triplets), 0
    for role in CANDIDATE_ROLES:
        uses = Counter(getattr(t, f"{role}_image_id") for t in out)
        buckets = {key: UseBuckets(images, uses) for key, images in groups[role].items()}
        home = {im.image_id: key for key, images in groups[role].items() for im in images}
        for idx, t in enumerate(out):
            cur = getattr(t, f"{role}_image_id")
            if uses[cur] < 2:
                continue
            a = by_id[t.query_image_id]
            key = {"semantic": a.concept, "cultural": a.country, "non_relevant": ""}[role]
            if key not in buckets:
                continue
            taken = {by_id[getattr(t, f"{r}_image_id")].sha256 for r in CANDIDATE_ROLES if r != role}
            best = buckets[key].least_used(
                uses[cur] - 2, lambda im, a=a, taken=taken, role=role: (
                    im.image_id not in per_anchor[a.image_id]
                    and eligible(role, im, a, taken, cfg, lang)))
            if best is None:
                continue
            fields = {f"{role}_image_id": best.image_id, f"{role}_item_id": best.item_id}
            if role != "cultural":
                fields[f"{role}_country"] = best.country
            if role != "semantic":
                fields[f"{role}_concept"] = best.concept
            out[idx] = replace(t, **fields)
            for iid, step in ((cur, -1), (best.image_id, 1)):  # the buckets follow the uses
                if iid in home:
                    buckets[home[iid]].move(iid, uses[iid], uses[iid] + step)
            uses[cur] -= 1
            uses[best.image_id] += 1
            per_anchor[a.image_id].add(best.image_id)
            moved += 1
    return out, moved


def _find(rot: Rotation, ok: Callable[[PoolImage], bool], avoid: set[str]) -> int | None:
    """First eligible image not yet used by this anchor; else the first eligible one."""
    i = rot.find(lambda im: im.image_id not in avoid and ok(im))
    return rot.find(ok) if i is None and avoid else i


def _one(
    a: PoolImage,
    j: int,
    pool: Pool,
    rotations: tuple[dict[str, Rotation], dict[str, Rotation], Rotation],
    lang: dict[str, str],
    cfg: SampleConfig,
    counts: Counter,
    avoid: set[str],
) -> Triplet | None:
    """One triplet for anchor ``a`` (round ``j``), or None with the reason counted; ``avoid``: its
    candidates of earlier rounds, taken again only if nothing else is eligible."""
    semantic, cultural, non_relevant = rotations
    c, k = a.concept, a.country
    text = native_term(pool, c, k)
    if text is None:
        counts["skipped_no_native_term"] += 1
        return None

    found: list[tuple[Rotation, int]] = []  # each role's rotation and its pick there
    for role, rot in zip(CANDIDATE_ROLES, (semantic[c], cultural[k], non_relevant), strict=True):
        shas = {r.queue[i].sha256 for r, i in found}  # the roles picked before this one
        i = _find(rot, lambda im, role=role, shas=shas: eligible(role, im, a, shas, cfg, lang),
                  avoid)
        if i is None:
            counts[f"skipped_no_{role}"] += 1
            return None
        found.append((rot, i))
    s, cu, n = (rot.commit(i) for rot, i in found)
    return Triplet(
        triplet_id=f"{a.image_id}-t{j}",
        query_image_id=a.image_id,
        query_concept=c,
        query_country=k,
        query_language=lang[k],
        query_text=text,
        semantic_image_id=s.image_id,
        semantic_country=s.country,
        cultural_image_id=cu.image_id,
        cultural_concept=cu.concept,
        non_relevant_image_id=n.image_id,
        non_relevant_concept=n.concept,
        non_relevant_country=n.country,
        query_item_id=a.item_id,
        semantic_item_id=s.item_id,
        cultural_item_id=cu.item_id,
        non_relevant_item_id=n.item_id,
    )


def balance_stats(triplets: list[Triplet], pool: Pool) -> dict:
    """Per role: distinct images used, the most uses of one image, spread over countries/concepts."""
    by_id = pool.by_id()
    stats: dict = {}
    for role in ("semantic", "cultural", "non_relevant"):
        uses = Counter(getattr(t, f"{role}_image_id") for t in triplets)
        countries = Counter(by_id[i].country for i in uses.elements())
        concepts = Counter(by_id[i].concept for i in uses.elements())
        stats[role] = {
            "distinct_images": len(uses),
            "max_uses_per_image": max(uses.values(), default=0),
            "by_country": dict(sorted(countries.items())),
            "by_concept": dict(sorted(concepts.items())),
        }
    return stats
