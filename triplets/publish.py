"""Push a release folder to the Hugging Face Hub (dataset repo), token from the environment."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


class PublishError(RuntimeError):
    """One clear line for the user; the CLI exits with code 2."""


def hub_token() -> str | None:
    for var in TOKEN_VARS:
        if os.environ.get(var):
            return os.environ[var]
    return None


def hub_errors() -> tuple[type[BaseException], ...]:
    """What the Hub client raises for a request refused, failed or not sent (an HTTP status, a
    rejected repo id, offline mode, no connection). Its HTTP library changed across
    ``huggingface_hub`` versions (requests, httpx, httpx2), so each one present is named;
    anything else is a bug and propagates."""
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError

    errors: list[type[BaseException]] = [HfHubHTTPError, HFValidationError, OSError]
    for name in ("httpx", "httpx2"):  # requests' errors are OSErrors
        if importlib.util.find_spec(name) is not None:
            errors.append(importlib.import_module(name).HTTPError)
    return tuple(errors)


def check_release_folder(out: Path) -> None:
    if not out.is_dir():
        raise PublishError(f"--out {out}: not a folder (run `python -m triplets export` first)")
    for need in ("README.md", "build.json"):
        if not (out / need).is_file():
            raise PublishError(f"--out {out}: no {need}; not a release folder")
    if not list(out.glob("triplets/*.parquet")) or not list(out.glob("images/*.parquet")):
        raise PublishError(f"--out {out}: missing triplets/ or images/ parquet shards")


def publish(out: str | Path, repo_id: str, *, private: bool = False,
            revision: str | None = None, message: str = "3XCM release") -> str:
    """Create (if needed) the dataset repo and upload the folder; returns the commit URL."""
    out = Path(out)
    check_release_folder(out)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo-id {repo_id!r}: expected ORG/NAME")
    token = hub_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN (a write token)")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise PublishError("HF_HUB_OFFLINE is set: cannot reach the Hugging Face Hub")
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        info = api.upload_folder(folder_path=str(out), repo_id=repo_id, repo_type="dataset",
                                 revision=revision, commit_message=message,
                                 ignore_patterns=[".*"])
    except hub_errors() as e:  # one line, no token; evaluated only when something was raised
        first = (str(e).splitlines() or [""])[0]
        raise PublishError(f"cannot publish to {repo_id}: {type(e).__name__}: {first}") from e
    return str(getattr(info, "commit_url", info))
