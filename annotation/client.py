"""The Label Studio server (``label-studio-sdk`` 2.x): connect, export a project, list users.

Settings come from the environment only (``LABEL_STUDIO_URL``, ``LABEL_STUDIO_API_KEY``); the
key never goes into logs, the catalog or exports. A missing setting, an unreachable server or
a rejected key raises :class:`AnnotationError` with one line saying what to do.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)

URL_ENV = "LABEL_STUDIO_URL"
KEY_ENV = "LABEL_STUDIO_API_KEY"


class AnnotationError(Exception):
    """A user-facing error of the annotation commands (one line; CLI exit code 2)."""


@dataclass(frozen=True)
class Connection:
    """An authenticated SDK client and the server it talks to (URL without credentials)."""

    client: Any
    server: str
    user_email: str


def server_url(url: str) -> str:
    """The server URL as recorded in the catalog: no user info, no trailing slash."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AnnotationError(f"{URL_ENV} must be an http(s) URL like http://127.0.0.1:8080, got {url!r}")
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def connect(url: str | None = None, api_key: str | None = None, timeout: float = 30.0) -> Connection:
    """Connect with the SDK and check the key by asking the server who we are."""
    import httpx
    from label_studio_sdk.core.api_error import ApiError

    url = url if url is not None else os.environ.get(URL_ENV, "")
    api_key = api_key if api_key is not None else os.environ.get(KEY_ENV, "")
    if not url.strip():
        raise AnnotationError(f"set {URL_ENV} to the Label Studio server, e.g. http://127.0.0.1:8080")
    if not api_key.strip():
        raise AnnotationError(
            f"set {KEY_ENV} to your Label Studio access token (Account & Settings > Access Token)"
        )
    server = server_url(url)
    unreachable = (f"cannot reach Label Studio at {server} ({{}}); is the server running and "
                   f"{URL_ENV} right?")
    try:  # a quick probe first: the SDK would retry a refused connection for seconds
        httpx.get(f"{server}/health", timeout=min(timeout, 10.0))
    except httpx.HTTPError as exc:
        raise AnnotationError(unreachable.format(type(exc).__name__)) from None
    from label_studio_sdk import LabelStudio

    client = LabelStudio(base_url=server, api_key=api_key.strip(), timeout=timeout)
    try:
        me = client.users.whoami()
    except (httpx.TransportError, OSError) as exc:
        raise AnnotationError(unreachable.format(type(exc).__name__)) from None
    except ApiError as exc:
        if exc.status_code in (401, 403):
            raise AnnotationError(
                f"Label Studio at {server} rejected {KEY_ENV} (HTTP {exc.status_code}); use a valid "
                "legacy token or personal access token"
            ) from None
        raise AnnotationError(f"Label Studio at {server} answered HTTP {exc.status_code}") from None
    log.info("connected to Label Studio at %s as %s", server, me.email)
    return Connection(client=client, server=server, user_email=str(me.email or me.username or me.id))


def download_export(client: Any, pid: int, all_tasks: bool = False) -> bytes:
    """The raw JSON export of a project (with ``all_tasks``, also tasks nobody annotated)."""
    return b"".join(
        client.projects.exports.download_sync(
            pid, export_type="JSON", download_all_tasks=all_tasks
        )
    )


def user_names(client: Any) -> dict[int, str]:
    """``{user id: e-mail (or username)}`` of every user the key can see."""
    return {int(u.id): str(u.email or u.username or u.id) for u in client.users.list()}
