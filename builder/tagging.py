"""Stage ``tagging``: every kept image gets the ordered list of concepts it shows (Appendix B).

``python -m builder.tagging [--llm gemini:MODEL|offline] [--images-per-request 8] [--batch]``

The prompt (``data/prompts/tagging.txt``, its sha256 recorded on every tag row and in the
stage-run record) carries the full concept list of the build; one request holds several
images, numbered by their order, and asks for structured JSON ``{index: [concept, ...]}``
(as a list of ``{index, concepts}`` objects, the shape Gemini's response schema supports), in
priority order. Per image, an answer is valid when its index is answered exactly once, every
label is in the concept list (no repeats) and the list is not empty. An image whose answer is
not valid (a label outside the list, a missing index, an empty list: the model refused or saw
nothing) is recorded (``tags.status='retry'`` with the reason and the raw answer) and asked
again once, alone; if that answer is not valid either, the image ends ``failed`` (labels or
shape) or ``refused`` (empty list), reason and raw text kept. An invalid answer is never stored
as tags. A transport error also ends in a retry alone, then ``failed``.

``--batch`` sends the requests through the Gemini Batch API (half price, asynchronous):
submit, poll, collect; the job name is in the catalog (``tag_batch_jobs``) before polling
starts, so an interrupted run picks the same job up (see :mod:`builder.tagging_batch`). Both
paths judge and record answers with the rules of :mod:`builder.tagging_rules`.

``--llm offline`` tags each image with its own crawl concept(s) only: a weaker stand-in for
the model (it cannot see a second concept in the picture, so cultural and non-relevant
candidates are filtered only by their crawl concept). It goes through the same validation.

Resumable: tags are written per request; images with a tag row are not asked again (rows in
``retry`` go straight to the alone phase), and the LLM response cache makes a re-run free.
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from benchmark import tables
from builder.catalog import Catalog
from builder.llm import BaseLLM, OfflineLLM, add_llm_args, llm_from_args
from builder.prompts import load_prompt
from builder.stagekit import (
    StageInputError,
    format_summary,
    report_run,
    stage_main,
    stage_parser,
    stage_run,
)
from builder.tagging_rules import (
    Group,
    GroupAnswer,
    Img,
    TagContext,
    Verdict,
    judge,
    record,
)

log = logging.getLogger(__name__)

STAGE = "tagging"
PROMPT = ("tagging.txt", ("n_images", "last_index", "n_concepts", "concepts"))
KEPT = ("ok", "kept")


def concept_list(cat: Catalog) -> list[str]:
    """The build's concepts: kept catalog concepts (else data/concepts.txt) plus crawl concepts."""
    kept = [r[0] for r in cat.query("SELECT name FROM concepts WHERE status='kept' ORDER BY name")]
    base = kept or tables.concepts()
    crawl = [r[0] for r in cat.query("SELECT DISTINCT concept FROM items ORDER BY concept")]
    return sorted(set(base) | set(crawl))


def images_to_tag(cat: Catalog) -> tuple[list[Img], list[Img]]:
    """(images without a tag row, images whose row waits for a retry alone), by sha."""
    rows = cat.query(
        "SELECT i.sha256, im.ext, im.format, i.concept, MIN(i.rank) AS best, t.status AS tstatus"
        " FROM items i JOIN images im ON im.sha256 = i.sha256"
        " LEFT JOIN tags t ON t.sha256 = i.sha256"
        " WHERE i.status IN ('ok', 'kept') AND i.sha256 IS NOT NULL"
        " GROUP BY i.sha256, i.concept ORDER BY i.sha256, best, i.concept"
    )
    by_sha: dict[str, tuple[Img, str | None]] = {}
    for r in rows:
        if r["sha256"] not in by_sha:
            by_sha[r["sha256"]] = (Img(r["sha256"], r["ext"], r["format"], []), r["tstatus"])
        by_sha[r["sha256"]][0].crawl_concepts.append(r["concept"])
    fresh = [img for img, st in by_sha.values() if st is None]
    retry = [img for img, st in by_sha.values() if st == "retry"]
    return fresh, retry


def offline_answer(group: Group, allowed: set[str]) -> dict[str, Any]:
    """The documented offline stand-in: each image's own crawl concept(s), nothing else."""
    return {"images": [{"index": i, "concepts": [c for c in img.crawl_concepts if c in allowed]}
                       for i, img in enumerate(group.images)]}


def ask_sync(ctx: TagContext, group: Group) -> GroupAnswer:
    """One request through the synchronous client (cache, re-asks on bad JSON, offline twin)."""
    args = ctx.request_args(group)
    res = ctx.llm.generate_structured(
        args.pop("prompt"), args.pop("schema"), **args,
        offline=lambda: offline_answer(group, ctx.allowed),
    )
    if res.ok:
        return GroupAnswer(res.value, res.raw, None, res.usage)
    return GroupAnswer(None, res.raw, f"{res.status}: {res.error}", res.usage)


def chunk(images: list[Img], size: int) -> list[Group]:
    return [Group(images[i:i + size]) for i in range(0, len(images), size)]


def drop_missing(cat: Catalog, ctx: TagContext, images: list[Img], run_id: int,
                 counts: Counter) -> list[Img]:
    """Images whose bytes are in the work dir; the others get a recorded failure (not asked)."""
    present, missing = [], []
    for img in images:
        (present if ctx.wd.image_path(img.sha256, img.ext).is_file() else missing).append(img)
    for img in missing:
        record(cat, ctx, Group([img], alone=True),
               GroupAnswer(None, None, "image file missing from the work dir"),
               [Verdict("failed", None, "image file missing from the work dir")], run_id, counts)
    return present


def ask_all(ctx: TagContext, groups: list[Group], workers: int) -> Iterator[tuple[Group, GroupAnswer]]:
    """(group, answer) in group order; ``workers`` requests in flight (the rate limit holds)."""
    if workers <= 1 or len(groups) <= 1:
        for g in groups:
            yield g, ask_sync(ctx, g)
        return
    from concurrent.futures import ThreadPoolExecutor

    if callable(getattr(ctx.llm, "client", None)):
        # Create the client before the threads: GeminiLLM.client() creates it lazily without a
        # lock, and a client that loses that race is closed under the thread using it.
        ctx.llm.client()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tagging") as ex:
        yield from zip(groups, ex.map(lambda g: ask_sync(ctx, g), groups), strict=True)


def run_tagging(
    catalog: Catalog, llm: BaseLLM, images_per_request: int = 8, batch: bool = False,
    poll_interval: float = 30.0, batch_timeout: float = 24 * 3600.0, workers: int = 1,
) -> Counter:
    """Tag every kept image without tags (see the module docstring); returns the counts.

    ``workers``: synchronous requests in flight at once (answers are recorded in order, each
    request in its own transaction, so a kill loses at most the requests in flight).
    """
    if images_per_request < 1:
        raise StageInputError("--images-per-request must be >= 1")
    template, prompt_sha = load_prompt(*PROMPT)
    ctx = TagContext(catalog.workdir, llm, template, prompt_sha, concept_list(catalog))
    use_batch = batch and not isinstance(llm, OfflineLLM)
    if batch and not use_batch:
        log.info("--batch with --llm offline: answering synchronously (no API involved)")
    params = {"llm": llm.spec, "images_per_request": images_per_request, "batch": use_batch,
              "workers": workers,
              "prompt_sha": prompt_sha, "n_concepts": len(ctx.concepts)}
    counts: Counter = Counter()
    with stage_run(catalog, STAGE, params, llm=llm) as rec:
        counts["images_to_tag"] = len(images_to_tag(catalog)[0])
        phases: list[tuple[str, Callable[[], list[Group]]]] = [
            ("first", lambda: chunk(drop_missing(catalog, ctx, images_to_tag(catalog)[0],
                                                 rec.run_id, counts), images_per_request)),
            ("retry", lambda: [Group([img], alone=True) for img in drop_missing(
                catalog, ctx, images_to_tag(catalog)[1], rec.run_id, counts)]),
        ]
        for phase, groups_fn in phases:
            final = phase == "retry"
            if use_batch:
                from builder.tagging_batch import run_batch_phase

                if not run_batch_phase(catalog, ctx, groups_fn, phase, rec.run_id, counts,
                                       poll_interval, batch_timeout):
                    counts["batch_pending"] = 1
                    break
                continue
            for group, ans in ask_all(ctx, groups_fn(), workers):
                record(catalog, ctx, group, ans,
                       judge(ans, len(group.images), ctx.allowed, final), rec.run_id, counts)
        counts.update(final_counts(catalog))
        rec.counts = dict(counts)
        rec.summary = summary(counts, llm.spec)
    return counts


def final_counts(cat: Catalog) -> dict[str, int]:
    """Tag states over the kept images (what the stage leaves behind)."""
    out: dict[str, int] = {}
    for r in cat.query(
        "SELECT COALESCE(t.status, 'untagged') AS s, COUNT(DISTINCT i.sha256) AS n FROM items i"
        " LEFT JOIN tags t ON t.sha256 = i.sha256 WHERE i.status IN ('ok', 'kept')"
        " AND i.sha256 IS NOT NULL GROUP BY s"
    ):
        out[f"kept_images_{r['s']}"] = int(r["n"])
    return out


def summary(counts: Counter, spec: str) -> str:
    states = {k[12:]: v for k, v in counts.items() if k.startswith("kept_images_")}
    asks = {k: v for k, v in counts.items() if k.startswith(("group_", "alone_"))}
    text = format_summary(
        f"tagging ({spec}): {counts.get('images_to_tag', 0)} image(s) to tag this run",
        {"kept images by tag state": states, "answers per image": asks},
    )
    if counts.get("batch_pending"):
        text += "\n  batch job still running: run the same command again to collect it"
    return text


def build_parser() -> argparse.ArgumentParser:
    p = stage_parser("builder.tagging", __doc__)
    p.add_argument("--images-per-request", type=int, default=8,
                   help="images in one request, keyed by index (default 8)")
    p.add_argument("--workers", type=int, default=4,
                   help="synchronous requests in flight (default 4; the --llm-rpm limit holds)")
    p.add_argument("--batch", action="store_true",
                   help="use the Gemini Batch API (asynchronous, half price; resumable)")
    p.add_argument("--poll-interval", type=float, default=30.0,
                   help="seconds between batch job polls (default 30)")
    p.add_argument("--batch-timeout", type=float, default=24 * 3600.0,
                   help="stop polling after this many seconds; re-run to pick the job up")
    add_llm_args(p)
    return p


def _cli(args: argparse.Namespace) -> int:
    with Catalog.open(args.workdir) as catalog:
        llm = llm_from_args(args, catalog.workdir.llm_cache_path)
        counts = run_tagging(catalog, llm, args.images_per_request, args.batch,
                             args.poll_interval, args.batch_timeout, args.workers)
        report_run(catalog, STAGE)  # its last line says when a batch job is still running
    return 1 if counts.get("batch_pending") else 0


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
