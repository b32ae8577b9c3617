"""The tagging stage's Gemini Batch API path: jobs of at most :data:`MAX_JOB_BYTES`, recorded in
``tag_batch_jobs`` before polling (a killed run picks them up), answers judged as on the
synchronous path. docs/release.md, "Stage tagging"."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from builder.catalog import Catalog
from builder.llm.base import LLMRequest, LLMResult, LLMSetupError
from builder.llm.gemini import block_reason, response_text, response_tokens
from builder.tagging.rules import (
    Group,
    GroupAnswer,
    Img,
    TagContext,
    apply_answers,
    judge,
    record_rows,
)
from core.provenance import utcnow

log = logging.getLogger(__name__)

SUCCESS = {"JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"}
TERMINAL = SUCCESS | {"JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}
MAX_JOB_BYTES = 18_000_000  # inlined requests per job (the API's limit: about 20 MB in all)
REQUEST_OVERHEAD = 2048  # JSON around one request: generation config, schema, metadata


def _state(job: Any) -> str:
    st = getattr(job, "state", None)
    return str(getattr(st, "value", st) or "JOB_STATE_UNSPECIFIED")


def request_bytes(req: LLMRequest) -> int:
    """What one inlined request adds to a job: its images in base64, the prompt, the JSON."""
    images = sum((len(im.data) + 2) // 3 * 4 for im in req.images)
    return images + len(req.prompt.encode("utf-8")) + REQUEST_OVERHEAD


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
    counts: Counter, poll_interval: float, timeout: float, max_job_bytes: int = MAX_JOB_BYTES,
) -> bool:
    """Resume this phase's uncollected jobs, then submit what is left; False if still running."""
    llm = ctx.llm
    final = phase == "retry"
    rows = cat.query("SELECT * FROM tag_batch_jobs WHERE phase=? AND model=? AND prompt_sha=?"
                     " AND state != 'collected' ORDER BY submitted_at, job_name",
                     (phase, llm.model, ctx.prompt_sha))  # not collected, in submission order
    if rows:
        log.info("resuming %d batch job(s) of the %s phase", len(rows), phase)
        counts["batch_jobs_resumed"] += len(rows)
        resumed = [(r["job_name"], groups_of_job(cat, json.loads(r["requests_json"]), final))
                   for r in rows]
        if not poll_and_collect(cat, ctx, resumed, final, run_id, counts, poll_interval,
                                timeout):
            return False
    hits_g, hits_a = [], []
    jobs: list[tuple[str, list[Group]]] = []
    part_g: list[Group] = []
    part_r: list[LLMRequest] = []
    used = 0

    def send() -> None:
        """Submit the job being filled; only its groups are kept (the bytes are let go)."""
        try:
            jobs.append((submit(cat, ctx, part_g, part_r, phase, run_id, counts), list(part_g)))
        except (ModuleNotFoundError, LLMSetupError):
            raise
        except Exception as exc:  # noqa: BLE001 - after the retries: judged per image
            log.warning("batch job of %d request(s) not created: %s", len(part_r), exc)
            why = f"error: batch job not created: {type(exc).__name__}: {exc}"[:500]
            apply_answers(cat, ctx, list(part_g), [GroupAnswer(
                None, None, why, transient=llm.transient(exc)) for _ in part_g], final, run_id,
                counts)
        part_g.clear()
        part_r.clear()

    # Streamed: a job is submitted as soon as the next request would not fit in it, so the
    # phase holds one job's image bytes at a time, not the whole pool's; consecutive requests
    # fill a job up to max_job_bytes (a request over it is a job of its own).
    for g in groups_fn():
        req = llm.prepare(**ctx.request_args(g))
        hit = llm.lookup(req)
        if hit is not None and hit.ok:
            llm.usage.cache_hits += 1
            hits_g.append(g)
            hits_a.append(GroupAnswer(hit.value, hit.raw))
            continue
        size = request_bytes(req)
        if part_r and used + size > max_job_bytes:
            send()
        if not part_r:
            used = 0
        part_g.append(g)
        part_r.append(req)
        used += size
    if part_r:
        send()
    if hits_g:
        apply_answers(cat, ctx, hits_g, hits_a, final, run_id, counts)
    if not jobs:
        return True
    return poll_and_collect(cat, ctx, jobs, final, run_id, counts, poll_interval, timeout)


def submit(cat: Catalog, ctx: TagContext, groups: list[Group], reqs: list[LLMRequest],
           phase: str, run_id: int, counts: Counter) -> str:
    """Create one batch job of inlined requests and record it before anything else."""
    from google.genai import types

    llm = ctx.llm
    inlined = [
        types.InlinedRequest(contents=llm.contents(r.prompt, r.images),
                             config=llm.request_config(r), metadata={"key": str(i)})
        for i, r in enumerate(reqs)
    ]
    llm.usage.api_calls += 1
    client = llm.client()
    job = llm.call_api(lambda: client.batches.create(
        model=llm.model, src=inlined,
        config=types.CreateBatchJobConfig(display_name=f"xcm-tagging-{phase}-run{run_id}"),
    ), "batches.create")
    with cat.tx() as con:
        con.execute(
            "INSERT INTO tag_batch_jobs (job_name, model, prompt_sha, phase, state, requests_json,"
            " submitted_at, updated_at, run_id) VALUES (?,?,?,?,?,?,?,?,?)",
            (job.name, llm.model, ctx.prompt_sha, phase, _state(job),
             json.dumps([[img.sha256 for img in g.images] for g in groups]), utcnow(), utcnow(),
             run_id))
    counts["batch_jobs_submitted"] += 1
    counts["batch_requests"] += len(reqs)
    log.info("submitted batch job %s: %d request(s), about %d bytes", job.name, len(reqs),
             sum(request_bytes(r) for r in reqs))
    return str(job.name)


def poll_and_collect(cat: Catalog, ctx: TagContext, jobs: list[tuple[str, list[Group]]],
                     final: bool, run_id: int, counts: Counter, poll_interval: float,
                     timeout: float) -> bool:
    """Poll every job until it ends, collecting each as it does; False when ``timeout`` passes
    with jobs still running (the next run picks them up)."""
    start = time.monotonic()
    left = list(jobs)
    while left:
        running = []
        for name, groups in left:
            state, job = _poll(cat, ctx, name, counts)
            if state in TERMINAL:
                _record_collected(cat, ctx, name, groups, collect(ctx, job, groups, state),
                                  final, run_id, counts)
            else:
                running.append((name, groups))
        left = running
        if not left:
            return True
        waited = time.monotonic() - start
        if waited >= timeout:
            log.warning("%d batch job(s) still running after %.0f s; re-run to collect them",
                        len(left), timeout)
            return False
        log.info("waiting on %d batch job(s) (%s), %.0f s so far", len(left),
                 ", ".join(n for n, _ in left[:3]), waited)
        time.sleep(poll_interval)
    return True


def _poll(cat: Catalog, ctx: TagContext, name: str, counts: Counter) -> tuple[str, Any]:
    """(state, job) of one job; a poll that fails after the retries counts as still running."""
    llm = ctx.llm
    llm.usage.api_calls += 1
    counts["batch_polls"] += 1
    client = llm.client()
    try:
        job = llm.call_api(lambda: client.batches.get(name=name), "batches.get")
    except (ModuleNotFoundError, LLMSetupError):
        raise
    except Exception as exc:  # noqa: BLE001 - the job lives on the server; poll again later
        log.warning("batch job %s: poll failed (%s); polling again", name, exc)
        return "JOB_STATE_UNKNOWN", None
    state = _state(job)
    with cat.tx() as con:
        con.execute("UPDATE tag_batch_jobs SET state=?, updated_at=? WHERE job_name=?",
                    (state, utcnow(), name))
    return state, job


def collect(ctx: TagContext, job: Any, groups: list[Group], state: str) -> list[GroupAnswer]:
    """One :class:`GroupAnswer` per group from the job's inlined responses (by metadata key)."""
    llm = ctx.llm
    if state not in SUCCESS:
        return [GroupAnswer(None, None, f"error: batch job ended {state}", transient=True)
                for _ in groups]
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
            out.append(GroupAnswer(None, None, "error: no response in the batch output",
                                   transient=True))
            continue
        if r.error is not None or r.response is None:
            err = r.error
            code = err.get("code") if isinstance(err, dict) else getattr(err, "code", None)
            out.append(GroupAnswer(None, None, f"error: {json.dumps(r.error, default=str)[:300]}",
                                   transient=not isinstance(code, int) or code in (408, 429)
                                   or code >= 500))
            continue
        text = response_text(r.response)
        llm.usage.add_tokens(response_tokens(r.response))
        block = block_reason(r.response)
        if block is not None:
            out.append(GroupAnswer(None, text, f"refused: {block}", refused=True))
            continue
        req = llm.prepare(**ctx.request_args(g))
        value, err = llm.check_text(req, text)
        if err is None:
            llm.store(req, LLMResult("ok", value, text, None, 1, False, req.key))
            out.append(GroupAnswer(value, text))
        else:
            out.append(GroupAnswer(None, text, f"failed: {err}"))
    return out


def _record_collected(cat: Catalog, ctx: TagContext, name: str, groups: list[Group],
                      answers: list[GroupAnswer], final: bool, run_id: int, counts: Counter) -> None:
    """The job's tags and its ``collected`` state in one transaction."""
    with cat.tx() as con:
        for g, ans in zip(groups, answers, strict=True):
            record_rows(con, ctx, g, ans, judge(ans, len(g.images), ctx.allowed, final),
                        run_id, counts)
        con.execute("UPDATE tag_batch_jobs SET state='collected', collected_at=?, updated_at=?"
                    " WHERE job_name=?", (utcnow(), utcnow(), name))
