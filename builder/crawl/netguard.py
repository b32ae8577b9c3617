"""The downloader's address guard: :class:`GuardedBackend` resolves the host itself, refuses
non-public addresses and connects to the address it checked; ``allow_hosts`` admits exactly
what was named."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

BLOCK_PREFIX = "blocked_host: "
DNS_PREFIX = "dns_error: "
INVALID_PREFIX = "invalid_url: "


def address_blocked(ip: str) -> str | None:
    """Why ``ip`` must not be contacted (private, loopback, ...), or None if it is public."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    for attr in ("is_unspecified", "is_loopback", "is_link_local", "is_multicast", "is_private",
                 "is_reserved"):
        if getattr(addr, attr):
            return f"{ip} is {attr[3:].replace('_', '-')}"
    if not addr.is_global:
        return f"{ip} is not globally routable"
    return None


def host_key(host: str) -> str:
    """An address in canonical form, a name lower-cased without a trailing dot."""
    name = host.strip().lower().strip("[]").rstrip(".")
    try:
        return str(ipaddress.ip_address(name.split("%", 1)[0]))
    except ValueError:
        return name


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot be a DNS name (RFC 1035 lengths, in ASCII form), or None."""
    name = host.strip("[]").rstrip(".")
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
        return None
    except ValueError:
        pass
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_name = name
    if len(ascii_name) > 253:
        return f"host name is {len(ascii_name)} characters long (DNS allows 253)"
    long = next((label for label in ascii_name.split(".") if len(label) > 63), None)
    if long is not None:
        return f"host name label of {len(long)} characters (DNS allows 63): {long[:20]}..."
    if any(not label for label in ascii_name.split(".")):
        return f"empty label in host name {name[:80]!r}"
    return None


class GuardedBackend:
    """httpcore network backend that checks every resolved address before connecting."""

    def __init__(self, allow_hosts: Iterable[str] = ()):
        import httpcore

        self._inner = httpcore.AnyIOBackend()
        self.allow = {host_key(h) for h in allow_hosts}

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> Any:
        import httpcore

        name = host.lower().strip("[]")
        problem = host_problem(name)
        if problem:
            raise httpcore.ConnectError(f"{INVALID_PREFIX}{problem}")
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as e:
            raise httpcore.ConnectError(f"{DNS_PREFIX}cannot resolve {name}: {e}") from e
        ips = list(dict.fromkeys(info[4][0] for info in infos))
        if host_key(name) not in self.allow:  # exactly what was named, never what it resolves to
            bad = [why for ip in ips if (why := address_blocked(ip))]
            if bad:
                raise httpcore.ConnectError(f"{BLOCK_PREFIX}{name} resolves to {bad[0]}")
        last: Exception | None = None
        for ip in ips:
            try:
                return await self._inner.connect_tcp(ip, port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except httpcore.ConnectError as e:
                last = e
        raise httpcore.ConnectError(f"cannot connect to {name}:{port}: {last}")

    async def connect_unix_socket(self, *a: Any, **kw: Any) -> Any:
        raise RuntimeError("unix sockets are not used by the downloader")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def url_refusal(url: str, allow_hosts: Iterable[str] = ()) -> tuple[str, str] | None:
    """(status, reason) of a URL no download may contact, judged from the URL alone (for
    img2dataset, which has no address guard), or None."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname or ""
    except ValueError as e:
        return "invalid_url", f"{url[:80]!r}: {e}"
    if not host:
        return "invalid_url", f"no host in {url[:80]!r}"
    problem = host_problem(host)
    if problem:
        return "invalid_url", problem
    key = host_key(host)
    if key == "localhost" or key.endswith(".localhost"):  # RFC 6761: always loopback
        why: str | None = f"{key} is loopback"
    else:
        try:
            why = address_blocked(key)
        except ValueError:  # a name, not an address
            return None
    if why and key not in {host_key(h) for h in allow_hosts}:
        return "blocked_host", why
    return None
