"""The network allow-list: which hosts a script (and its web tools) may reach.

Rules, in order:

1. a host matching ``denied_domains`` is refused (deny wins), compared in the ASCII form
   the resolver looks up, and so is a name that resolves to a denied address or network;
2. an IP literal is allowed only when that address (or a CIDR network holding it) is listed
   in ``allowed_domains``;
3. a name must match ``allowed_domains``: ``example.com`` matches that host only,
   ``*.example.com`` (or ``.example.com``) its subdomains and itself;
4. the name is resolved **once** (the connection goes to a vetted address, so DNS
   rebinding cannot redirect it) and every address must be public, unless the address or
   the exact name is listed (a wildcard never unlocks loopback, private, link-local /
   cloud-metadata or other internal ranges).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from execengine.errors import BlockedAddressError, ConnectionFailedError
from execengine.errors import DomainRefusedError as DomainRefused
from execengine.web.fetch import Fetcher
from execengine.web.guard import AddressPolicy, Resolver, embedded_ipv4, system_resolver


def _norm(host: str) -> str:
    """A host or an entry as it is matched: lower case, no trailing dot or brackets, and a
    name in the ASCII form the resolver looks up (its IDNA form: what ``getaddrinfo``
    resolves for a non-ASCII name, where a soft hyphen, say, is dropped). A name with no
    such form is kept as it is: it matches nothing listed in ASCII, and cannot resolve."""
    text = host.strip().lower().rstrip(".").strip("[]")
    if text.isascii():
        return text
    try:
        return text.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return text


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def matches(host: str, entry: str) -> bool:
    """``host`` (normalised) against one allow/deny entry."""
    entry = _norm(entry)
    if not entry:
        return False
    ip = _ip(host)
    if ip is not None:
        # an IPv4 address written as IPv6 (``::ffff:a.b.c.d``, 6to4, NAT64) is the same
        # host: a denied ``a.b.c.d`` must not be reachable as ``[::ffff:a.b.c.d]``
        inner = embedded_ipv4(ip)
        return _ip_matches(ip, entry) or (inner is not None and _ip_matches(inner, entry))
    if entry.startswith("*."):
        entry = entry[1:]
    if entry.startswith("."):
        return host == entry[1:] or host.endswith(entry)
    return host == entry


def _ip_matches(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, entry: str) -> bool:
    if "/" in entry:
        try:
            return ip in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    other = _ip(entry)
    return other is not None and other == ip


@dataclass(frozen=True)
class DomainPolicy:
    allowed: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()

    @classmethod
    def of(cls, allowed: Iterable[str], denied: Iterable[str]) -> DomainPolicy:
        return cls(tuple(allowed), tuple(denied))

    def explicit_hosts(self) -> tuple[str, ...]:
        """Entries that may unlock internal addresses: exact names, IPs, networks."""
        return tuple(e for e in self.allowed if not _norm(e).startswith(("*.", ".")))

    def check_host(self, host: str) -> None:
        """Raise :class:`DomainRefused` unless ``host`` passes rules 1-3."""
        host = _norm(host)
        if not host:
            raise DomainRefused("empty host")
        for entry in self.denied:
            if matches(host, entry):
                raise DomainRefused(f"{host} is denied ({entry})")
        if _ip(host) is not None:
            if not any(matches(host, e) for e in self.allowed if _ip(_norm(e).split("/")[0])):
                raise DomainRefused(f"{host}: IP addresses must be listed to be reached")
            return
        if not any(matches(host, e) for e in self.allowed):
            raise DomainRefused(f"{host} is not in the allowed domains")

    def check_addresses(self, host: str, addresses: Iterable[str]) -> list[str]:
        """``addresses`` (what ``host`` resolved to), unless one is denied: a denied
        address or network is refused by whatever name reaches it."""
        nets = [e for e in self.denied if _ip(_norm(e).split("/")[0]) is not None]
        out = list(addresses)
        for addr in out:
            hit = next((e for e in nets if matches(_norm(addr), e)), None)
            if hit is not None:
                raise DomainRefused(f"{_norm(host)} resolves to {addr}, which is denied "
                                    f"({hit})")
        return out

    def vet(self, host: str, port: int, resolver: Resolver = system_resolver) -> list[str]:
        """The addresses to connect to for ``host`` (all four rules, and no address
        denied), or :class:`DomainRefused`."""
        self.check_host(host)
        guard = AddressPolicy(allow_private=False, allowed_hosts=self.explicit_hosts())
        try:
            addresses = guard.vet(_norm(host), port, resolver)
        except DomainRefused:
            raise
        except BlockedAddressError as exc:
            raise DomainRefused(f"{_norm(host)}: internal address refused ({exc})") from exc
        except ConnectionFailedError as exc:
            raise DomainRefused(str(exc)) from exc
        return self.check_addresses(host, addresses)


@dataclass(frozen=True)
class DomainGuard(AddressPolicy):
    """The web tools' address guard under an allow-list: the same rules as the proxy
    (checked at every redirect hop, since the fetcher vets each one)."""

    domains: DomainPolicy = DomainPolicy()

    def with_hosts(self, hosts: Iterable[str]) -> DomainGuard:
        return DomainGuard(self.allow_private, (*self.allowed_hosts, *hosts), self.domains)

    def vet(self, host: str, port: int, resolver: Resolver = system_resolver) -> list[str]:
        try:
            self.domains.check_host(host)
        except DomainRefused as exc:
            raise BlockedAddressError(f"refused by the network allow-list: {exc}") from exc
        inner = AddressPolicy(self.allow_private,
                              (*self.allowed_hosts, *self.domains.explicit_hosts()))
        addresses = inner.vet(_norm(host), port, resolver)
        try:
            return self.domains.check_addresses(host, addresses)
        except DomainRefused as exc:
            raise BlockedAddressError(f"refused by the network allow-list: {exc}") from exc


def guard_fetcher(fetcher: Fetcher, domains: DomainPolicy) -> Fetcher:
    """A copy of a :class:`execengine.web.fetch.Fetcher` that obeys ``domains`` too."""
    base = fetcher.policy
    return Fetcher(timeout=fetcher.timeout, max_bytes=fetcher.max_bytes,
                   max_redirects=fetcher.max_redirects, user_agent=fetcher.user_agent,
                   policy=DomainGuard(base.allow_private, base.allowed_hosts, domains),
                   resolver=fetcher.resolver, ssl_context=fetcher.ssl_context)


__all__ = ["DomainGuard", "DomainPolicy", "DomainRefused", "guard_fetcher", "matches"]
