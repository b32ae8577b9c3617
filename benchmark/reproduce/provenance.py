"""Is a result the paper's model? Checkpoint, revision and conventions of a results file: only
the registered paper model's checkpoint (or a repo its authors' conventions load) at its pinned
revision, or a hub commit where none is pinned, counts as real.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from benchmark import registry
from benchmark.results import ResultFile

COMMIT = re.compile(r"^[0-9a-f]{40}$")
FAKE_FAMILIES = {"hash", "fake", "planted", "random"}


@dataclass(frozen=True)
class ModelCheck:
    """What the comparison says about one of our models."""

    model: str
    alias: str | None  # the paper's name of it (None: not a paper model)
    checkpoint: str
    revision: str | None
    conventions: str | None  # the profile its results record (None: not recorded)
    real: bool
    reason: str  # why not real ('' when real)


def recorded_conventions(settings: dict[str, Any]) -> str | None:
    """The conventions profile a result records, or None (none, or a model without profiles)."""
    c = settings.get("conventions")
    if isinstance(c, str):
        return c
    if isinstance(c, dict) and not ("fields" in c and c["fields"] is None):
        return next((c[k] for k in ("profile", "name") if isinstance(c.get(k), str)), None)
    return None


def paper_checkpoints(model: str) -> dict[str, str | None]:
    """Checkpoint -> pinned revision (None: unpinned) that are the paper model ``model``."""
    entry = registry.models().get(model)
    out: dict[str, str | None] = {}
    if entry is not None and entry.kwargs.get("checkpoint"):
        out[entry.kwargs["checkpoint"]] = entry.kwargs.get("revision")
    for d in entry.pinned_downloads() if entry is not None else ():
        if d.repo_type == "model":
            out.setdefault(d.repo, d.revision)
    return out


def why_not_real(res: ResultFile) -> str:
    """'' when ``res`` came from the registered paper model's real checkpoint, else why not."""
    spec = res.model
    entry = registry.models().get(spec.name)
    if entry is None or not entry.paper:
        return "not one of the paper's models"
    if spec.family.lower() in FAKE_FAMILIES:
        return f"a {spec.family} model, not a trained checkpoint"
    known = paper_checkpoints(spec.name)
    if spec.checkpoint not in known:
        return f"checkpoint {spec.checkpoint} is not the paper model's ({', '.join(known)})"
    rev = spec.revision
    if rev is None:
        return "revision unknown"
    if rev.startswith("sha256:"):
        return "weights from a local folder (a fingerprint of its files), not a pinned hub snapshot"
    pinned = known[spec.checkpoint]
    if pinned and rev != pinned:
        return f"revision {rev} is not the pinned {pinned}"
    if not pinned and not COMMIT.match(rev):
        return f"revision {rev} is not a hub commit"
    return ""


def check_model(model: str, alias: str | None, results: list[ResultFile]) -> ModelCheck:
    """One check over every result of ``model`` (real only when all of them are)."""
    reasons = list(dict.fromkeys(r for r in (why_not_real(res) for res in results) if r))
    convs = {c for res in results if (c := recorded_conventions(res.settings)) is not None}
    first = results[0].model
    conv = None if not convs else convs.pop() if len(convs) == 1 else (
        "mixed: " + ", ".join(sorted(convs)))
    return ModelCheck(model, alias, first.checkpoint, first.revision, conv, not reasons,
                      "; ".join(reasons))
