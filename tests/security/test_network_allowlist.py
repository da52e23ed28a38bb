"""``policy.network: allowlist`` end to end: a script (and its terminal commands and web
tools) reaches listed hosts through the host's proxy and nothing else. The targets are
servers this test owns on loopback (the machine has no internet: an outside target would
prove nothing). Level ``none`` is the negative control: nothing confines the script's own
sockets there."""

from __future__ import annotations

import json
import socket

import pytest

from execengine.config import Config
from execengine.engine.core import Engine

from .conftest import level_params

LEVEL = level_params()


SCRIPT = """
import json, os, socket, urllib.request
from hermes_tools import terminal, web_extract
res = {{"proxy": os.environ.get("HTTPS_PROXY", "")}}
with open("/proc/net/dev") as fh:  # the interfaces of the script's network namespace
    res["ifaces"] = sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except Exception as e:
        return type(e).__name__ + ": " + str(e)
res["listed"] = get("http://localhost:{port}/listed")
res["unlisted"] = get("http://127.0.0.1:{port}/unlisted")
try:
    socket.create_connection(("127.0.0.1", {port}), 3).close()
    res["direct"] = "connected"
except OSError as e:
    res["direct"] = type(e).__name__
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("127.0.0.1", {udp}))
    res["udp"] = "sent"
except OSError as e:
    res["udp"] = type(e).__name__
try:
    inbound = socket.socket()
    inbound.listen(1)  # an unbound listener: an ephemeral port on every address
    res["listen"] = inbound.getsockname()[1]
except OSError as e:
    res["listen"] = type(e).__name__
res["terminal"] = terminal("python3 -c \\"import urllib.request; "
                           "print(urllib.request.urlopen('http://localhost:{port}/term')"
                           ".read().decode())\\"")["output"]
ext = web_extract(["http://localhost:{port}/web", "http://127.0.0.1:{port}/webip"])
res["web"] = [r.get("error") or r.get("content") for r in ext["results"]]
print(json.dumps(res))
"""


@pytest.mark.parametrize("level", LEVEL)
def test_only_listed_domains_are_reachable(level, origin, tmp_path):
    port, hits = origin
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    config = Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "policy.network": "allowlist", "policy.allowed_domains": ["localhost"],
        "approvals.mode": "allow"})
    try:
        with Engine(config) as engine:
            r = engine.execute(SCRIPT.format(port=port, udp=udp.getsockname()[1]),
                               cwd=str(tmp_path))
        assert r.status == "success", (r.error, r.output)
        res = json.loads(r.output.strip().splitlines()[-1])
        try:
            datagram = udp.recv(16) == b"x"
        except BlockingIOError:
            datagram = False
    finally:
        udp.close()
    assert res["proxy"].startswith("http://127.0.0.1:")
    assert "REACHED" in res["listed"], res
    assert "REACHED" in res["web"][0], res
    assert "allow-list" in res["web"][1], res  # web tools obey the same list
    assert "/unlisted" not in hits and "403" in res["unlisted"], res
    if level == "none":  # the negative control: the script's own sockets are free
        assert res["direct"] == "connected" and datagram, res
        return
    assert res["direct"] != "connected", res
    assert not datagram, res  # checked where it counts: nothing arrived on the host
    assert "REACHED" in res["terminal"], res  # a sandboxed command uses the proxy too
    # its own network namespace: only a loopback, the proxy bridged in from the host
    # (a listener there is unreachable from the host's network)
    assert res["ifaces"] == ["lo"], res
    if level == "restricted":  # and still Landlock's and seccomp's rules: no UDP, no listener
        assert res["udp"] != "sent" and res["listen"] == "PermissionError", res


FETCH = """
import urllib.request
print(urllib.request.urlopen("http://localhost:{port}/listed", timeout=10).read().decode())
"""


@pytest.mark.parametrize("level", LEVEL)
def test_a_sessions_cells_keep_their_proxy_bridge(level, origin, tmp_path):
    """The host sweeps a session's cgroup after every cell, sparing what the sandbox was
    made of when the kernel started: the proxy bridge too, so the next cell still gets
    out through it."""
    port, _ = origin
    config = Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "policy.network": "allowlist", "policy.allowed_domains": ["localhost"]})
    with Engine(config) as engine:
        for _ in range(3):
            r = engine.execute(FETCH.format(port=port), cwd=str(tmp_path), session="s")
            assert r.status == "success", (r.error, r.stderr)
            assert r.output.strip() != "", r
