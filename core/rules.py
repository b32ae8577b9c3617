"""The 3XCM triplet rules (docs/release.md, "validate"), shared by the evaluator and ``python -m
triplets validate`` so both reject the same rows with the same words: table checks raise one
:class:`~core.errors.DataError` line, row rules name each broken rule per row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core import datatables
from core.errors import DataError
from core.files import sha256_bytes

ROLES = ("query", "semantic", "cultural", "non_relevant")
IMAGE_ID_COLUMNS = [f"{r}_image_id" for r in ROLES]


@dataclass
class Violation:
    """One broken rule on one triplet."""

    row_id: str
    rule: str
    detail: str = ""


def first_items(items: list[str], n: int = 5) -> str:
    """``a, b, c ...``: the first ``n`` items of a list named in an error line."""
    return ", ".join(items[:n]) + (" ..." if len(items) > n else "")


# -- table checks -------------------------------------------------------------------------------
def _is_null(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v)) if np.ndim(v) == 0 else False
    except (TypeError, ValueError):
        return False


def check_columns(frame: pd.DataFrame, required: Iterable[str], what: str) -> None:
    """Every required column present and non-null in some row (``datasets`` fills a column the
    card lists but the files lack with nulls: the same fault as absent)."""
    if not len(frame):
        missing = [c for c in required if c not in frame.columns]
    else:
        missing = [c for c in required
                   if c not in frame.columns or all(_is_null(v) for v in frame[c])]
    if missing:
        raise DataError(f"{what}: missing column(s) {', '.join(missing)} "
                        "(absent, or empty in every row)")


def check_not_empty(n_rows: int, what: str) -> None:
    """A triplet table with a header and no rows is bad input, not a result with n = 0."""
    if n_rows == 0:
        raise DataError(f"{what}: no triplets (a header and no rows)")


def check_tags(image_ids: Iterable[Any], tags: Iterable[Any], what: str,
               concepts: Iterable[Any] | None = None) -> None:
    """Each image's ``tags`` is a list of concepts or null, never text; with ``concepts``, every
    tag is one of them or of ``data/concepts.txt``, spelled exactly (rule ``tag_vocabulary``)."""
    image_ids, tags = list(image_ids), list(tags)
    bad = [(str(i), t) for i, t in zip(image_ids, tags, strict=True)
           if not _is_null(t) and (isinstance(t, str | bytes) or not _is_tag_list(t))]
    if bad:
        iid, t = bad[0]
        raise DataError(f"{what}: column tags must hold lists of concepts; {len(bad)} image(s) "
                        f"hold {type(t).__name__} values (first: {iid}: {str(t)[:40]!r})")
    if concepts is not None:
        _check_tag_vocabulary(image_ids, tags, concepts, what)


def _check_tag_vocabulary(image_ids: list[Any], tags: list[Any], concepts: Iterable[Any],
                          what: str) -> None:
    vocab = {str(c) for c in concepts if not _is_null(c)} | set(datatables.concepts())
    folded = {c.casefold(): c for c in sorted(vocab)}
    unknown: list[tuple[str, str]] = []
    for iid, t in zip(image_ids, tags, strict=True):
        if _is_null(t):
            continue
        unknown.extend((str(iid), x) for x in t if x not in vocab)
    if unknown:
        iid, tag = unknown[0]
        hint = ("an empty tag" if not tag.strip() else
                f"{tag!r} (the concept is {folded[tag.casefold()]!r})"
                if tag.casefold() in folded else f"{tag!r} is not a concept")
        n_img = len({i for i, _ in unknown})
        raise DataError(f"{what}: rule tag_vocabulary: {n_img} image(s) with tags that are not "
                        f"concepts of the release; first: {iid}: {hint}")


def _is_tag_list(t: Any) -> bool:
    if not isinstance(t, list | tuple | np.ndarray):
        return False
    return all(isinstance(x, str) for x in t)


def check_unique_images(image_ids: list[str], what: str) -> None:
    """An image id names one image."""
    counts = Counter(image_ids)
    dupes = sorted(i for i, n in counts.items() if n > 1)
    if dupes:
        raise DataError(f"{what}: duplicate image_id(s): {first_items(dupes)}")


def image_bytes_violation(image_id: str, data: bytes | None, sha256: str | None,
                          digest: str | None = None, *, decode: bool = False
                          ) -> Violation | None:
    """Rule ``image_bytes``: bytes embedded, matching ``sha256`` (``digest``: their sha256 if
    known), and, with ``decode``, accepted by the evaluator's decoder."""
    if not data:
        return Violation(str(image_id), "image_bytes", "no embedded bytes")
    if (digest or sha256_bytes(data)) != sha256:
        return Violation(str(image_id), "image_bytes", "bytes do not match sha256")
    if decode:
        from core.decode import ImageRefused, decode_image

        try:
            decode_image(data, str(image_id))
        except ImageRefused as e:
            return Violation(str(image_id), "image_bytes", f"refused: {e.detail}")
        except DataError:
            return Violation(str(image_id), "image_bytes", "undecodable image")
    return None


def raise_on_image_violations(violations: list[Violation], what: str) -> None:
    """One :class:`DataError` line for images breaking ``image_bytes``."""
    if violations:
        details = sorted({v.detail for v in violations})
        raise DataError(f"{what}: {len(violations)} image(s) break rule image_bytes "
                        f"({'; '.join(details)}); first: "
                        f"{first_items([v.row_id for v in violations])}")


# -- row rules ----------------------------------------------------------------------------------
def triplet_violations(
    tr: pd.DataFrame,
    image_meta: pd.DataFrame | None = None,
    image_ids: set[str] | None = None,
    *,
    tags_known: bool = False,
    distinct_language: bool = False,
    check_query_text: bool = False,
    shas: dict[str, str] | None = None,
) -> list[Violation]:
    """Every rule each triplet breaks, ordered by row then rule. ``image_ids``: the dataset's
    images; ``image_meta``: each image's own labels (optional ``tags``); ``tags_known``:
    candidates must be tagged; ``shas``: image id -> sha256 (``distinct_images`` by bytes)."""
    tr = tr.reset_index(drop=True)
    out = _structural(tr, image_ids)
    if image_meta is not None:
        out.extend(_meta_violations(tr, image_meta, tags_known))
    out.extend(_row_rules(tr, distinct_language, check_query_text, shas))
    order = {rid: i for i, rid in reversed(list(enumerate(tr["triplet_id"].astype(str))))}
    out.sort(key=lambda v: (order.get(v.row_id, -1), v.rule))
    return out


def _structural(tr: pd.DataFrame, image_ids: set[str] | None) -> list[Violation]:
    out: list[Violation] = []
    rid = tr["triplet_id"].astype(str).to_numpy()
    qc, qk = tr["query_concept"].to_numpy(), tr["query_country"].to_numpy()

    def flag(mask: Any, rule: str) -> None:
        for i in np.asarray(mask).nonzero()[0]:
            out.append(Violation(str(rid[i]), rule))

    flag(tr["semantic_country"].to_numpy() == qk, "semantic_same_country")
    flag(tr["cultural_concept"].to_numpy() == qc, "cultural_same_concept")
    flag(tr["non_relevant_concept"].to_numpy() == qc, "non_relevant_same_concept")
    flag(tr["non_relevant_country"].to_numpy() == qk, "non_relevant_same_country")
    if "semantic_concept" in tr:
        flag(tr["semantic_concept"].to_numpy() != qc, "semantic_other_concept")
    if "cultural_country" in tr:
        flag(tr["cultural_country"].to_numpy() != qk, "cultural_other_country")
    if image_ids is not None:
        for col in IMAGE_ID_COLUMNS:
            flag(~tr[col].isin(image_ids).to_numpy(), f"unknown_{col}")
    return out


def _meta_violations(tr: pd.DataFrame, meta: pd.DataFrame, tags_known: bool) -> list[Violation]:
    m = meta.drop_duplicates("image_id").set_index("image_id")
    concept, country = m["concept"].to_dict(), m["country"].to_dict()
    tags = m["tags"].to_dict() if "tags" in m else {}
    out: list[Violation] = []
    for r in tr.itertuples(index=False):
        rid = str(r.triplet_id)
        want = {"query": (r.query_concept, r.query_country),
                "semantic": (r.query_concept, r.semantic_country),
                "cultural": (r.cultural_concept, r.query_country),
                "non_relevant": (r.non_relevant_concept, r.non_relevant_country)}
        for role, (c, k) in want.items():
            iid = getattr(r, f"{role}_image_id")
            for have, wanted, what in ((concept.get(iid), c, "concept"),
                                       (country.get(iid), k, "country")):
                if have is not None and have != wanted:
                    out.append(Violation(rid, f"{role}_image_{what}", f"{have!r} != {wanted!r}"))
        for role in ("cultural", "non_relevant"):
            iid = getattr(r, f"{role}_image_id")
            if iid not in concept:
                continue
            t = tags.get(iid)
            t = [] if _is_null(t) else list(t)
            if r.query_concept in t:
                out.append(Violation(rid, f"{role}_tagged_with_query_concept"))
            if tags_known and not t:
                out.append(Violation(rid, f"{role}_untagged", f"{iid} has no tags"))
    return out


def _row_rules(tr: pd.DataFrame, distinct_language: bool, check_query_text: bool,
               shas: dict[str, str] | None) -> list[Violation]:
    langs: dict[str, str] = {}
    for c in datatables.countries():
        for key in (c.code, c.label, c.name, c.authors_name):
            langs[key] = c.language
    ids = Counter(tr["triplet_id"].astype(str))
    first_with: dict[tuple[str, ...], str] = {}
    out: list[Violation] = []
    has_lang = "query_language" in tr
    for r in tr.to_dict("records"):
        rid, qk = str(r["triplet_id"]), r["query_country"]

        def add(rule: str, detail: str, rid: str = rid) -> None:
            out.append(Violation(rid, rule, detail))

        four = tuple(str(r[c]) for c in IMAGE_ID_COLUMNS)
        if ids[rid] > 1:
            add("duplicate_triplet_id", f"{ids[rid]} rows")
        elif four in first_with:
            add("duplicate_triplet", f"same four images as {first_with[four]}")
        first_with.setdefault(four, rid)
        if check_query_text and _text_empty(r.get("query_text")):
            add("query_text_empty", "empty query text")
        ql = r.get("query_language") if has_lang else None
        if has_lang and not _is_null(ql) and langs.get(qk) != ql:
            add("query_language", f"{ql} is not the language of {qk}")
        sk = r.get("semantic_country")
        if distinct_language and sk is not None and sk != qk and langs.get(sk) == langs.get(qk):
            add("semantic_language", f"{sk} shares {qk}'s language {langs.get(qk)}")
        if len(set(four)) < 4:
            add("distinct_images", f"repeated image id among {list(four)}")
        elif shas is not None:
            known = [shas[i] for i in four if shas.get(i)]
            if len(set(known)) < len(known):
                add("distinct_images", "two of the images have the same bytes (sha256)")
    return out


AUTHORS_ROLES = {
    "query": "query",
    "semantic": "semantically_relevant_candidate",
    "cultural": "culturally_relevant_candidate",
    "non_relevant": "non_relevant_candidate",
}
# Their image ids name the country in lower case; USA also appears as 'america'.
AUTHORS_PREFIX_ALIASES = {"america": "USA"}


def authors_violations(raw: pd.DataFrame, tr: pd.DataFrame) -> list[Violation]:
    """The authors' format's own rules on ``raw`` (``tr``: its mapped rows), by row then role."""
    concepts = np.array(datatables.concepts() + ["out of range"], dtype=object)
    prefix_code = dict(AUTHORS_PREFIX_ALIASES)
    for c in datatables.countries():
        for key in (c.code, c.label, c.name, c.authors_name):
            prefix_code.setdefault(key.lower(), c.code)
    rid = raw["query_index"].astype(str).to_numpy()
    by_index = pd.Series(raw["query_image_id"].to_numpy(), index=raw["query_index"].to_numpy())
    by_index = by_index[~by_index.index.duplicated()]
    found: list[tuple[int, int, Violation]] = []
    for r_i, (role, prefix) in enumerate(AUTHORS_ROLES.items()):
        ids = raw[f"{prefix}_image_id"].astype(str)
        concept = (tr["query_concept"] if role == "query" else raw[f"{prefix}_concept"]).to_numpy()
        country = tr["query_country" if role == "query" else f"{role}_country"].to_numpy()
        parts = ids.str.rsplit("-", n=3, expand=True).reindex(columns=range(4))
        ok = parts[3].notna().to_numpy() & parts[1].fillna("").str.isdigit().to_numpy()
        idx = np.where(ok, pd.to_numeric(parts[1].where(ok, "0")), 0).astype(int)
        named = concepts[np.minimum(idx, len(concepts) - 1)]
        code = parts[0].fillna("").str.strip().str.lower().map(prefix_code).to_numpy()
        for i in np.nonzero(~ok)[0]:
            found.append((i, r_i, Violation(rid[i], "image_id_format",
                                            f"{ids.iat[i]} is not country-concept-rank-lang")))
        for i in np.nonzero(ok & (named != concept))[0]:
            found.append((i, r_i, Violation(rid[i], "image_id_concept", f"{ids.iat[i]}: index "
                                            f"{idx[i]} is {named[i]}, not {concept[i]}")))
        for i in np.nonzero(ok & (code != country))[0]:
            found.append((i, r_i, Violation(rid[i], "image_id_country", f"{ids.iat[i]}: prefix "
                                            f"{parts[0].iat[i]!r} is not {country[i]}")))
        if role == "query" or f"{prefix}_index" not in raw:
            continue
        cand = raw[f"{prefix}_index"]
        named_id = cand.map(by_index)
        for i in np.nonzero((named_id.notna() & (named_id != ids)).to_numpy())[0]:
            found.append((i, r_i, Violation(rid[i], "candidate_index_mismatch",
                                            f"{role} index {cand.iat[i]} is {named_id.iat[i]}, "
                                            f"not {ids.iat[i]}")))
    found.sort(key=lambda x: (x[0], x[1]))
    return [v for _, _, v in found]


def _text_empty(v: Any) -> bool:
    return _is_null(v) or not str(v).strip()


def query_text_violations(tr: pd.DataFrame) -> list[Violation]:
    """``query_text_empty`` alone (for query texts set after the other rules were checked)."""
    return [Violation(str(r.triplet_id), "query_text_empty", "empty query text")
            for r in tr[["triplet_id", "query_text"]].itertuples(index=False)
            if _text_empty(r.query_text)]


def raise_on_violations(violations: list[Violation], what: str) -> None:
    """One :class:`DataError` line: how many violations, of which rules, the first rows."""
    if not violations:
        return
    rows = sorted({v.row_id for v in violations}, key=lambda x: (len(x), x))
    rules = sorted({v.rule for v in violations})
    raise DataError(
        f"{what}: {len(violations)} rule violation(s) in {len(rows)} triplet(s) "
        f"({', '.join(rules)}); first rows: {first_items(rows)}"
    )


def summarize(violations: Iterable[Violation]) -> Counter:
    """Violations counted by rule."""
    return Counter(v.rule for v in violations)
