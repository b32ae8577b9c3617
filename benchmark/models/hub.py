"""Where model weights come from: local folders, ``$XCM_WEIGHTS_DIR``, the Hugging Face cache.

Every adapter resolves its checkpoint to local files here before any ``from_pretrained``, so a
missing checkpoint fails at once with one line saying where it looked (docs/models.md).
:func:`sync_offline_flag` copies ``HF_HUB_OFFLINE`` into an already imported huggingface_hub.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from benchmark.models.base import ModelSpec, model_spec
from benchmark.registry import RegistryError
from core.hub import hub_unreachable, one_line

log = logging.getLogger(__name__)

WEIGHTS_ENV = "XCM_WEIGHTS_DIR"
_TRUE = {"1", "true", "yes", "on"}


class ModelLoadError(RegistryError, ValueError):
    """A model cannot be loaded (missing library, checkpoint of another layout): one line that
    the CLIs print before exiting with status 2 (a :class:`RegistryError`)."""


def check_choice(what: str, option: str, value: str, choices: Collection[str]) -> str:
    """``value`` when it is one of ``choices``, else one :class:`ModelLoadError` line."""
    if value not in choices:
        raise ModelLoadError(f"{what}: {option} must be one of {', '.join(sorted(choices))}, "
                             f"not {value!r}")
    return value


NORMALIZE_DTYPES = ("float32", "model")  # L2 normalisation in float32, or in the model's dtype


class CheckpointNotFound(ModelLoadError):
    """A model's weights are neither local nor downloadable (one-line message)."""


def require(modules: Sequence[str], extra: str, what: str) -> None:
    """Fail with one line naming the pip extra when a library an adapter needs is missing."""
    import importlib.util

    for m in modules:
        if importlib.util.find_spec(m) is None:
            raise ModelLoadError(
                f"{what}: needs the Python package {m!r}; install it with pip install -e '.[{extra}]'"
            )


def offline() -> bool:
    """True when the environment asks for no hub access."""
    return any(
        os.environ.get(k, "").strip().lower() in _TRUE
        for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def sync_offline_flag() -> bool:
    """Make an already imported ``huggingface_hub`` honour ``HF_HUB_OFFLINE`` now; returns it."""
    off = offline()
    if off:
        try:
            from huggingface_hub import constants
        except ImportError:
            return off
        constants.HF_HUB_OFFLINE = True
    return off


def hub_cache_dir() -> str:
    """The Hugging Face hub cache folder in effect (for messages)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return os.path.join(home, "hub")


def strip_local_prefix(checkpoint: str) -> str:
    return checkpoint[len("local-dir:"):] if checkpoint.startswith("local-dir:") else checkpoint


def is_local(checkpoint: str) -> bool:
    """True when ``checkpoint`` names a local path (``local-dir:``, absolute, ``./``, existing)."""
    c = strip_local_prefix(checkpoint)
    return (
        checkpoint.startswith("local-dir:")
        or c.startswith(("/", "./", "../", "~"))
        or Path(c).expanduser().exists()
    )


def _weights_dir_candidates(repo_id: str) -> list[Path]:
    root = os.environ.get(WEIGHTS_ENV)
    if not root:
        return []
    base = Path(root).expanduser()
    return [base / repo_id, base / repo_id.split("/")[-1]]


def not_found_message(
    what: str, repo_id: str, revision: str | None, reason: str = "", filename: str | None = None,
) -> str:
    """One line: what was looked for, where, and the two ways to provide it."""
    rev = f"@{revision}" if revision else ""
    wd = os.environ.get(WEIGHTS_ENV)
    where = f"{WEIGHTS_ENV}={wd}, " if wd else ""
    mode = "offline (HF_HUB_OFFLINE=1)" if offline() else "online; HF_HUB_OFFLINE=1 stays offline"
    why = f" ({reason})" if reason else ""
    item = f"{repo_id}{rev} file {filename}" if filename else f"{repo_id}{rev}"
    dl = f"hf download {repo_id}{' ' + filename if filename else ''}" + (
        f" --revision {revision}" if revision else "")
    return (
        f"{what}: weights {item} not found{why}; looked in {where}the Hugging Face cache "
        f"{hub_cache_dir()} [{mode}]. Fix: on a machine with access run `{dl} --local-dir "
        f"WEIGHTS/{repo_id}`, copy WEIGHTS here and set {WEIGHTS_ENV}=WEIGHTS; or name the "
        f"local folder as the model's checkpoint (docs/models.md)"
    )


def _reachable(what: str, repo_id: str, revision: str | None, filename: str | None = None,
               ) -> None:
    """Before a download: fail in a second when the hub cannot be reached (no retries)."""
    why = hub_unreachable()
    if why:
        raise CheckpointNotFound(not_found_message(
            what, repo_id, revision, f"the hub cannot be reached: {why}", filename=filename))
    log.info("%s: downloading %s%s from the Hugging Face hub (progress below)", what, repo_id,
             f" {filename}" if filename else "")


def resolve_repo(
    repo_id: str, revision: str | None, *, what: str,
    allow_patterns: Sequence[str] | None = None,
) -> Path:
    """Local folder holding ``repo_id`` at ``revision`` (see the module docstring for order)."""
    if is_local(repo_id):
        p = Path(strip_local_prefix(repo_id)).expanduser()
        if not p.exists():
            raise CheckpointNotFound(f"{what}: local checkpoint {p} does not exist")
        return p
    for cand in _weights_dir_candidates(repo_id):
        if cand.is_dir():
            log.info("%s: using %s from %s", what, repo_id, cand)
            return cand
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    patterns = list(allow_patterns) if allow_patterns else None
    return _cache_then_download(
        what, repo_id, revision, None, lambda local: snapshot_download(
            repo_id, revision=revision, local_files_only=local, allow_patterns=patterns),
        invalid=HFValidationError)


def _cache_then_download(what: str, repo_id: str, revision: str | None, filename: str | None,
                         fetch: Any, invalid: Any = ()) -> Path:
    """``fetch(local_files_only)`` from the local cache, then (online, hub reachable) the hub;
    every miss is one :class:`CheckpointNotFound` line."""
    off = sync_offline_flag()
    try:
        return Path(fetch(True))
    except invalid as e:
        raise CheckpointNotFound(f"{what}: {repo_id!r} is neither a folder nor a hub id ({e})") from e
    except Exception as e:  # noqa: BLE001 - any miss in the local cache
        if off:
            raise CheckpointNotFound(not_found_message(what, repo_id, revision,
                                                       filename=filename)) from e
    _reachable(what, repo_id, revision, filename)
    try:
        return Path(fetch(False))
    except Exception as e:  # noqa: BLE001 - network, auth, missing revision: one line
        raise CheckpointNotFound(
            not_found_message(what, repo_id, revision, one_line(e), filename=filename)) from e


def locate(
    checkpoint: str, revision: str | None, *, what: str,
    allow_patterns: Sequence[str] | None = None,
) -> tuple[Path, str | None]:
    """(local folder, revision to record) of a checkpoint: :func:`resolve_repo`, then
    :func:`effective_revision` of what was found."""
    folder = Path(resolve_repo(checkpoint, revision, what=what, allow_patterns=allow_patterns))
    return folder, effective_revision(checkpoint, revision, folder)


def hub_spec(
    name: str, family: str, checkpoint: str, revision: str | None, *,
    allow_patterns: Sequence[str] | None = None, **fields: Any,
) -> tuple[Path, ModelSpec]:
    """(local folder, :func:`~benchmark.models.base.model_spec`) of a hub-loaded model, whose
    recorded revision is the one found (``fields``: the spec's keyword arguments)."""
    folder, rev = locate(checkpoint, revision, what=f"model {name}", allow_patterns=allow_patterns)
    return folder, model_spec(name, family, checkpoint, rev, **fields)


def resolve_file(repo_id: str, filename: str, revision: str | None, *, what: str) -> Path:
    """One file of a hub repo (or of a local folder / ``$XCM_WEIGHTS_DIR`` tree)."""
    if is_local(repo_id):
        p = Path(strip_local_prefix(repo_id)).expanduser()
        f = p / filename if p.is_dir() else p
        if not f.is_file():
            raise CheckpointNotFound(f"{what}: local weights file {f} does not exist")
        return f
    for cand in _weights_dir_candidates(repo_id):
        if (cand / filename).is_file():
            return cand / filename
    from huggingface_hub import hf_hub_download

    return _cache_then_download(what, repo_id, revision, filename, lambda local: hf_hub_download(
        repo_id, filename, revision=revision, local_files_only=local))


def read_safetensors(folder: Path, exclude: tuple[str, ...] = ("adapter_model",)) -> dict[str, Any]:
    """All tensors of a folder's ``*.safetensors`` files (top level only)."""
    from safetensors.torch import load_file

    files = sorted(f for f in folder.glob("*.safetensors") if not f.name.startswith(exclude))
    if not files:
        raise ModelLoadError(f"{folder}: no *.safetensors weights")
    out: dict[str, Any] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


def folder_fingerprint(path: Path, patterns: Sequence[str] = ("*.json", "*.safetensors", "*.bin", "*.pt")) -> str:
    """sha256 over a local checkpoint's weight/config files: the revision of a local folder."""
    h = hashlib.sha256()
    files = sorted({f for pat in patterns for f in (path.rglob(pat) if path.is_dir() else [path])})
    for f in files:
        if not f.is_file():
            continue
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return "sha256:" + h.hexdigest()[:16]


_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def effective_revision(checkpoint: str, revision: str | None, folder: Path) -> str | None:
    """The revision to record for ``folder``: a cache snapshot's commit, the pinned revision
    of a ``$XCM_WEIGHTS_DIR`` tree, else a fingerprint of the files."""
    if is_local(checkpoint):
        return revision or folder_fingerprint(folder)
    folder = Path(folder)
    snap = folder if folder.is_dir() else folder.parent
    if snap.parent.name == "snapshots" and _COMMIT.match(snap.name):
        if revision and _COMMIT.match(revision) and revision != snap.name:
            log.warning("revision %s resolved to snapshot %s", revision, snap.name)
        return snap.name
    # a $XCM_WEIGHTS_DIR tree: the pinned revision is assumed; unpinned, fingerprint the files
    return revision or folder_fingerprint(folder)
