"""The one network-failure policy: :func:`classify` a failure as ``permanent`` (never back
off), ``rate_limit`` (wait) or ``transient`` (retry, bounded); :func:`unreachable` in a second."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

PERMANENT, TRANSIENT, RATE_LIMIT = "permanent", "transient", "rate_limit"

#: how resolvers and HTTP stacks word a failed name lookup (glibc, musl, macOS, hickory/reqwest)
_NO_NAME = ("name or service not known", "temporary failure in name resolution",
            "nodename nor servname", "no address associated with hostname",
            "failed to lookup address", "dns error", "dnserror", "getaddrinfo failed",
            "name resolution")


def name_unresolved(exc: BaseException | str | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a host name that did not resolve."""
    for _ in range(16):
        if isinstance(exc, socket.gaierror) or any(m in str(exc).lower() for m in _NO_NAME):
            return exc is not None
        if not isinstance(exc, BaseException):
            return False
        exc = exc.__cause__ or exc.__context__
    return False


def classify(exc: BaseException | str | None = None, status: int | None = None) -> str:
    """``permanent``, ``rate_limit`` or ``transient`` for an HTTP ``status`` or a failure."""
    if status is not None:
        if status in (202, 429):
            return RATE_LIMIT
        if status in (401, 403, 404):
            return PERMANENT
        return TRANSIENT
    return PERMANENT if name_unresolved(exc) else TRANSIENT


def unreachable(url: str, timeout: float = 2.0) -> str | None:
    """Why ``url``'s host (or the HTTPS proxy in the environment) cannot be reached, or None:
    one TCP connect, at most ``timeout`` seconds after the name is resolved."""
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    parts = urlsplit(proxy or url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.gaierror:
        return f"the name {host} does not resolve (no network, or no DNS)"
    except OSError as e:
        return f"{host}:{port} cannot be reached ({e.strerror or type(e).__name__})"
    return None
