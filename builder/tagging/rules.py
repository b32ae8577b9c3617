"""The rules the synchronous and the Batch API path of tagging share: the request and answer
types, the per-image validity rules (:func:`judge`) and the ``tags`` rows they become."""

from __future__ import annotations

import io
import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from string import Template
from typing import Any

from pydantic import BaseModel

from builder.catalog import Catalog, clip_raw
from builder.llm.base import BaseLLM, ImagePart
from builder.workdir import WorkDir
from core.provenance import utcnow
from core.text import normalize_term

# Formats Gemini reads as they are; anything else is re-encoded as PNG before sending.
SENDABLE = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}
MAX_SIDE = 1536  # larger images are downscaled before sending (tokens; the model sees ~768 px)
SEND_AS_IS = 4_000_000  # bytes: a sendable file below this goes as it is
#: Gemini takes at most 20 MB of inline data per request (and per Batch API job of inlined
#: requests): what one request's images may add up to, base64 included, with room for JSON.
REQUEST_BUDGET = 18_000_000


class ImageTags(BaseModel):
    index: int
    concepts: list[str]


class TagAnswer(BaseModel):
    """The response schema: ``{index: [concept, ...]}`` as a list of objects."""

    images: list[ImageTags]


@dataclass
class Img:
    """One image to tag: its bytes' hash, file, format and crawl concepts (best rank first)."""

    sha256: str
    ext: str
    format: str
    crawl_concepts: list[str]


@dataclass
class Group:
    """One request: images in index order; ``alone`` marks a retry of a single image."""

    images: list[Img]
    alone: bool = False


@dataclass
class GroupAnswer:
    """One request's answer: a value, or why not (``transient``: ask again in a later run;
    ``refused``: the service blocked the request)."""

    value: TagAnswer | None
    raw: str | None
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    transient: bool = False
    refused: bool = False


@dataclass
class Verdict:
    status: str  # ok / retry / failed / refused / transient
    tags: list[str] | None
    reason: str | None


def send_estimate(wd: WorkDir, img: Img) -> int:
    """Bytes the image adds to a request, base64 included (for a re-encoded one, an upper
    bound), without reading it."""
    size = wd.image_path(img.sha256, img.ext).stat().st_size
    if (img.format or "").upper() in SENDABLE and size < SEND_AS_IS:
        return size * 4 // 3 + 4
    return min(size, MAX_SIDE * MAX_SIDE * 3) * 4 // 3 + 4


def image_part(wd: WorkDir, img: Img) -> ImagePart:
    """The bytes to send: as stored when Gemini reads the format, the file is small and its
    pixels are the picture; otherwise the evaluator's decoder's picture, downscaled, as PNG."""
    from core.decode import decode_image, open_image, orientation

    data = wd.image_path(img.sha256, img.ext).read_bytes()
    mime = SENDABLE.get((img.format or "").upper())
    if mime is not None and len(data) < SEND_AS_IS:
        with open_image(data, img.sha256) as im:
            plain = im.mode in ("RGB", "L") and orientation(im) == 1
        if plain:
            return ImagePart(data, mime)
    im = decode_image(data, img.sha256)
    im.thumbnail((MAX_SIDE, MAX_SIDE))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return ImagePart(buf.getvalue(), "image/png")


def answer_of(res: Any) -> GroupAnswer:
    """The :class:`GroupAnswer` of a ``builder.llm.client`` ``LLMResult``."""
    if res.ok:
        return GroupAnswer(res.value, res.raw, None, res.usage)
    if res.status == "refused":
        return GroupAnswer(None, res.raw, f"refused: {res.error}", res.usage, refused=True)
    if res.status == "error":
        return GroupAnswer(None, res.raw, f"error: {res.error}", res.usage,
                           transient=res.transient)
    return GroupAnswer(None, res.raw, f"{res.status}: {res.error}", res.usage)


def judge(answer: GroupAnswer, n: int, allowed: set[str], final: bool) -> list[Verdict]:
    """Per image of a request of ``n`` images: valid tags, or why not (module docstring)."""
    bad_status = "failed" if final else "retry"
    if answer.value is None:
        reason = answer.error or "no valid answer"
        if answer.transient:  # not the images' fault: a later run asks again
            status = "transient"
        elif answer.refused:  # blocked: alone, the image is refused; in a group, ask alone
            status = "refused" if final else "retry"
        else:
            status = bad_status
        return [Verdict(status, None, reason) for _ in range(n)]
    seen: Counter = Counter(e.index for e in answer.value.images)
    by_index = {e.index: e.concepts for e in answer.value.images}
    out = []
    for i in range(n):
        if seen[i] == 0:
            out.append(Verdict(bad_status, None, f"index {i} missing from the answer"))
            continue
        if seen[i] > 1:
            out.append(Verdict(bad_status, None, f"index {i} answered {seen[i]} times"))
            continue
        labels = [normalize_term(c) for c in by_index[i]]  # NFC, as every name
        outside = sorted({c for c in labels if c not in allowed})
        if outside:
            out.append(Verdict(bad_status, None, f"labels outside the concept list: {outside[:5]}"))
        elif len(set(labels)) != len(labels):
            out.append(Verdict(bad_status, None, "a concept repeated"))
        elif not labels:
            out.append(Verdict("refused" if final else "retry", None, "empty list (refused)"))
        else:
            out.append(Verdict("ok", labels, None))
    return out


@dataclass
class TagContext:
    """What every request of one run shares."""

    wd: WorkDir
    llm: BaseLLM
    template: Template
    prompt_sha: str
    concepts: list[str]

    @property
    def allowed(self) -> set[str]:
        return set(self.concepts)

    def request_args(self, group: Group) -> dict[str, Any]:
        """Arguments of ``llm.prepare`` / ``generate_structured`` for one group."""
        n = len(group.images)
        prompt = self.template.substitute(n_images=n, last_index=n - 1,
                                          n_concepts=len(self.concepts),
                                          concepts="\n".join(self.concepts))
        return {"prompt": prompt, "schema": TagAnswer,
                "images": [image_part(self.wd, img) for img in group.images],
                "template_sha": self.prompt_sha,
                "params": {"ask": "alone" if group.alone else "group"}}


def record(cat: Catalog, ctx: TagContext, group: Group, answer: GroupAnswer,
           verdicts: list[Verdict], run_id: int, counts: Counter) -> None:
    """Write one request's outcome (one tags row per image) in one transaction."""
    with cat.tx() as con:
        record_rows(con, ctx, group, answer, verdicts, run_id, counts)


def record_rows(con: sqlite3.Connection, ctx: TagContext, group: Group, answer: GroupAnswer,
                verdicts: list[Verdict], run_id: int, counts: Counter) -> None:
    """Upsert the tags rows of one request (raw text kept, clipped, only for invalid answers)."""
    now = utcnow()
    for img, v in zip(group.images, verdicts, strict=True):
        counts[f"{'alone' if group.alone else 'group'}_{v.status}"] += 1
        record_tag(con, img.sha256, v.tags, v.status, reason=v.reason,
                   raw=None if v.status == "ok" else clip_raw(answer.raw), model=ctx.llm.spec,
                   prompt_sha=ctx.prompt_sha, run_id=run_id, now=now)


def record_tag(con: sqlite3.Connection, sha256: str, tags: list[str] | None, status: str, *,
               reason: str | None = None, raw: str | None = None, model: str | None = None,
               prompt_sha: str | None = None, run_id: int | None = None,
               now: str | None = None) -> None:
    """Upsert the ``tags`` row of one image (one more attempt; no tags stored as NULL)."""
    con.execute(
        "INSERT INTO tags (sha256, tags_json, status, reason, raw, model, prompt_sha,"
        " run_id, attempts, updated_at) VALUES (?,?,?,?,?,?,?,?,1,?)"
        " ON CONFLICT(sha256) DO UPDATE SET tags_json=excluded.tags_json,"
        " status=excluded.status, reason=excluded.reason, raw=excluded.raw,"
        " model=excluded.model, prompt_sha=excluded.prompt_sha, run_id=excluded.run_id,"
        " attempts=tags.attempts+1, updated_at=excluded.updated_at",
        (sha256, json.dumps(tags, ensure_ascii=False) if tags else None, status, reason, raw,
         model, prompt_sha, run_id, now or utcnow()),
    )


def apply_answers(cat: Catalog, ctx: TagContext, groups: list[Group], answers: list[GroupAnswer],
                  final: bool, run_id: int, counts: Counter) -> None:
    """Judge and record the answers of a batch phase (same rules as the synchronous path)."""
    for group, ans in zip(groups, answers, strict=True):
        record(cat, ctx, group, ans, judge(ans, len(group.images), ctx.allowed, final),
               run_id, counts)
