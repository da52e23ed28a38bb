"""The SSRF guard: which addresses a fetch may connect to.

A host name is resolved **once**; every address it resolves to must be public, and the
connection then goes to one of those vetted addresses (never a second lookup, so a DNS
answer that changes between check and use — rebinding — cannot redirect the request).
Refused by default: loopback, RFC 1918 / ULA private ranges, link-local (169.254.0.0/16,
where cloud metadata services live, and fe80::/10), CGNAT (100.64.0.0/10), multicast,
unspecified, broadcast, reserved and documentation ranges — that is, everything
:mod:`ipaddress` does not call global — plus IPv4 addresses hidden inside IPv6
(IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible, 6to4 ``2002::/16``, NAT64 ``64:ff9b::/96``).

``allow_private`` lifts the check; ``allowed_hosts`` lifts it for named hosts (exact name,
``*.example.org`` / ``.example.org`` for subdomains, an IP literal, or a CIDR network).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from execengine.errors import BlockedAddressError, ConnectionFailedError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``resolve(host, port)`` -> IP address strings; the seam tests use to fake DNS.
Resolver = Callable[[str, int], list[str]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def system_resolver(host: str, port: int) -> list[str]:
    """Addresses of ``host`` from the system resolver, in its preference order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConnectionFailedError(f"cannot resolve host {host!r}: {exc}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address carried inside an IPv6 one, if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:  # deprecated IPv4-compatible ::a.b.c.d
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def classify(ip: IPAddress) -> str | None:
    """Why ``ip`` is refused ("loopback", "private", ...), or None when it is public."""
    inner = embedded_ipv4(ip)
    if inner is not None:
        why = classify(inner)
        return f"{why} (IPv4 {inner} inside IPv6)" if why else None
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_link_local:
        return "link-local (cloud metadata range)"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "carrier-grade NAT"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "reserved"
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """What the guard allows; build with :meth:`from_config` or directly."""

    allow_private: bool = False
    allowed_hosts: tuple[str, ...] = ()

    def with_hosts(self, hosts: Iterable[str]) -> AddressPolicy:
        return AddressPolicy(self.allow_private, (*self.allowed_hosts, *hosts))

    def host_allowed(self, host: str) -> bool:
        """True when ``host`` (a name or an IP literal) is listed in ``allowed_hosts``."""
        host = host.lower().rstrip(".").strip("[]")
        ip = _parse_ip(host)
        for raw in self.allowed_hosts:
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            if ip is not None and "/" in entry:
                try:
                    if ip in ipaddress.ip_network(entry, strict=False):
                        return True
                except ValueError:
                    pass
                continue
            if entry.startswith("*."):
                entry = entry[1:]
            if entry.startswith("."):
                if host.endswith(entry) or host == entry[1:]:
                    return True
            elif host == entry.strip("[]"):
                return True
        return False

    def vet(self, host: str, port: int, resolver: Resolver = system_resolver) -> list[str]:
        """Resolve ``host`` once and return the addresses to connect to, in order.

        Raises :class:`BlockedAddressError` when any address is refused (a name that mixes
        public and internal addresses is refused whole), :class:`ConnectionFailedError`
        when it does not resolve.
        """
        literal = _parse_ip(host)
        addresses = [host.strip("[]")] if literal is not None else resolver(host, port)
        if not addresses:
            raise ConnectionFailedError(f"host {host!r} resolved to no address")
        if self.allow_private or self.host_allowed(host):
            return addresses
        for text in addresses:
            ip = _parse_ip(text)
            if ip is None:
                raise ConnectionFailedError(f"host {host!r} resolved to {text!r}, not an IP")
            why = classify(ip)
            if why is not None and not self.host_allowed(str(ip)):
                shown = host if literal is not None else f"{host} ({ip})"
                raise BlockedAddressError(
                    f"refused to fetch {shown}: {why} address. Requests to internal "
                    "addresses are blocked; allow them with web.allowed_hosts or "
                    "web.allow_private in config.yaml"
                )
        return addresses


def _parse_ip(text: str) -> IPAddress | None:
    text = text.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
