"""Stage ``tagging``: every kept image gets the ordered list of concepts it shows.

The paper's Appendix B, in requests of several images, synchronously or through the Batch API;
resumable, exit 1 when work is left for a later run. docs/release.md, "Stage tagging"."""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from builder import stagekit
from builder.catalog import Catalog
from builder.llm.base import BaseLLM, LLMConfig
from builder.llm.client import llm_for
from builder.llm.offline import OfflineLLM
from builder.prompts import load_prompt
from builder.stagekit import StageInputError
from builder.statuses import USABLE_ITEMS, ConceptStatus
from builder.tagging.rules import (
    REQUEST_BUDGET,
    Group,
    GroupAnswer,
    Img,
    TagContext,
    Verdict,
    answer_of,
    judge,
    record,
    send_estimate,
)
from core import datatables
from core.options import from_args, group, option

log = logging.getLogger(__name__)

STAGE = "tagging"
PROMPT = ("tagging.txt", ("n_images", "last_index", "n_concepts", "concepts"))
TRANSIENT_STOP = 5  # requests in a row with transient errors: the service is down, stop asking
WAIT_NOTE_EVERY = 2.0  # seconds between "waiting on ..." notes on the progress bar


def concept_list(cat: Catalog) -> list[str]:
    """The build's concepts: kept catalog concepts (else data/concepts.txt) plus crawl concepts."""
    kept = [r[0] for r in cat.query("SELECT name FROM concepts WHERE status=? ORDER BY name",
                                    (ConceptStatus.KEPT,))]
    base = kept or datatables.concepts()
    crawl = [r[0] for r in cat.query("SELECT DISTINCT concept FROM items ORDER BY concept")]
    return sorted(set(base) | set(crawl))


def images_to_tag(cat: Catalog, retry_failed: bool = False) -> tuple[list[Img], list[Img]]:
    """(images to ask in groups: untagged, ``transient``, with ``retry_failed`` ``failed``;
    images whose row waits for a retry alone)."""
    rows = cat.query(
        "SELECT i.sha256, im.ext, im.format, i.concept, MIN(i.rank) AS best, t.status AS tstatus"
        " FROM items i JOIN images im ON im.sha256 = i.sha256"
        " LEFT JOIN tags t ON t.sha256 = i.sha256"
        " WHERE i.status IN (?, ?) AND i.sha256 IS NOT NULL"
        " GROUP BY i.sha256, i.concept ORDER BY i.sha256, best, i.concept", USABLE_ITEMS
    )
    by_sha: dict[str, tuple[Img, str | None]] = {}
    for r in rows:
        if r["sha256"] not in by_sha:
            by_sha[r["sha256"]] = (Img(r["sha256"], r["ext"], r["format"], []), r["tstatus"])
        by_sha[r["sha256"]][0].crawl_concepts.append(r["concept"])
    again = {None, "transient"} | ({"failed"} if retry_failed else set())
    fresh = [img for img, st in by_sha.values() if st in again]
    retry = [img for img, st in by_sha.values() if st == "retry"]
    return fresh, retry


def offline_answer(group: Group, allowed: set[str]) -> dict[str, Any]:
    """The documented offline stand-in: each image's own crawl concept(s), nothing else."""
    return {"images": [{"index": i, "concepts": [c for c in img.crawl_concepts if c in allowed]}
                       for i, img in enumerate(group.images)]}


def chunk(images: list[Img], size: int, cost: Callable[[Img], int] | None = None,
          budget: int = REQUEST_BUDGET) -> list[Group]:
    """Consecutive groups of at most ``size`` images and ``budget`` bytes (``cost`` each)."""
    groups: list[Group] = []
    cur: list[Img] = []
    used = 0
    for img in images:
        c = cost(img) if cost is not None else 0
        if cur and (len(cur) >= size or used + c > budget):
            groups.append(Group(cur))
            cur, used = [], 0
        cur.append(img)
        used += c
    if cur:
        groups.append(Group(cur))
    return groups


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


def ask_all(ctx: TagContext, groups: list[Group], workers: int,
            bar: Any = None) -> Iterator[tuple[Group, GroupAnswer]]:
    """(group, answer) in group order, ``workers`` requests in flight; while it waits, ``bar``
    says on what. Closing the iterator cancels the requests not started."""
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FuturesTimeout

    if callable(getattr(ctx.llm, "client", None)):
        ctx.llm.client()  # made here: a client that cannot be made ends the stage, not a request
    started: dict[int, float] = {}

    def ask(i: int, g: Group) -> GroupAnswer:
        """One request through the synchronous client (cache, re-asks, offline twin)."""
        started[i] = time.monotonic()
        try:
            return answer_of(ctx.llm.generate_structured(
                **ctx.request_args(g), offline=lambda: offline_answer(g, ctx.allowed)))
        finally:
            started.pop(i, None)

    ahead = max(1, workers) * 4  # requests asked ahead of the recording: memory stays flat
    pending = iter(enumerate(groups))
    futures: deque[tuple[Group, Any]] = deque()
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="tagging") as ex:
        try:
            while True:
                while len(futures) < ahead and (nxt := next(pending, None)) is not None:
                    futures.append((nxt[1], ex.submit(ask, *nxt)))
                if not futures:
                    return
                g, fut = futures.popleft()
                while True:
                    try:
                        ans = fut.result(timeout=WAIT_NOTE_EVERY)
                        break
                    except FuturesTimeout:
                        if bar is not None:
                            bar.set_postfix_str(waiting_note(started, ctx.llm), refresh=True)
                if bar is not None:
                    bar.set_postfix_str("", refresh=False)
                yield g, ans
        finally:
            for _, fut in futures:
                fut.cancel()


def waiting_note(started: dict[int, float], llm: BaseLLM) -> str:
    """What the stage waits on: the requests in flight and the oldest one's age."""
    now = time.monotonic()
    ages = [now - t for t in list(started.values())]
    if not ages:
        return "waiting for the rate limit (--llm-rpm)"
    limit = getattr(getattr(llm, "config", None), "timeout_s", None)
    cap = f" (HTTP requests end at {limit:g}s, then retry)" if limit else ""
    return f"waiting on {len(ages)} request(s), oldest {max(ages):.0f}s{cap}"


def run_tagging(catalog: Catalog, llm: BaseLLM, images_per_request: int = 8, batch: bool = False,
                poll_interval: float = 30.0, batch_timeout: float = 24 * 3600.0, workers: int = 1,
                batch_job_bytes: int | None = None) -> Counter:
    """Tag every kept image without tags; returns the counts."""
    if images_per_request < 1:
        raise StageInputError("--images-per-request must be >= 1")
    template, prompt_sha = load_prompt(*PROMPT)
    ctx = TagContext(catalog.workdir, llm, template, prompt_sha, concept_list(catalog))
    retry_failed = bool(getattr(llm.config, "retry_failed", False))
    use_batch = batch and not isinstance(llm, OfflineLLM)
    if batch and not use_batch:
        log.info("--batch with --llm offline: answering synchronously (no API involved)")
    params = {"llm": llm.spec, "images_per_request": images_per_request, "batch": use_batch,
              "workers": workers, "prompt_sha": prompt_sha, "n_concepts": len(ctx.concepts)}
    counts: Counter = Counter()
    with stagekit.stage_run(catalog, STAGE, params, llm=llm) as rec:
        todo = images_to_tag(catalog, retry_failed)
        counts["images_to_tag"] = len(todo[0]) + len(todo[1])
        phases: list[tuple[str, Callable[[], list[Group]]]] = [
            ("first", lambda: chunk(drop_missing(catalog, ctx, images_to_tag(
                catalog, retry_failed)[0], rec.run_id, counts), images_per_request,
                lambda img: send_estimate(ctx.wd, img))),
            ("retry", lambda: [Group([img], alone=True) for img in drop_missing(
                catalog, ctx, images_to_tag(catalog)[1], rec.run_id, counts)]),
        ]
        for phase, groups_fn in phases:
            if use_batch:
                from builder.tagging.batch import MAX_JOB_BYTES, run_batch_phase

                if not run_batch_phase(catalog, ctx, groups_fn, phase, rec.run_id, counts,
                                       poll_interval, batch_timeout,
                                       batch_job_bytes or MAX_JOB_BYTES):
                    counts["batch_pending"] = 1
                    break
                continue
            if not ask_phase(catalog, ctx, groups_fn(), phase, workers, rec.run_id, counts):
                break
        counts.update({f"kept_images_{k}": n for k, n in catalog.pairs(  # what is left behind
            "SELECT COALESCE(t.status, 'untagged') AS s, COUNT(DISTINCT i.sha256) FROM items i"
            " LEFT JOIN tags t ON t.sha256 = i.sha256 WHERE i.status IN (?, ?)"
            " AND i.sha256 IS NOT NULL GROUP BY s", USABLE_ITEMS).items()})
        rec.counts = dict(counts)
        rec.summary = summary(counts, llm.spec)
        if counts.get("stopped_transient"):  # the service is down: failed if nothing came
            asks = {k: v for k, v in counts.items() if k.startswith(("group_", "alone_"))}
            stagekit.nothing_succeeded(STAGE, sum(asks.values()), sum(
                v for k, v in asks.items() if not k.endswith("_transient")),
                counts.get("stopped_reason"), "images")
    return counts


def ask_phase(cat: Catalog, ctx: TagContext, groups: list[Group], phase: str, workers: int,
              run_id: int, counts: Counter) -> bool:
    """Ask and record one phase's requests; False when it stopped on transient errors."""
    final = phase == "retry"
    streak = 0
    total = sum(len(g.images) for g in groups)
    with tqdm(total=total, desc=f"tagging ({phase})", unit="image", disable=not groups) as bar:
        answers = ask_all(ctx, groups, workers, bar)
        try:
            for group, ans in answers:
                record(cat, ctx, group, ans, judge(ans, len(group.images), ctx.allowed, final),
                       run_id, counts)
                bar.update(len(group.images))
                streak = streak + 1 if ans.transient else 0
                if streak >= TRANSIENT_STOP:
                    counts["stopped_transient"] = streak
                    counts["stopped_reason"] = ans.error or ""
                    log.warning("%d requests in a row failed with transient errors (last: "
                                "%s): the service looks unavailable; stopping", streak, ans.error)
                    return False
        finally:
            answers.close()
    return True


def summary(counts: Counter, spec: str) -> str:
    states = {k[12:]: v for k, v in counts.items() if k.startswith("kept_images_")}
    asks = {k: v for k, v in counts.items() if k.startswith(("group_", "alone_"))}
    text = stagekit.format_summary(
        f"tagging ({spec}): {counts.get('images_to_tag', 0)} image(s) to tag this run",
        {"kept images by tag state": states, "answers per image": asks})
    if counts.get("stopped_transient"):
        text += (f"\n  stopped asking after {counts['stopped_transient']} requests in a row failed"
                 f" with transient errors (last: {counts.get('stopped_reason')}): the service "
                 "looks unavailable; run the same command again later")
    if states.get("transient"):
        text += (f"\n  {states['transient']} image(s) hit transient errors (429/5xx, timeouts, "
                 "a failed batch job): not their fault; the next run asks for them again")
    if counts.get("batch_pending"):
        text += "\n  batch job still running: run the same command again to collect it"
    return text


@dataclass
class TaggingConfig:
    """The stage's flags (``core.options``)."""

    images_per_request: int = option("images in one request, keyed by index (default 8)", 8)
    workers: int = option("synchronous requests in flight (default 4; the --llm-rpm limit "
                          "holds)", 4)
    batch: bool = option("use the Gemini Batch API (asynchronous, half price; resumable)", False)
    poll_interval: float = option("seconds between batch job polls (default 30)", 30.0)
    batch_timeout: float = option("stop polling after this many seconds; re-run to pick the "
                                  "job up", 24 * 3600.0)
    llm: LLMConfig = group("LLM", LLMConfig)


def build_parser() -> argparse.ArgumentParser:
    return stagekit.stage_parser("builder.tagging.stage", __doc__, TaggingConfig)


def _cli(args: argparse.Namespace) -> int:
    cfg = from_args(TaggingConfig, args)
    llm_for(cfg.llm, None)  # a bad --llm or no key: refused before anything is made
    stagekit.built_before(args.workdir, "python -m builder.crawl")
    with Catalog.open(args.workdir) as catalog:
        llm = llm_for(cfg.llm, catalog.workdir.llm_cache_path)
        counts = run_tagging(catalog, llm, cfg.images_per_request, cfg.batch,
                             cfg.poll_interval, cfg.batch_timeout, cfg.workers)
        stagekit.report_run(catalog, STAGE)  # its last lines say what is left for a later run
    left = counts.get("batch_pending") or counts.get("stopped_transient") or counts.get(
        "kept_images_transient")
    return 1 if left else 0


def main(argv: list[str] | None = None) -> int:
    return stagekit.stage_main(build_parser(), _cli, argv)


if __name__ == "__main__":
    raise SystemExit(main())
