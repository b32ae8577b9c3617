"""The offline LLM (``--llm offline``): no network, never cached."""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import BaseModel

from builder.llm.base import BaseLLM, LLMConfig
from builder.llm.cache import LLMCache


class OfflineLLM(BaseLLM):
    """Deterministic, no network: the stage's documented offline answer, else a placeholder."""

    provider = "offline"

    def __init__(self, cache: LLMCache | None = None, config: LLMConfig | None = None):
        super().__init__("offline", cache, config)

    def _complete(self, prompt, req, offline):
        if offline is not None:
            answer = offline()
            if isinstance(answer, BaseModel):
                return answer.model_dump_json(), {}
            return json.dumps(answer, ensure_ascii=False), {}
        return json.dumps(schema_example(req.schema, req.input_sha)), {}


def schema_example(schema: type[BaseModel], seed: str) -> Any:
    """A deterministic instance of ``schema``'s JSON schema (strings carry the seed)."""
    js = schema.model_json_schema()
    defs = js.get("$defs", {})
    rng = random.Random(seed)

    def fill(node: dict[str, Any]) -> Any:
        if "$ref" in node:
            return fill(defs[node["$ref"].rsplit("/", 1)[-1]])
        if "enum" in node:
            return rng.choice(node["enum"])
        if "anyOf" in node:
            return fill(next(n for n in node["anyOf"] if n.get("type") != "null"))
        t = node.get("type")
        if t == "object":
            return {k: fill(v) for k, v in node.get("properties", {}).items()}
        if t == "array":
            return [fill(node.get("items", {"type": "string"}))]
        if t == "integer":
            return int(node.get("minimum", 0))
        if t == "number":
            return float(node.get("minimum", 0.0))
        if t == "boolean":
            return False
        return f"offline-{seed[:8]}"

    return fill(js)
