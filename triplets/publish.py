"""Push a release folder to the Hugging Face Hub in one commit that deletes only files our
previous publish's marker names: no old shard stays, no file we did not write is deleted.
``HF_ENDPOINT`` (read at call time) or ``endpoint=`` names another Hub.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import Any

from core.files import OWNER_MARKER, read_marker, sha256_file, sha256_text

log = logging.getLogger(__name__)

#: the kind in the marker a publish leaves on the repo
HUB_KIND = "3xcm-hub-release"

TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


class PublishError(RuntimeError):
    """One clear line for the user; the CLI exits with code 2."""


def hub_token() -> str | None:
    for var in TOKEN_VARS:
        if os.environ.get(var):
            return os.environ[var]
    return None


def hub_errors() -> tuple[type[BaseException], ...]:
    """What the Hub client raises for a request refused, failed or not sent, with whichever
    HTTP library (requests, httpx) this ``huggingface_hub`` uses; anything else propagates."""
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


def release_files(out: Path) -> list[str]:
    """The folder's files as repo paths (POSIX), hidden files and folders left out."""
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                  if p.is_file() and not any(part.startswith(".")
                                             for part in p.relative_to(out).parts))


def check_card_links(out: Path) -> None:
    """A relative ``license_link`` in the card must name a file of the release."""
    import yaml

    text = (out / "README.md").read_text(encoding="utf-8", errors="replace")
    try:
        meta = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else None
    except yaml.YAMLError as e:
        first = (str(e).splitlines() or [""])[0]
        raise PublishError(f"--out {out}: README.md front matter is not YAML ({first})") from e
    link = meta.get("license_link") if isinstance(meta, dict) else None
    if isinstance(link, str) and "://" not in link and not (out / link).is_file():
        raise PublishError(f"--out {out}: the card's license_link {link!r} is not in the folder "
                           "(export it again with `python -m triplets export`)")


def remote_marker(api: Any, repo_id: str, revision: str | None, remote: list[str]
                  ) -> dict | None:
    """The repo's marker of a release we published, or None (none, or not ours)."""
    if OWNER_MARKER not in remote:
        return None
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    url = hf_hub_url(repo_id, OWNER_MARKER, repo_type="dataset", revision=revision,
                     endpoint=api.endpoint)
    resp = get_session().get(url, headers=build_hf_headers(token=api.token),
                             follow_redirects=True)
    resp.raise_for_status()
    try:
        obj = json.loads(resp.content)
    except ValueError:
        return None
    if (not isinstance(obj, dict) or obj.get("kind") != HUB_KIND
            or not isinstance(obj.get("files"), dict)):
        return None
    return obj


def hub_marker(out: Path, local: list[str]) -> bytes:
    """The marker this publish leaves on the repo: every file it wrote, and the fingerprint."""
    files = {p: sha256_file(out / p) for p in local}
    mine = read_marker(out)
    fingerprint = (mine or {}).get("fingerprint") or (
        "sha256:" + sha256_text(json.dumps(files, sort_keys=True)))
    return (json.dumps({"kind": HUB_KIND, "fingerprint": fingerprint, "files": files},
                       indent=2, sort_keys=True) + "\n").encode("utf-8")


def replace_release(api: Any, out: Path, repo_id: str, revision: str | None,
                    message: str) -> Any:
    """One commit adding the folder's files and deleting those our marker names that the
    release no longer has; a file we did not write is never deleted."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    local = release_files(out)
    remote = api.list_repo_files(repo_id, repo_type="dataset", revision=revision)
    marker = remote_marker(api, repo_id, revision, remote)
    ours = set(marker["files"]) if marker is not None else set()
    gone = sorted((set(remote) & ours) - set(local) - {".gitattributes", OWNER_MARKER})
    kept = sorted(set(remote) - set(local) - set(gone) - {".gitattributes", OWNER_MARKER})
    if kept:
        why = ("the repo has no marker of a release we published" if marker is None
               else "no earlier publish of ours wrote them")
        log.warning("%s: keeping %d file(s) this release does not have (%s): %s", repo_id,
                    len(kept), why, ", ".join(kept[:5]) + (" ..." if len(kept) > 5 else ""))
    ops: list[Any] = [CommitOperationDelete(path_in_repo=p) for p in gone]
    ops += [CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(out / p)) for p in local]
    ops.append(CommitOperationAdd(path_in_repo=OWNER_MARKER,
                                  path_or_fileobj=hub_marker(out, local)))
    log.info("publishing %d files to %s, deleting %d that our earlier publish wrote and the "
             "release no longer has", len(local), repo_id, len(gone))
    return api.create_commit(repo_id, ops, repo_type="dataset", revision=revision,
                             commit_message=message)


def publish(out: str | Path, repo_id: str, *, private: bool = False,
            revision: str | None = None, message: str = "3XCM release",
            endpoint: str | None = None) -> str:
    """Create (if needed) the dataset repo and replace the release in it; the commit URL."""
    out = Path(out)
    check_release_folder(out)
    check_card_links(out)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo-id {repo_id!r}: expected ORG/NAME")
    token = hub_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN (a write token)")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise PublishError("HF_HUB_OFFLINE is set: cannot reach the Hugging Face Hub")
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        info = replace_release(api, out, repo_id, revision, message)
    except hub_errors() as e:  # one line, no token; evaluated only when something was raised
        first = (str(e).splitlines() or [""])[0]
        raise PublishError(f"cannot publish to {repo_id}: {type(e).__name__}: {first}") from e
    except ValueError as e:  # the Hub rejected the card's metadata (huggingface_hub's words)
        if not str(e).startswith("Invalid metadata in README.md"):
            raise
        why = " ".join(str(e).split())
        raise PublishError(f"cannot publish to {repo_id}: the Hub rejected the card: {why}") from e
    return str(getattr(info, "commit_url", info))
