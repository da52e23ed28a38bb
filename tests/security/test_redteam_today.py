"""Red team of three changes that landed on 2026-12-01, attacked as a hostile script would.

1. ``restricted`` with ``policy.network: allowlist`` runs in a network namespace of its own,
   the host's proxy bridged in by a child of the workload. The script probes the host's
   loopback and abstract Unix sockets, the bridge process itself (its /proc, ptrace), leaves
   a daemon behind, floods the bridge with connections, and asks ``terminal`` what it sees;
   one launcher shared by an allow-list engine and a network-off engine must never hand one
   the other's warm entry.
2. The sandbox acts in its working directory as the folder's owner (an id-mapped bind),
   never as more: private files of another uid there (root's 0600 file in a user's
   project) stay private (read directly, through a hard link, a symlink, ``terminal`` and
   the file tools), a setuid file cannot be left behind, no ACL entry is left.
3. The child's RPC client keeps a reply buffered until handed on: a tool call made from a
   signal handler is answered. (Under storms of raising handlers, threads and asyncio
   tasks calling, no call got another call's reply, but calls often went unanswered: an
   open finding, not deterministic enough for a test yet; see docs/reliability.md.)

Level ``none`` is each probe's negative control: there nothing confines the script, and the
same probe sees the leak.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterator

import pytest

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.policy import ToolPolicy
from execengine.proctree import RUN_TOKEN_VAR, carriers
from execengine.registry import ToolRegistry

from .conftest import ATTEMPT, _uid_processes, level_params, wait_until

LEVEL = level_params()
NONE_OR_RESTRICTED = [p for p in LEVEL if p.values[0] in ("none", "restricted")]


def _last_json(output: str) -> dict:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"the script printed no result: {output[-2000:]}")


@pytest.fixture
def abstract_listener():
    """A host process's abstract Unix socket; records whether anyone connected."""
    name = "\0execengine-rt-" + os.urandom(6).hex()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(name)
    listener.listen(8)
    listener.settimeout(0.1)
    got: list[bytes] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    got.append(conn.recv(16))
                except OSError:
                    got.append(b"")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield name[1:], got
    stop.set()
    t.join(5)
    listener.close()


def _net_config(level: str, network: str = "allowlist", **over: object) -> Config:
    return Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "policy.network": network, "policy.allowed_domains": ["localhost"],
        "approvals.mode": "allow", "code_execution.timeout": 30, **over})


# -- 1. restricted + allowlist: the network namespace and the bridge --------------------

NET_PROBE = r"""
import ctypes, json, os, socket, subprocess, sys, time, urllib.request
res = {"uid": os.getuid(), "pid": os.getpid(), "token": os.environ["EXECENGINE_RUN_TOKEN"]}
with open("/proc/net/dev") as fh:
    res["ifaces"] = sorted(l.split(":")[0].strip() for l in fh.readlines()[2:])
def tcp(addr, port):
    try:
        s = socket.create_connection((addr, port), 3)
        s.sendall(b"EXFIL")
        s.close()
        return "connected"
    except OSError as e:
        return type(e).__name__
res["loopback"] = tcp("127.0.0.1", @PORT@)
res["other_loopback"] = tcp("127.0.0.2", @PORT@)
try:
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(3)
    u.connect("\0" + @ABSTRACT@)
    u.sendall(b"ABSTRACT")
    u.close()
    res["abstract"] = "connected"
except OSError as e:
    res["abstract"] = type(e).__name__
try:
    with urllib.request.urlopen("http://localhost:@PORT@/listed", timeout=10) as fh:
        res["listed"] = fh.read().decode()
except Exception as e:
    res["listed"] = repr(e)
# the bridge: our child, started before exec (at none there is none)
kids = []
for tid in os.listdir("/proc/self/task"):
    try:
        with open(f"/proc/self/task/{tid}/children") as fh:
            kids += [int(x) for x in fh.read().split()]
    except OSError:
        pass
res["kids"] = len(kids)
probes = {}
for pid in kids:
    for what in ("environ", "mem", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as fh:
                fh.read(1)
            probes[what] = "read"
        except OSError as e:
            probes.setdefault(what, type(e).__name__)
    libc = ctypes.CDLL(None, use_errno=True)
    PTRACE_ATTACH = 16
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
        probes["ptrace"] = "attached"
        os.waitpid(pid, 0)
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    else:
        probes.setdefault("ptrace", os.strerror(ctypes.get_errno()))
res["bridge"] = probes
# a daemon that tries to outlive the execution (double fork, new session)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
os.wait()
res["terminal"] = @TERMINAL@
print(json.dumps(res))
"""

# the terminal command's probe: whether the host's other interface exists in its namespace
# (an ioctl on a stream socket: /proc/net is the script's alone) and a direct connect
TERMINAL_PROBE = """
import fcntl, socket, struct
s = socket.socket()
try:
    fcntl.ioctl(s, 0x8933, struct.pack("16si", b"@IFACE@", 0))  # SIOCGIFINDEX
    print("IFACE-SEEN")
except OSError as e:
    print("IFACE-ABSENT", e)
try:
    socket.create_connection(("127.0.0.1", @PORT@), 3).close()
    print("DIRECT")
except OSError as e:
    print("NO-DIRECT", e)
"""
TERMINAL = ("__import__('hermes_tools').terminal("
            "'python3 -c ' + __import__('shlex').quote(@CODE@))['output']")


@pytest.mark.parametrize("level", NONE_OR_RESTRICTED)
def test_restricted_allowlist_reaches_only_the_proxy(level, origin, abstract_listener,
                                                     tmp_path):
    port, _hits = origin
    abstract, got = abstract_listener
    probe = TERMINAL_PROBE.replace("@PORT@", str(port)).replace("@IFACE@", _other_iface())
    code = (NET_PROBE.replace("@PORT@", str(port)).replace("@ABSTRACT@", repr(abstract))
            .replace("@TERMINAL@", TERMINAL.replace("@CODE@", repr(probe))))
    with Engine(_net_config(level)) as engine:
        r = engine.execute(code, cwd=str(tmp_path))
    assert r.status == "success", (r.error, r.output)
    res = _last_json(r.output)
    assert "REACHED" in res["listed"], res  # the allow-list works: the bridge is there
    if level == "none":  # the negative control: every probe sees its leak
        assert res["loopback"] == "connected" and res["abstract"] == "connected", res
        assert "DIRECT" in res["terminal"] and "IFACE-SEEN" in res["terminal"], res
        assert wait_until(lambda: b"ABSTRACT" in got, 3), got
        _kill_strays(res["token"])
        return
    assert res["ifaces"] == ["lo"], res
    assert res["loopback"] != "connected" and res["other_loopback"] != "connected", res
    assert res["abstract"] != "connected" and not [g for g in got if g], (res, got)
    # terminal's command is launched the same way: the same namespace, no direct connect
    term = res["terminal"]
    assert "NO-DIRECT" in term and "IFACE-ABSENT" in term, term
    # the bridge is the script's child (same uid) but neither readable nor traceable
    assert res["kids"] >= 1, res
    assert res["bridge"].get("ptrace") != "attached", res
    assert res["bridge"].get("environ") != "read" and res["bridge"].get("mem") != "read", res
    # and nothing of the execution is left: bridge, daemon, workload
    assert wait_until(lambda: not _uid_processes({res["uid"]}), 5.0), \
        _uid_processes({res["uid"]})


def _other_iface() -> str:
    """A host interface other than ``lo`` (a network namespace of the script's own lacks it)."""
    others = [i for i in _host_ifaces() if i != "lo"]
    if not others:
        pytest.skip("the host has no interface but lo")
    return others[0]


def _kill_strays(token: str) -> None:
    """At level none the host confines nothing: end what still carries the execution's
    run token (the script's daemon), as the engine's own sweep finds it."""
    for pid in carriers(RUN_TOKEN_VAR, token):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


FLOOD = r"""
import json, os, socket
port = int(os.environ["HTTPS_PROXY"].rstrip("/").rsplit(":", 1)[1])
held, refused = [], 0
for _ in range(400):
    try:
        s = socket.create_connection(("127.0.0.1", port), 2)
        s.sendall(b"CONNECT localhost:1 HTTP/1.1\r\n")  # never finished
        held.append(s)
    except OSError:
        refused += 1
print(json.dumps({"held": len(held), "refused": refused}))
"""


@pytest.mark.parametrize("level", NONE_OR_RESTRICTED)
def test_a_flooded_bridge_leaves_the_host_and_the_next_execution_whole(level, origin,
                                                                        tmp_path):
    """400 half-open connections to the bridge (each a thread or two in it): the host's
    proxy and engine stay up and the next execution on the same engine is served."""
    port, hits = origin
    fetch = ("import urllib.request; print(urllib.request.urlopen("
             f"'http://localhost:{port}/after', timeout=10).read().decode())")
    with Engine(_net_config(level, **{"code_execution.timeout": 20})) as engine:
        flood = engine.execute(FLOOD, cwd=str(tmp_path))
        after = engine.execute(fetch, cwd=str(tmp_path))
    assert flood.status in ("success", "error", "timeout"), flood
    assert after.status == "success" and "REACHED" in after.output, (after.error,
                                                                     after.output)
    assert "/after" in hits


MIX = r"""
import json, socket
with open("/proc/net/dev") as fh:
    ifaces = sorted(l.split(":")[0].strip() for l in fh.readlines()[2:])
try:
    socket.create_connection(("127.0.0.1", {port}), 3).close()
    direct = "connected"
except OSError as e:
    direct = type(e).__name__
print(json.dumps({{"ifaces": ifaces, "direct": direct}}))
"""


@pytest.mark.parametrize("level", NONE_OR_RESTRICTED)
def test_the_warm_pool_never_mixes_allowlist_and_closed_entries(level, origin, tmp_path):
    """One launcher (so one warm pool) behind an allow-list engine and a network-off
    engine, executions alternating: each sees its own network every time."""
    from execengine.launch.factory import make_launcher

    port, _hits = origin
    allow_cfg = _net_config(level)
    off_cfg = _net_config(level, network="off")
    launcher = make_launcher(allow_cfg)
    code = MIX.format(port=port)
    seen: list[tuple[str, dict]] = []
    allow = Engine(allow_cfg, launcher=launcher)
    off = Engine(off_cfg, launcher=launcher)
    try:
        for engine, kind in ((allow, "allow"), (off, "off"), (off, "off"), (allow, "allow"),
                             (allow, "allow"), (off, "off")):
            r = engine.execute(code, cwd=str(tmp_path))
            assert r.status == "success", (kind, r.error, r.output)
            seen.append((kind, _last_json(r.output)))
    finally:
        off.close()
        allow.close()
    if level == "none":  # the negative control: the direct connect is seen
        assert all(res["direct"] == "connected" for _, res in seen), seen
        return
    for kind, res in seen:
        assert res["direct"] != "connected", (kind, seen)
        # allow-list: a namespace of its own; off: the host's (Landlock and seccomp
        # confine it), never an allow-list entry's namespace
        assert res["ifaces"] == (["lo"] if kind == "allow" else _host_ifaces()), (kind, seen)


def _host_ifaces() -> list[str]:
    with open("/proc/net/dev") as fh:
        return sorted(x.split(":")[0].strip() for x in fh.readlines()[2:])


# -- 2. the working directory is the owner's inside, and no more than the owner's ---------

WORKDIR_PROBE = ATTEMPT + r"""
from hermes_tools import terminal
res["uid"] = os.getuid()
def read(path):
    try:
        with open(path) as fh:
            return "SECRET" in fh.read()
    except OSError as e:
        return type(e).__name__
res["top"] = read("top.key")
res["nested"] = read("private/key")
attempt("append", lambda: open("top.key", "a").write("tampered"))
attempt("hardlink", lambda: os.link("top.key", "hl"))
res["via_hardlink"] = read("hl")
attempt("symlink", lambda: os.symlink("private/key", "sl"))
res["via_symlink"] = read("sl")
attempt("chmod", lambda: os.chmod("top.key", 0o644))
res["terminal"] = "SECRET" in str(terminal("cat top.key private/key sl 2>&1"))
with open("made.txt", "w") as fh:
    fh.write("made")
os.mkdir("madedir")
for name, mode in (("suid", 0o4755), ("sgid", 0o2755), ("madedir", 0o3777)):
    if name != "madedir":
        with open(name, "w") as fh:
            fh.write("#!/bin/sh\nid\n")
    attempt("chmod_" + name, lambda: os.chmod(name, mode))
print(json.dumps(res))
"""


def _special_bits(root) -> list[str]:
    out = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                out.append(f"{os.path.relpath(path, root)}:{oct(st.st_mode)}")
    return sorted(out)


#: the working directory's owner: a uid of no account (the script acts as it there)
OWNER = 4242


def _private_workdir(tmp_path):
    """A user's working directory holding root's private files: a 0600 file, and one in a
    0700 folder. The script acts there as the folder's owner, which may not read them."""
    work = tmp_path / "work"
    (work / "private").mkdir(parents=True)
    (work / "private").chmod(0o700)
    for path in (work / "top.key", work / "private" / "key"):
        path.write_text("SECRET")
        path.chmod(0o600)
    os.chown(work, OWNER, OWNER)
    return work


def _workdir_config(level: str) -> Config:
    return Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.mode": "project", "code_execution.timeout": 30,
        "approvals.mode": "allow"})


@pytest.mark.parametrize("level", LEVEL)
def test_another_uids_private_files_in_the_working_directory_stay_private(level, tmp_path):
    from execengine.isolation import acl
    from execengine.isolation.uids import SANDBOX_GID

    work = _private_workdir(tmp_path)
    before = acl.read(str(work))
    with Engine(_workdir_config(level)) as engine:
        r = engine.execute(WORKDIR_PROBE, cwd=str(work))
        assert r.status == "success", (r.error, r.output)
        res = _last_json(r.output)
    # files the script made are the host's to use, and the folder's owner's
    assert (work / "made.txt").read_text() == "made"
    (work / "made.txt").write_text("host")
    if level != "none":
        assert (work / "made.txt").stat().st_uid == OWNER
    if level == "none":  # the negative control: the same probes see the owner's secrets
        assert res["top"] is True and res["nested"] is True and res["terminal"], res
        assert "suid:" in " ".join(_special_bits(work)), _special_bits(work)
        return
    for key in ("top", "nested", "via_hardlink", "via_symlink"):
        assert res[key] is not True, (key, res)
    assert res["terminal"] is False, res
    assert res["append"] != "done" and res["chmod"] != "done", res
    assert res["hardlink"] != "done", res  # protected_hardlinks: not the owner's inode
    assert (work / "top.key").read_text() == "SECRET"
    assert oct((work / "top.key").stat().st_mode & 0o777) == oct(0o600)
    # nothing setuid or setgid is left for the host to run
    assert _special_bits(work) == [], (_special_bits(work), res)
    # the execution's grants are gone (the launcher closed with the engine)
    assert acl.group_perm(str(work), SANDBOX_GID) is None
    assert acl.read(str(work)) == before


FILE_TOOLS_PROBE = r"""
import json, os
from hermes_tools import patch, read_file, write_file
res = {}
try:
    open("top.key").read()
    res["direct"] = "read"
except OSError as e:
    res["direct"] = type(e).__name__
os.symlink("private/key", "sl")
res["read_file"] = "SECRET" in json.dumps(read_file("top.key"))
res["read_file_nested"] = "SECRET" in json.dumps(read_file("private/key"))
res["read_file_link"] = "SECRET" in json.dumps(read_file("sl"))
res["write_file"] = json.dumps(write_file("private/planted", "PLANTED"))[:300]
res["patch"] = json.dumps(patch(path="top.key", old_string="SECRET",
                                new_string="PATCHED"))[:300]
print(json.dumps(res))
"""


def _file_tools_leak(level: str, tmp_path) -> tuple[dict, list[str]]:
    work = _private_workdir(tmp_path)
    with Engine(_workdir_config(level)) as engine:
        r = engine.execute(FILE_TOOLS_PROBE, cwd=str(work))
    assert r.status == "success", (r.error, r.output)
    res = _last_json(r.output)
    leaks = [k for k in ("read_file", "read_file_nested", "read_file_link") if res[k]]
    if (work / "private" / "planted").exists():
        leaks.append("write_file planted a file in the owner's 0700 folder")
    if (work / "top.key").read_text() != "SECRET":
        leaks.append("patch rewrote the owner's 0600 file (its diff shows the old text)")
    return res, leaks


def test_the_file_tools_read_the_owners_private_files_at_level_none(tmp_path):
    """The negative control of the next test: unconfined, the probe finds every leak."""
    res, leaks = _file_tools_leak("none", tmp_path)
    assert res["direct"] == "read" and len(leaks) == 5, (res, leaks)


@pytest.mark.parametrize("level", [p for p in LEVEL if p.values[0] != "none"])
def test_the_file_tools_keep_another_uids_private_files_private(level, tmp_path):
    res, leaks = _file_tools_leak(level, tmp_path)
    assert res["direct"] != "read", res  # the sandbox itself is refused
    assert leaks == [], (leaks, res)


# -- 3. the child's RPC client under signal handlers that raise --------------------------
#
# The client is the same at every level (the sandbox adds nothing to it), so these run at
# level none: the fastest launch. Each probe's control is in the script itself: the
# handler must be seen to interrupt tool calls (else the probe proves nothing).

def _echo_registry(config: Config) -> ToolRegistry:
    reg = ToolRegistry(config)

    def echo(args, ctx):
        gate = args.get("gate")
        if gate:  # hold the reply until the script says its signal is on its way
            deadline = time.monotonic() + 10
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.005)
        return {"echo": args["text"]}

    reg.register("echo", "test", {
        "description": "Echo text.",
        "parameters": {"type": "object", "properties": {
            "text": {"type": "string"}, "gate": {"type": "string"}},
            "required": ["text"]}}, echo, policy=ToolPolicy(script_callable=True))
    return reg


@contextlib.contextmanager
def _echo_engine(timeout: float) -> Iterator[Engine]:
    config = Config().with_overrides({
        "code_execution.isolation": "none", "code_execution.min_isolation": "none",
        "code_execution.timeout": timeout, "code_execution.max_tool_calls": 20000})
    with _echo_registry(config) as registry, Engine(config, registry=registry) as engine:
        yield engine


HANDLER_CALLS = r"""
import json, os, signal, threading, time
from hermes_tools import echo
got = {}
done = threading.Event()
def handler(sig, frame):
    got["handler"] = echo("from-handler")["echo"]
signal.signal(signal.SIGUSR1, handler)
def watchdog():
    if not done.wait(5):
        got["verdict"] = "HANG"
        print(json.dumps(got), flush=True)
        os._exit(0)
threading.Thread(target=watchdog, daemon=True).start()
def poke():
    from _execengine.client import get_client
    client = get_client()
    deadline = time.monotonic() + 5
    while @CONDITION@ and time.monotonic() < deadline:
        time.sleep(0.001)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
    open(@GATE@, "w").close()  # only now may the host answer the main thread's call
threading.Thread(target=poke, daemon=True).start()
@MAIN@
done.set()
got["verdict"] = "answered"
print(json.dumps(got), flush=True)
"""


def _handler_calls(tmp_path, during_a_call: bool) -> dict:
    gate = str(tmp_path / "gate")
    if during_a_call:  # the main thread is reading its own call's reply
        condition = "client._reading is not threading.main_thread()"
        main = f'got["main"] = echo("from-main", gate={gate!r})["echo"]'
    else:  # the main thread waits outside any call
        condition = "False"
        main = (f"while not os.path.exists({gate!r}):\n    time.sleep(0.001)\n"
                'got["main"] = echo("from-main")["echo"]')
    code = (HANDLER_CALLS.replace("@CONDITION@", condition).replace("@GATE@", repr(gate))
            .replace("@MAIN@", main))
    with _echo_engine(15) as engine:
        r = engine.execute(code)
    assert r.status == "success", (r.error, r.output)
    return _last_json(r.output)


def test_a_tool_call_from_a_signal_handler_outside_a_call_is_answered(tmp_path):
    """The control of the next test: the same handler, while no call is in progress."""
    res = _handler_calls(tmp_path, during_a_call=False)
    assert res == {"handler": "from-handler", "main": "from-main", "verdict": "answered"}


def test_a_tool_call_from_a_signal_handler_during_a_call_is_answered(tmp_path):
    res = _handler_calls(tmp_path, during_a_call=True)
    assert res == {"handler": "from-handler", "main": "from-main", "verdict": "answered"}
