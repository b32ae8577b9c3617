"""The Gemini client's HTTP: one ``httpx.Client`` whose every request ends at a total deadline
(:func:`deadline`), since httpx's timeouts bound each socket operation and a trickling answer
would never end; per thread, so each tagging worker has its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_local = threading.local()


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Every HTTP operation of this thread inside must end within ``seconds`` from now."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = None if seconds is None else time.monotonic() + float(seconds)
    _local.seconds = seconds
    try:
        yield
    finally:
        _local.deadline = previous


def _message() -> str:
    return f"the whole request took longer than {_local.seconds:g}s (--llm-timeout)"


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The socket timeout for one operation: the smaller of ``timeout`` and what is left."""
    end = getattr(_local, "deadline", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error(_message())
    return left if timeout is None else min(timeout, left)


def _bounded(op: Any, timeout: float | None, error: type[Exception]) -> Any:
    """``op(socket_timeout)`` within the deadline; a timeout at the deadline says so."""
    try:
        return op(_left(timeout, error))
    except error:
        end = getattr(_local, "deadline", None)
        if end is not None and time.monotonic() >= end:
            raise error(_message()) from None
        raise


class DeadlineStream:
    """An ``httpcore.NetworkStream`` whose operations end at the thread's deadline."""

    def __init__(self, inner: Any):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _bounded(lambda t: self._inner.read(max_bytes, t), timeout, httpcore.ReadTimeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        step = 64 * 1024  # in pieces, so that a slow upload also meets the deadline
        for start in range(0, len(view), step):
            piece = bytes(view[start:start + step])
            _bounded(lambda t, b=piece: self._inner.write(b, t), timeout, httpcore.WriteTimeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> DeadlineStream:
        return DeadlineStream(_bounded(
            lambda t: self._inner.start_tls(ssl_context, server_hostname, t), timeout,
            httpcore.ConnectTimeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend:
    """An ``httpcore.NetworkBackend`` whose streams are :class:`DeadlineStream` s."""

    def __init__(self, inner: Any):
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Any:
        return DeadlineStream(_bounded(lambda t: self._inner.connect_tcp(
            host, port, t, local_address, socket_options), timeout, httpcore.ConnectTimeout))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> Any:
        return DeadlineStream(_bounded(lambda t: self._inner.connect_unix_socket(
            path, t, socket_options), timeout, httpcore.ConnectTimeout))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def make_client(timeout_s: float | None) -> Any:
    """An ``httpx.Client`` (proxies and certificates from the environment, as google-genai's
    own) whose connections, direct or through a proxy, honour :func:`deadline`."""
    client = httpx.Client(timeout=timeout_s, trust_env=True)
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    for transport in transports:  # httpx has no public hook for the network backend
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            raise RuntimeError(f"cannot bound the requests of {type(transport).__name__}: "
                               "httpx/httpcore changed their internals")
        if not isinstance(backend, DeadlineBackend):
            pool._network_backend = DeadlineBackend(backend)
    return client
