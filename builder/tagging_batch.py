"""The tagging stage's Gemini Batch API path: submit, poll, collect, resume by job name.

One phase (``first``: groups of images; ``retry``: single images) is one batch job of inlined
requests (``client.batches.create``). Cache hits are answered before submitting and never
sent. The job's name and its requests (the image hashes of every request, in order) go into
``tag_batch_jobs`` right after creation, so a run killed while the job is queued or running
picks the same job up: it polls (``client.batches.get``) until a terminal state, then
collects the inlined responses, parses each ``response`` text itself (the batch path gives no
``.parsed``), validates it with the same schema and per-image rules as the synchronous path,
stores valid answers in the LLM cache, and records the tags and the job state ``collected`` in
one transaction. A job that ends FAILED, CANCELLED or EXPIRED counts as an error for each of
its requests (first phase: the images are retried alone; retry phase: they end ``failed``).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from builder.catalog import Catalog, utcnow
from builder.llm import LLMRequest, LLMResult
from builder.llm_gemini import response_text, response_tokens
from builder.tagging_rules import (
    Group,
    GroupAnswer,
    Img,
    TagContext,
    apply_answers,
    judge,
    record_rows,
)

log = logging.getLogger(__name__)

SUCCESS = {"JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"}
TERMINAL = SUCCESS | {"JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


def _state(job: Any) -> str:
    st = getattr(job, "state", None)
    return str(getattr(st, "value", st) or "JOB_STATE_UNSPECIFIED")


def pending_job(cat: Catalog, phase: str, model: str, prompt_sha: str) -> Any:
    rows = cat.query(
        "SELECT * FROM tag_batch_jobs WHERE phase=? AND model=? AND prompt_sha=?"
        " AND state != 'collected' ORDER BY submitted_at, job_name LIMIT 1",
        (phase, model, prompt_sha))
    return rows[0] if rows else None


def groups_of_job(cat: Catalog, requests: list[list[str]], alone: bool) -> list[Group]:
    """Rebuild a stored job's requests (image hashes) as groups."""
    out = []
    for shas in requests:
        imgs = []
        for sha in shas:
            rows = cat.query(
                "SELECT im.ext, im.format, i.concept, MIN(i.rank) AS best FROM images im"
                " JOIN items i ON i.sha256 = im.sha256 WHERE im.sha256=? GROUP BY i.concept"
                " ORDER BY best, i.concept", (sha,))
            imgs.append(Img(sha, rows[0]["ext"], rows[0]["format"], [r["concept"] for r in rows]))
        out.append(Group(imgs, alone=alone))
    return out


def run_batch_phase(
    cat: Catalog, ctx: TagContext, groups_fn: Callable[[], list[Group]], phase: str, run_id: int,
    counts: Counter, poll_interval: float, timeout: float,
) -> bool:
    """Resume this phase's uncollected job, then submit what is left; False if still running."""
    llm = ctx.llm
    final = phase == "retry"
    job = pending_job(cat, phase, llm.model, ctx.prompt_sha)
    if job is not None:
        log.info("resuming batch job %s (%s phase)", job["job_name"], phase)
        counts["batch_jobs_resumed"] += 1
        groups = groups_of_job(cat, json.loads(job["requests_json"]), final)
        if not _poll_and_collect(cat, ctx, job["job_name"], groups, final, run_id, counts,
                                 poll_interval, timeout):
            return False
    groups = groups_fn()
    to_send, reqs = [], []
    hits_g, hits_a = [], []
    for g in groups:
        args = ctx.request_args(g)
        req = llm.prepare(args.pop("prompt"), args.pop("schema"), **args)
        hit = llm.lookup(req)
        if hit is not None and hit.ok:
            llm.usage.cache_hits += 1
            hits_g.append(g)
            hits_a.append(GroupAnswer(hit.value, hit.raw))
        else:
            to_send.append(g)
            reqs.append(req)
    if hits_g:
        apply_answers(cat, ctx, hits_g, hits_a, final, run_id, counts)
    if not to_send:
        return True
    name = submit(cat, ctx, to_send, reqs, phase, run_id, counts)
    return _poll_and_collect(cat, ctx, name, to_send, final, run_id, counts, poll_interval, timeout)


def submit(cat: Catalog, ctx: TagContext, groups: list[Group], reqs: list[LLMRequest], phase: str, run_id: int,
           counts: Counter) -> str:
    """Create the batch job of inlined requests and record it before anything else."""
    from google.genai import types

    llm = ctx.llm
    inlined = [
        types.InlinedRequest(contents=llm.contents(r.prompt, r.images),
                             config=llm.request_config(r), metadata={"key": str(i)})
        for i, r in enumerate(reqs)
    ]
    llm._limiter.wait()
    llm.usage.api_calls += 1
    job = llm.client().batches.create(
        model=llm.model, src=inlined,
        config=types.CreateBatchJobConfig(display_name=f"xcm-tagging-{phase}-run{run_id}"),
    )
    with cat.tx() as con:
        con.execute(
            "INSERT INTO tag_batch_jobs (job_name, model, prompt_sha, phase, state, requests_json,"
            " submitted_at, updated_at, run_id) VALUES (?,?,?,?,?,?,?,?,?)",
            (job.name, llm.model, ctx.prompt_sha, phase, _state(job),
             json.dumps([[img.sha256 for img in g.images] for g in groups]), utcnow(), utcnow(),
             run_id))
    counts["batch_jobs_submitted"] += 1
    counts["batch_requests"] += len(reqs)
    log.info("submitted batch job %s: %d request(s)", job.name, len(reqs))
    return str(job.name)


def _poll_and_collect(cat: Catalog, ctx: TagContext, name: str, groups: list[Group], final: bool, run_id: int,
                      counts: Counter, poll_interval: float, timeout: float) -> bool:
    llm = ctx.llm
    start = time.monotonic()
    while True:
        llm._limiter.wait()
        llm.usage.api_calls += 1
        job = llm.client().batches.get(name=name)
        counts["batch_polls"] += 1
        state = _state(job)
        with cat.tx() as con:
            con.execute("UPDATE tag_batch_jobs SET state=?, updated_at=? WHERE job_name=?",
                        (state, utcnow(), name))
        if state in TERMINAL:
            break
        if time.monotonic() - start >= timeout:
            log.warning("batch job %s still %s after %.0f s; re-run to collect it",
                        name, state, timeout)
            return False
        time.sleep(poll_interval)
    answers = collect(ctx, job, groups, state)
    _record_collected(cat, ctx, name, groups, answers, final, run_id, counts)
    return True


def collect(ctx: TagContext, job: Any, groups: list[Group], state: str) -> list[GroupAnswer]:
    """One :class:`GroupAnswer` per group from the job's inlined responses (by metadata key)."""
    llm = ctx.llm
    if state not in SUCCESS:
        return [GroupAnswer(None, None, f"error: batch job ended {state}") for _ in groups]
    dest = getattr(job, "dest", None)
    responses = list(getattr(dest, "inlined_responses", None) or [])
    by_key: dict[int, Any] = {}
    for pos, r in enumerate(responses):
        key = (r.metadata or {}).get("key") if isinstance(r.metadata, dict) else None
        by_key[int(key) if key is not None and str(key).isdigit() else pos] = r
    out = []
    for i, g in enumerate(groups):
        r = by_key.get(i)
        if r is None:
            out.append(GroupAnswer(None, None, "error: no response in the batch output"))
            continue
        if r.error is not None or r.response is None:
            out.append(GroupAnswer(None, None, f"error: {json.dumps(r.error, default=str)[:300]}"))
            continue
        text = response_text(r.response)
        llm.usage.add_tokens(response_tokens(r.response))
        args = ctx.request_args(g)
        req = llm.prepare(args.pop("prompt"), args.pop("schema"), **args)
        value, err = llm.check_text(req, text)
        if err is None:
            llm.store(req, LLMResult("ok", value, text, None, 1, False, req.key))
            out.append(GroupAnswer(value, text))
        else:
            out.append(GroupAnswer(None, text, f"failed: {err}"))
    return out


def _record_collected(cat: Catalog, ctx: TagContext, name: str, groups: list[Group], answers: list[GroupAnswer],
                      final: bool, run_id: int, counts: Counter) -> None:
    """The job's tags and its ``collected`` state in one transaction."""
    with cat.tx() as con:
        for g, ans in zip(groups, answers, strict=True):
            record_rows(con, ctx, g, ans, judge(ans, len(g.images), ctx.allowed, final),
                        run_id, counts)
        con.execute("UPDATE tag_batch_jobs SET state='collected', collected_at=?, updated_at=?"
                    " WHERE job_name=?", (utcnow(), utcnow(), name))
