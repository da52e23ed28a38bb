"""A sandbox entry's network namespace of its own (:func:`entry.own_network`), as root and as
an unprivileged uid (a user namespace of its own maps that uid to itself).

Each case runs in a forked child of the test process (no interpreter to start): it enters
the namespace, then reports what it reaches. The negative control is the same probe without
the namespace: the host's listener on another loopback address is reached.
"""

from __future__ import annotations

import encodings.idna  # noqa: F401 - the unprivileged child cannot import it from /root
import json
import os
import socket

import pytest

from execengine.isolation import entry

UNPRIVILEGED = 65534
PR_SET_DUMPABLE = 4


def _probe(uid: int, own: bool, port: int) -> dict:
    """In a forked child: drop to ``uid``, enter the namespace if ``own``, try the host's
    listener and a listener of our own on loopback."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        res: dict = {}
        try:
            os.close(r)
            if uid != 0:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                # as a process started by that uid is (the uid change cleared it): its
                # /proc/self files are its own, so it may write its namespace's maps
                entry.prctl(PR_SET_DUMPABLE, 1)
            if own:
                entry.own_network()
            with open("/proc/self/net/dev") as fh:
                res["ifaces"] = sorted(x.split(":")[0].strip() for x in fh.readlines()[2:])
            try:
                socket.create_connection(("127.0.0.2", port), 2).close()
                res["host"] = "connected"
            except OSError as exc:
                res["host"] = type(exc).__name__
            with socket.create_server(("127.0.0.1", 0)) as own_listener:
                socket.create_connection(own_listener.getsockname(), 2).close()
                res["loopback"] = "up"
        except BaseException as exc:
            res["error"] = f"{type(exc).__name__}: {exc}"
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def _userns_allowed() -> bool:
    try:
        with open("/proc/sys/user/max_user_namespaces") as fh:
            return int(fh.read()) > 0
    except OSError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
@pytest.mark.parametrize("uid", [0, UNPRIVILEGED], ids=["root", "unprivileged"])
def test_only_loopback_is_reachable_from_an_own_network_namespace(uid):
    if uid != 0 and not _userns_allowed():
        pytest.skip("this kernel allows no user namespaces")
    host = socket.create_server(("127.0.0.2", 0))
    try:
        port = host.getsockname()[1]
        control = _probe(uid, False, port)
        inside = _probe(uid, True, port)
    finally:
        host.close()
    assert control.get("host") == "connected", control  # the negative control
    assert "error" not in inside, inside
    assert inside["ifaces"] == ["lo"] and inside["loopback"] == "up", inside
    assert inside["host"] != "connected", inside
