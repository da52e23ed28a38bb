from __future__ import annotations

import ipaddress

import pytest
from _web_httpd import FakeDNS

from execengine.errors import BlockedAddressError, ConnectionFailedError
from execengine.web.guard import AddressPolicy, classify, system_resolver

BLOCKED = {
    "127.0.0.1": "loopback",
    "127.255.0.9": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "link-local",
    "100.64.0.1": "carrier-grade NAT",
    "100.127.255.254": "carrier-grade NAT",
    "0.0.0.0": "unspecified",
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "255.255.255.255": "reserved",
    "240.0.0.1": "reserved",
    "192.0.2.1": "private",  # documentation range
    "::1": "loopback",
    "::": "unspecified",
    "fe80::1": "link-local",
    "fc00::1": "private",
    "fd12:3456::1": "private",
    "ff02::1": "multicast",
    "::ffff:127.0.0.1": "loopback",
    "::ffff:169.254.169.254": "link-local",
    "::ffff:10.0.0.1": "private",
    "::127.0.0.1": "loopback",  # IPv4-compatible
    "2002:7f00:1::": "loopback",  # 6to4 around 127.0.0.1
    "2002:a9fe:a9fe::": "link-local",  # 6to4 around 169.254.169.254
    "64:ff9b::a9fe:a9fe": "link-local",  # NAT64 around 169.254.169.254
}
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111",
          "::ffff:8.8.8.8", "2002:808:808::", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", sorted(BLOCKED))
def test_internal_addresses_are_classified_as_blocked(address: str) -> None:
    why = classify(ipaddress.ip_address(address))
    assert why is not None and why.startswith(BLOCKED[address])


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None
    assert AddressPolicy().vet(address, 80) == [address]


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "169.254.169.254", "[::ffff:127.0.0.1]"])
def test_literal_internal_hosts_are_refused_by_default(host: str) -> None:
    with pytest.raises(BlockedAddressError, match="allowed_hosts or web.allow_private"):
        AddressPolicy().vet(host, 80)


@pytest.mark.parametrize("spelling", ["2130706433", "0x7f000001", "0177.0.0.1", "127.1"])
def test_odd_spellings_of_loopback_resolve_and_are_refused(spelling: str) -> None:
    # the system resolver turns these into 127.0.0.1; the guard checks what they resolve to
    try:
        resolved = system_resolver(spelling, 80)
    except ConnectionFailedError:
        pytest.skip(f"this resolver does not accept {spelling!r}")
    assert resolved == ["127.0.0.1"]
    with pytest.raises(BlockedAddressError, match="loopback"):
        AddressPolicy().vet(spelling, 80)


def test_a_name_resolving_to_any_internal_address_is_refused_whole() -> None:
    dns = FakeDNS({"mixed.test": ["93.184.216.34", "10.0.0.5"]})
    with pytest.raises(BlockedAddressError, match=r"mixed.test \(10.0.0.5\): private"):
        AddressPolicy().vet("mixed.test", 80, dns)
    assert dns.calls == ["mixed.test"]


def test_vet_resolves_once_and_returns_the_vetted_address() -> None:
    dns = FakeDNS({"ok.test": ["93.184.216.34", "1.1.1.1"]})
    assert AddressPolicy().vet("ok.test", 443, dns) == ["93.184.216.34", "1.1.1.1"]
    assert dns.calls == ["ok.test"]


def test_allow_private_lifts_the_check() -> None:
    assert AddressPolicy(allow_private=True).vet("127.0.0.1", 80) == ["127.0.0.1"]


@pytest.mark.parametrize(("entry", "host", "allowed"), [
    ("intranet.test", "intranet.test", True),
    ("INTRANET.test.", "intranet.TEST", True),
    ("intranet.test", "evil-intranet.test", False),
    ("*.corp.test", "a.b.corp.test", True),
    ("*.corp.test", "corp.test", True),
    (".corp.test", "notcorp.test", False),
    ("127.0.0.1", "127.0.0.1", True),
    ("::1", "[::1]", True),
    ("10.0.0.0/8", "10.9.8.7", True),
    ("10.0.0.0/8", "11.0.0.1", False),
])
def test_allowed_hosts_matching(entry: str, host: str, allowed: bool) -> None:
    assert AddressPolicy(allowed_hosts=(entry,)).host_allowed(host) is allowed


def test_allowed_host_name_may_resolve_to_private_addresses() -> None:
    dns = FakeDNS({"intranet.test": ["10.0.0.7"]})
    policy = AddressPolicy(allowed_hosts=("intranet.test",))
    assert policy.vet("intranet.test", 80, dns) == ["10.0.0.7"]
    with pytest.raises(BlockedAddressError):
        AddressPolicy().vet("intranet.test", 80, dns)


def test_allowed_network_covers_resolved_addresses() -> None:
    dns = FakeDNS({"db.test": ["10.1.1.1"]})
    assert AddressPolicy(allowed_hosts=("10.1.0.0/16",)).vet("db.test", 80, dns) == ["10.1.1.1"]


def test_unresolvable_name_is_a_connection_failure() -> None:
    with pytest.raises(ConnectionFailedError, match="cannot resolve"):
        AddressPolicy().vet("nowhere.test", 80, FakeDNS({}))
