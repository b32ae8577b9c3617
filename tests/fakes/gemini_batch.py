"""Gemini Batch API endpoints for the fake Gemini server (``tests.fakes.gemini.FakeGemini``).

What ``google-genai`` sends in Gemini Developer API mode (read from ``google/genai/batches.py``):

- ``client.batches.create(model=M, src=[InlinedRequest, ...])`` ->
  ``POST /{version}/models/M:batchGenerateContent`` with body
  ``{"batch": {"displayName": ..., "inputConfig": {"requests": {"requests": [
  {"request": {"contents": [...], "generationConfig": {...}}, "metadata": {...}}, ...]}}}}``;
- ``client.batches.get(name="batches/ID")`` -> ``GET /{version}/batches/ID``.

Both answer a long-running-operation shape the client maps to ``BatchJob``: ``name`` at the
top, ``metadata.state`` (``BATCH_STATE_*``), and once done
``metadata.output.inlinedResponses.inlinedResponses`` = ``[{"response": <GenerateContentResponse>,
"metadata": ...} | {"error": {...}, "metadata": ...}]``.

``max_body_bytes`` rejects a create whose body is larger (HTTP 400, as the API does past
its inline limit). Each inlined request is answered by the fake's normal scripting (``push`` queue, then
``respond_with``), as a ``Request`` whose body is the inner request, so a test's responder
serves both the synchronous and the batch path.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.gemini import FakeGemini, Reply, Request, error


@dataclass
class FakeJob:
    name: str
    model: str
    display_name: str
    requests: list[dict]
    polls: int = 0
    state: str = "BATCH_STATE_PENDING"
    output: list[dict] | None = None
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ"))


class FakeBatches:
    """Batch endpoints on a :class:`FakeGemini`; ``polls_before_done`` GETs stay pending/running."""

    def __init__(self, fake: FakeGemini, polls_before_done: int = 1,
                 final_state: str = "BATCH_STATE_SUCCEEDED", max_body_bytes: int | None = None):
        self.fake = fake
        self.polls_before_done = polls_before_done
        self.final_state = final_state
        self.max_body_bytes = max_body_bytes  # the API's inline limit (~20 MB); None: no limit
        self.sizes: list[int] = []  # body size of every create
        self.jobs: dict[str, FakeJob] = {}
        self._lock = threading.Lock()
        fake.add_route("POST", r"^/(?P<version>v1[^/]*)/models/(?P<model>[^/:]+):batchGenerateContent$",
                       self._create, name="batchGenerateContent")
        fake.add_route("GET", r"^/(?P<version>v1[^/]*)/batches/(?P<id>[^/:]+)$",
                       self._get, name="batches.get")

    def _create(self, fake: FakeGemini, req: Request, m: re.Match[str]) -> Reply:
        self.sizes.append(len(req.body))
        if self.max_body_bytes is not None and len(req.body) > self.max_body_bytes:
            return error(400, f"Request payload size exceeds the limit: {self.max_body_bytes} "
                              "bytes.")
        batch = (req.json or {}).get("batch") or {}
        requests = (((batch.get("inputConfig") or {}).get("requests") or {}).get("requests")) or []
        if not requests:
            return error(400, "fake batch: no inlined requests")
        with self._lock:
            name = f"batches/fake{len(self.jobs) + 1}"
            job = FakeJob(name, m.group("model"), batch.get("displayName", ""), requests)
            self.jobs[name] = job
        return Reply(200, self._body(job))

    def _get(self, fake: FakeGemini, req: Request, m: re.Match[str]) -> Reply:
        name = f"batches/{m.group('id')}"
        job = self.jobs.get(name)
        if job is None:
            return error(404, f"fake batch: no job {name}")
        with self._lock:
            job.polls += 1
            if job.polls > self.polls_before_done:
                job.state = self.final_state
            elif job.polls > 1:
                job.state = "BATCH_STATE_RUNNING"
        if job.state == "BATCH_STATE_SUCCEEDED" and job.output is None:
            job.output = [self._answer(fake, job, r) for r in job.requests]
        return Reply(200, self._body(job))

    def _answer(self, fake: FakeGemini, job: FakeJob, inlined: dict) -> dict[str, Any]:
        inner = inlined.get("request") or {}
        sub = Request("POST", f"/batch/{job.name}/models/{job.model}:generateContent", {},
                      json.dumps(inner).encode("utf-8"), time.monotonic(),
                      route="batch.request", params={"model": job.model})
        with fake._lock:
            fake.requests.append(sub)
        reply = fake.next_reply(sub)
        out: dict[str, Any] = {"metadata": inlined.get("metadata")}
        if reply.status == 200:
            out["response"] = reply.body
        else:
            body = reply.body if isinstance(reply.body, dict) else {}
            out["error"] = body.get("error", {"code": reply.status, "message": "fake error"})
        return out

    def _body(self, job: FakeJob) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "model": f"models/{job.model}", "displayName": job.display_name,
            "state": job.state, "createTime": job.created, "updateTime": job.created,
        }
        if job.output is not None:
            meta["output"] = {"inlinedResponses": {"inlinedResponses": job.output}}
        return {"name": job.name, "metadata": meta, "done": job.output is not None}
