"""The spawner process: a single-threaded fork server that enters sandboxes.

Why a separate process: entering a sandbox needs Python code between fork and exec
(unshare, mounts, pivot_root, uid drop, Landlock, seccomp). The engine host is threaded
(the RPC loop thread, a tool worker pool), and forking a threaded process to run Python is
unsafe (``preexec_fn`` warns for that reason). So the launcher starts this process once,
with plain fork+exec, and it never starts a thread: every sandbox is forked from here.
Being exec'd fresh, it also carries no host secrets in memory or ``/proc/self/environ``
(it is started with an empty environment).

Warm entries: phase 1 of entering a sandbox (:func:`.entry.prepare`: session, cgroup,
namespaces, forks, the fixed Landlock rules, at ``isolated`` the fixed part of the root,
entered) does not depend on the script, so the host asks for it *ahead* of the
next launch; the prepared process blocks on a control socket. A launch then only sends the
plan (phase 2). The cgroup migration alone waits for an RCU grace period (1-20 ms on the
hosts we measured), and three forks of a Python process cost about 1 ms each; none of that
is on the launch's critical path any more. A warm entry that died or is missing is replaced
by a cold one (prepare and use at once), so correctness never depends on it.

Protocol over an inherited ``SOCK_SEQPACKET`` socket, one JSON object per message:

* spawner → host, once: ``{"ready": true, "pid": N}``
* host → spawner: ``{"op": "prepare", "id": W, "warm": {"level", "cgroup_dirs",
  "netns", "mntns", "new_root", "tmp_mb", "landlock"}}`` (``netns``: a network namespace
  of its own, see :func:`.entry.own_network`; ``mntns``: at ``restricted``, a mount
  namespace of its own for the plan's binds, see :func:`.mounts.own_view`; ``new_root``
  and ``tmp_mb`` at ``isolated``: the entry builds and enters the fixed part of its root
  ahead;
  ``landlock``: the rules every execution gets, see :func:`.entry._prepare_landlock`);
  reply ``{"ok": true, "pid": N}`` at once (the entry prepares itself in parallel).
* host → spawner: ``{"op": "spawn", "plan": {...}, "warm": W or null, "cold": C or null}``
  (``C``: ``{"zygote", "landlock"}`` as in a warm entry's request, for a cold entry whose
  interpreter is forked from a template, see :meth:`Server._cold_warm`) with fds
  ``[stdout_w, stderr_w, status_w, *pass_fds]``; we copy the plan's paths as detached
  mounts (:func:`.mounts.clone_binds`; the plan's ``owners``, ``[path, uid, gid]``, are
  id-mapped to their owners) and send them to the entry with the plan. Reply ``{"ok":
  true, "pid": N}`` once the child has exec'd, or ``{"ok": false, "error": "..."}``. The
  child's raw wait status is
  written to ``status_w`` as decimal text and ``status_w`` is closed: at ``restricted`` by
  us when we reap the child; at ``isolated`` by the namespace's init, as
  ``"<status> empty"`` once nothing of the execution is left (``status_w`` goes to it with
  the plan and we keep no copy, so the host learns the status without a hop through us
  and before the namespaces' teardown; see :func:`.entry._namespace_init`). An init that
  is killed writes nothing: the host reads EOF alone.
* host → spawner: ``{"op": "discard", "id": W}``: SIGKILL an unused warm entry.
* host → spawner: ``{"op": "kill_uid", "uid": N, "sig": S}``: signal every process of that
  uid (a helper drops to the uid and calls ``kill(-1, sig)``); reply ``{"ok": true}``.

* host → spawner: ``{"op": "bye"}`` just before a live host closes the socket.

EOF on the socket (the host closed it, or died): kill everything of every execution still
running at once (its cgroup, every process of its slot uid, the entries, and whatever
was reparented to us), reap it, remove its cgroups, then exit. The spawner
is a child subreaper, so processes that escaped their session are reaped here too. EOF
without a ``bye`` means the host died: once it has exited, the spawner also removes what
the host itself would have at its close, its ACL grants and private tmp folders
(:func:`.leftovers.sweep`, which the next launcher start would run otherwise), so that a
killed host (a nested ``execengine mcp`` whose host died, say) leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from execengine import hostdirs
from execengine._resources import sandbox_dir
from execengine._runtime import zygote_program
from execengine.isolation import cgroups, entry, leftovers, mounts, seccomp
from execengine.isolation.rlimits import PLAN_RLIMITS

PR_SET_CHILD_SUBREAPER = 36
MAX_MSG = 1 << 20
MAX_FDS = 64
#: deaths after which a template is not started again (its entries start their own)
TEMPLATE_RETRIES = 3
#: how long the spawner waits for its dead host's exit to complete before sweeping
HOST_EXIT_WAIT = 5.0
#: inits waiting to serve another execution (see :meth:`Server._reuse`) beyond which the
#: oldest is let go
MAX_IDLE = 4


def _send(sock: socket.socket, obj: dict[str, Any]) -> None:
    """Send to the host; nothing when it is gone (its EOF is read next, and handled)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.send(json.dumps(obj).encode())


class Server:
    def __init__(self, sock: socket.socket, sweep: dict[str, Any] | None = None) -> None:
        self.sock = sock
        #: the host (its pid and start time) and what to sweep after its death
        #: (``{"tmp": its temp root, "gid": the sandbox group or None}``)
        host = os.getppid()
        self.host = (host, hostdirs.start_time(host))
        self.sweep = sweep
        self.host_closed = False  # it said bye: a live host cleans up after itself
        self.children: dict[int, int] = {}  # pid -> status write fd
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        #: (owner uid, owner gid, slot uid, slot gid) -> user namespace fd for id-mapping
        self.userns: dict[tuple[int, int, int, int], int] = {}
        #: warm entries not used yet: id -> (pid, control socket)
        self.warm: dict[str, tuple[int, socket.socket]] = {}
        #: what each warm entry was prepared for (its ``warm`` request)
        self.prepared: dict[str, dict[str, Any]] = {}
        #: warm entries reaped before use
        self.dead: set[int] = set()
        #: what every entry started here runs in: pid -> (cgroup dirs, slot uid), so that
        #: everything of it can be killed when the host goes away
        self.owned: dict[int, tuple[list[str], int | None]] = {}
        #: started interpreters the warm entries' interpreters are forked from (see
        #: :func:`.entry.exec_template`): key -> (pid, control socket)
        self.templates: dict[str, tuple[int, socket.socket]] = {}
        #: how often each template died: one that keeps dying is not started again
        self.template_deaths: dict[str, int] = {}
        #: launches whose entry has the plan and has not yet started it: error pipe -> it
        self.launching: dict[int, _Launch] = {}
        #: inits of running executions that may serve another (see
        #: :func:`.entry._serve_again`): control socket's fd -> (pid, socket, its request)
        self.serving: dict[int, tuple[int, socket.socket, dict[str, Any]]] = {}
        #: ... and those that said they can, oldest first
        self.idle: list[tuple[int, socket.socket, dict[str, Any]]] = []

    def serve(self) -> None:
        entry.prctl(PR_SET_CHILD_SUBREAPER, 1)
        signal.signal(signal.SIGCHLD, lambda *a: None)
        signal.set_wakeup_fd(self.wake_w)
        _send(self.sock, {"ready": True, "pid": os.getpid()})
        while True:
            # poll(), never select(): descriptor numbers above 1023 are normal here
            poller = select.poll()
            for fd in (self.sock.fileno(), self.wake_r, *self.launching, *self.serving):
                poller.register(fd, select.POLLIN)
            try:
                ready = [fd for fd, _ in poller.poll()]
            except InterruptedError:
                continue
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
                self.reap()
            for fd in ready:
                if fd in self.launching:
                    self._progress(self.launching[fd])
                elif fd in self.serving:
                    self._served(fd)
            if self.sock.fileno() in ready:
                try:
                    msg, fds, _, _ = socket.recv_fds(self.sock, MAX_MSG, MAX_FDS)
                except ConnectionResetError:  # the host died with replies unread
                    msg, fds = b"", []
                if not msg:
                    self.shutdown()
                    if not self.host_closed:
                        self.after_host()
                    return
                rid = None
                try:
                    req = json.loads(msg)
                    rid = req.get("rid")
                    reply = self.handle(req, fds)
                except Exception as exc:
                    for fd in fds:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                    reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                if reply is not None:  # None: a launch replies once its entry started it
                    _send(self.sock, {**reply, "rid": rid})

    def handle(self, req: dict[str, Any], fds: list[int]) -> dict[str, Any] | None:
        op = req.get("op")
        if op == "spawn":
            return self.spawn(req["plan"], fds, req.get("warm"), req.get("cold"),
                              req.get("rid"))
        if op == "prepare":
            pid = self.prepare(str(req["id"]), req["warm"])
            return {"ok": True, "pid": pid}
        if op == "discard":
            self.discard(str(req["id"]))
            return {"ok": True}
        if op == "kill_uid":
            return self.kill_uid(int(req["uid"]), int(req.get("sig", signal.SIGKILL)))
        if op == "bye":
            self.host_closed = True
            return None
        raise ValueError(f"unknown op {op!r}")

    def prepare(self, wid: str, warm: dict[str, Any]) -> int:
        """Fork a warm entry (phase 1 runs in the child, in parallel with us), or make one
        of an init whose execution is over (:meth:`_reuse`)."""
        if wid in self.warm:
            raise ValueError(f"warm entry {wid!r} exists")
        reused = self._reuse(wid, warm)
        if reused is not None:
            return reused
        fork = self._fork_request(warm)
        if fork is not None:
            warm = {**warm, "fork_fd": fork.fileno()}
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        close = (self.sock.fileno(), self.wake_r, self.wake_w, ours.fileno(),
                 *(c.fileno() for _, c in self.warm.values()))
        me = os.getpid()
        try:
            pid = (entry.fork_isolated(bool(warm.get("netns"))) if warm["level"] == "isolated"
                   else os.fork())
            if pid == 0:
                entry.prepare(warm, theirs.fileno(), me, close)
                os._exit(127)  # not reached
        finally:
            theirs.close()
            if fork is not None:
                fork.close()
        self.warm[wid] = (pid, ours)
        self.prepared[wid] = warm
        self.owned[pid] = (list(warm.get("cgroup_dirs") or []), None)
        return pid

    def _fork_request(self, warm: dict[str, Any]) -> socket.socket | None:
        """For an entry whose interpreter is forked from a template (``warm["zygote"]
        ["fork"]``): ask the template (started if need be) to fork this entry's
        interpreter, with what the interpreter applies once forked (uid, gid, rlimits,
        seccomp) and the entry's cgroup directories; our end of the socket on which the
        entry's init hands its namespaces over to the template. None when there is no
        template (a workload then starts the interpreter, as without one)."""
        if not _forks(warm):
            return None
        z = warm["zygote"]
        key = json.dumps([z["argv0"], z["env"], z["interp"], warm["new_root"]],
                         sort_keys=True)
        if self.template_deaths.get(key, 0) >= TEMPLATE_RETRIES:
            return None
        if key not in self.templates:
            self.templates[key] = self._start_template(
                {**z, "new_root": warm["new_root"]})
        req = {"uid": z.get("uid"), "gid": z.get("gid"), "rlimits": z["rlimits"],
               "seccomp": entry.seccomp_program(z.get("seccomp"))}
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sent = [theirs.detach()]
        try:
            for d in warm.get("cgroup_dirs") or ():
                sent.append(os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
            socket.send_fds(self.templates[key][1], [marshal.dumps(req, 4)], sent)
        except OSError:  # the template is gone (reaped later) or a cgroup is
            ours.close()
            return None
        finally:
            for fd in sent:
                os.close(fd)
        return ours

    def _start_template(self, template: dict[str, Any]) -> tuple[int, socket.socket]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            entry.exec_template(template, theirs.fileno(), me)  # never returns
        theirs.close()
        return pid, ours

    def discard(self, wid: str) -> None:
        self.prepared.pop(wid, None)
        pid, ctl = self.warm.pop(wid, (0, None))
        if ctl is not None:
            ctl.close()
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            self.dead.discard(pid)

    def spawn(self, plan: dict[str, Any], fds: list[int], wid: str | None = None,
              cold: dict[str, Any] | None = None, rid: Any = None) -> dict[str, Any] | None:
        """Start ``plan`` through the warm entry ``wid``, or a cold one. ``cold``: what a
        cold entry forks its interpreter from the template with (``zygote`` and the fixed
        ``landlock`` rules, as a warm entry's; see :meth:`_cold_warm`), when it can.

        The plan is sent to the entry here; the reply (``rid``'s) goes out once the entry
        has started it or failed (see :meth:`_progress`), meanwhile we serve other
        requests. None: not yet."""
        if len(fds) < 3:
            raise ValueError("spawn needs stdout, stderr and status fds")
        self.reap()  # learn about warm entries that died while waiting
        m = plan.get("mounts")
        # the writable paths the sandbox acts in as their owner (see .owner): the host's
        # file tools count on it, so a failure fails the launch
        userns = {path: self.userns_for(uid, gid, plan["uid"], plan["gid"])
                  for path, uid, gid in (plan.get("owners") or ())
                  if m is not None and plan.get("uid") is not None}
        warm = {"level": plan["level"], "cgroup_dirs": plan.get("cgroup_dirs", []),
                "netns": bool(plan.get("netns")), "mntns": bool(plan.get("mntns")),
                "recycle": bool(plan.get("recycle"))}
        if m is not None and m.get("new_root"):
            warm.update(new_root=m["new_root"], tmp_mb=m["tmp_mb"])
        launch = _Launch(rid, plan, fds, userns)
        if (wid is not None and wid in self.warm
                and bool(self.prepared.get(wid, {}).get("mntns")) != warm["mntns"]):
            self.discard(wid)  # made for another view: a cold entry serves this plan
        # the ways to start it, in order: each when the one before was found dead
        if wid is not None and wid in self.warm:
            zygote = None
            if self.prepared.get(wid, {}).get("zygote"):
                zygote = zygote_extras(self.prepared[wid], plan)
                if zygote is None:  # started for other limits: a cold entry serves this plan
                    self.discard(wid)
            if wid in self.warm:  # the interpreter is bound in its root already
                ahead = set(self.prepared[wid]["zygote"]["interp"]) if zygote else set()
                launch.ways.append(("warm", wid, zygote, ahead))
        if not launch.ways:
            forked = self._cold_warm(warm, plan, cold)
            if forked is not None:  # its interpreter forked from the template, right away
                launch.ways.append(("cold", forked[0], forked[1],
                                    set(forked[0]["zygote"]["interp"])))
        launch.ways.append(("cold", warm, None, set()))
        try:
            return self._next_way(launch)
        except BaseException:
            for fd in launch.made:  # the request's own descriptors: closed by the caller
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise

    def _next_way(self, launch: _Launch) -> dict[str, Any] | None:
        """Send the plan to the next way of ``launch`` that takes it; None once one has it
        (its reply comes from :meth:`_progress`), the failure reply when none is left."""
        while launch.ways:
            kind, what, zygote, ahead = launch.ways.pop(0)
            if kind == "warm" and self.warm[what][0] in self.dead:  # it died before use
                pid, ctl = self.warm.pop(what)
                self.prepared.pop(what, None)
                self.dead.discard(pid)  # (reaped: never signalled again)
                ctl.close()
                continue
            # (again for each way: one before may have attached them before it was found
            # dead, and a cold entry binds the interpreter too)
            binds = launch.clone(ahead)
            if kind == "warm":
                pid, ctl = self.warm.pop(what)
                launch.entry = self.prepared.pop(what, None)
            else:
                pid, ctl = self._cold(what)
                launch.entry = what
            if self._send_plan(launch, pid, ctl, binds, zygote):
                self.launching[launch.err_r] = launch
                return None
        os.close(launch.fds[2])
        launch.close()
        return {"ok": False, "error": "the sandbox entry died before use"}

    def _cold(self, warm: dict[str, Any]) -> tuple[int, socket.socket]:
        """An entry prepared for use at once: its pid and control socket."""
        wid = f"cold-{os.urandom(8).hex()}"
        pid = self.prepare(wid, warm)
        _, ctl = self.warm.pop(wid)
        self.prepared.pop(wid, None)
        return pid, ctl

    def _cold_warm(self, warm: dict[str, Any], plan: dict[str, Any],
                   cold: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A cold entry's ``warm`` request that has its interpreter forked from the
        template (``cold``: the zygote and fixed Landlock rules a warm entry would get),
        and what that interpreter adds for ``plan`` (see :func:`zygote_extras`); None when
        there is no template for it or it cannot serve the plan (then the entry execs the
        plan's program, as cold entries do). A started interpreter is not worth it for a
        cold entry: only a fork is."""
        if not cold:
            return None
        candidate = {**warm, "zygote": cold.get("zygote"), "landlock": cold.get("landlock")}
        if not _forks(candidate):
            return None
        extras = zygote_extras(candidate, plan)
        return None if extras is None else (candidate, extras)

    def _send_plan(self, launch: _Launch, pid: int, ctl: socket.socket,
                   binds: tuple[list[mounts.Bind], list[int]], zygote: dict[str, Any] | None
                   ) -> bool:
        """Hand the plan to the prepared entry ``pid``. ``zygote``: what a pre-started
        interpreter adds to the rules made ahead (see :func:`zygote_extras`). False: the
        entry was already dead."""
        plan, fds = launch.plan, launch.fds
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        # isolated: the namespace's init reports the status itself (module docstring)
        handover = plan.get("level") == "isolated"
        send = [fds[0], fds[1], err_w, *([fds[2]] if handover else []), *binds[1], *fds[3:]]
        try:
            socket.send_fds(ctl, [json.dumps({"plan": plan, "status": handover,
                                              "binds": binds[0], "zygote": zygote}).encode()],
                            send)
        except OSError:
            os.close(err_r)
            os.close(err_w)
            ctl.close()
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            return False
        os.close(err_w)
        os.set_blocking(err_r, False)
        launch.err_r, launch.pid, launch.ctl, launch.chunks = err_r, pid, ctl, []
        launch.handover = handover
        return True

    def _progress(self, launch: _Launch) -> None:
        """The error pipe of ``launch``'s entry is readable: what it wrote, or EOF (it
        started the plan, or failed, or died before taking it); reply when that decides."""
        try:
            data = os.read(launch.err_r, 4096)
        except (BlockingIOError, InterruptedError):
            return
        if data:
            launch.chunks.append(data)
            return
        del self.launching[launch.err_r]
        os.close(launch.err_r)
        try:
            reply = self._finish(launch)
            if reply is None:
                reply = self._next_way(launch)
        except Exception as exc:  # (the status descriptor may be given away: left open)
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            launch.close()
        if reply is not None:
            _send(self.sock, {**reply, "rid": launch.rid})

    def _finish(self, launch: _Launch) -> dict[str, Any] | None:
        """After the entry closed the error pipe: the reply, or None when it died before
        taking the plan (nothing of the plan ran: the next way gets it)."""
        pid, ctl, chunks, plan, fds = (launch.pid, launch.ctl, launch.chunks, launch.plan,
                                       launch.fds)
        assert ctl is not None  # set with the plan
        ctl.setblocking(False)
        received = recycled = False
        with contextlib.suppress(OSError, ValueError):
            while note := ctl.recv(MAX_MSG):
                reply = json.loads(note)
                received = received or bool(reply.get("received"))
                recycled = recycled or bool(reply.get("recycled"))  # a quick script's
                if reply.get("error"):  # phase 1 failed
                    chunks.append(str(reply["error"]).encode())
        ended = launch.reaped.pop(pid, None)
        entry_of = launch.entry or {}
        if (received and not chunks and ended is None and entry_of.get("recycle")
                and _forks(entry_of)):
            # its init may serve another execution once this one is over
            if recycled:
                self._idle(pid, ctl, entry_of)
            else:
                self.serving[ctl.fileno()] = (pid, ctl, entry_of)
        else:
            ctl.close()
        if not received and not chunks:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            return None
        uid = plan.get("uid")
        if ended is None:
            self.owned[pid] = (list(plan.get("cgroup_dirs") or []),
                               uid if isinstance(uid, int) and uid > 0 else None)
        if launch.handover:
            os.close(fds[2])  # the entry has its copy (or failed: EOF tells the host)
        elif ended is not None:  # it has ended already (reaped meanwhile)
            with contextlib.suppress(OSError):
                os.write(fds[2], str(ended).encode())
            os.close(fds[2])
        else:
            self.children[pid] = fds[2]
        launch.close()
        if chunks:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            return {"ok": False, "error": b"".join(chunks).decode(errors="replace")}
        return {"ok": True, "pid": pid}

    def _served(self, fd: int) -> None:
        """The control socket of a serving init is readable: it can serve again (its
        execution is over and reported, its namespaces and root reset), or it ended."""
        pid, ctl, entry_of = self.serving.pop(fd)
        try:
            note = ctl.recv(MAX_MSG)
        except (BlockingIOError, InterruptedError):
            self.serving[fd] = (pid, ctl, entry_of)
            return
        except OSError:
            note = b""
        if note and json.loads(note).get("recycled"):
            self._idle(pid, ctl, entry_of)
        else:
            ctl.close()

    def _idle(self, pid: int, ctl: socket.socket, entry_of: dict[str, Any]) -> None:
        """Keep ``pid``, an init that can serve again, for :meth:`_reuse`; let the oldest
        go beyond :data:`MAX_IDLE`."""
        ctl.setblocking(True)
        self.idle.append((pid, ctl, entry_of))
        while len(self.idle) > MAX_IDLE:
            old, old_ctl, _ = self.idle.pop(0)
            old_ctl.close()  # it exits at EOF
            with contextlib.suppress(OSError):
                os.kill(old, signal.SIGKILL)

    def _reuse(self, wid: str, warm: dict[str, Any]) -> int | None:
        """A warm entry made of an idle init (see :func:`.entry._serve_again`) whose root
        and namespaces are the ones ``warm`` asks for, its interpreter forked from the
        template for this request (its uid, rlimits, seccomp, cgroup), as a new entry's
        would be: the init's pid; None when there is none (or no template)."""
        if not (warm.get("recycle") and _forks(warm)):
            return None
        for item in list(self.idle):
            pid, ctl, was = item
            if not _same_root(was, warm):
                continue
            self.idle.remove(item)
            fork = self._fork_request(warm)
            if fork is None:  # no template: a new entry starts its own interpreter
                self.idle.append(item)
                return None
            try:
                socket.send_fds(ctl, [json.dumps({"warm": warm}).encode()], [fork.fileno()])
            except OSError:  # it died meanwhile (reaped later)
                ctl.close()
                continue
            finally:
                fork.close()
            self.warm[wid] = (pid, ctl)
            self.prepared[wid] = warm
            self.owned[pid] = (list(warm.get("cgroup_dirs") or []), None)
            return pid
        return None

    def userns_for(self, owner_uid: int, owner_gid: int, uid: int, gid: int) -> int:
        """A user namespace mapping the owner's ids to the slot's, for id-mapped binds
        of the writable paths (cached: an open fd keeps the namespace alive)."""
        key = (owner_uid, owner_gid, uid, gid)
        if key in self.userns:
            return self.userns[key]
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        hold_r, hold_w = os.pipe2(os.O_CLOEXEC)
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                os.close(hold_w)
                os.close(ready_r)
                entry.die_with_parent(me)  # never outlive us
                entry.unshare(0x10000000)  # CLONE_NEWUSER
                os.write(ready_w, b"x")
                os.read(hold_r, 1)  # until the parent has what it needs
            finally:
                os._exit(0)
        os.close(ready_w)
        os.close(hold_r)
        try:
            if os.read(ready_r, 1) != b"x":
                raise OSError("user namespace helper failed")
            with open(f"/proc/{pid}/uid_map", "w") as fh:
                fh.write(f"{owner_uid} {uid} 1\n")
            with open(f"/proc/{pid}/gid_map", "w") as fh:
                fh.write(f"{owner_gid} {gid} 1\n")
            fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(ready_r)
            os.close(hold_w)
            os.waitpid(pid, 0)
        if len(self.userns) >= 256:
            os.close(self.userns.pop(next(iter(self.userns))))
        self.userns[key] = fd
        return fd

    def kill_uid(self, uid: int, sig: int) -> dict[str, Any]:
        if uid == 0:
            raise ValueError("refusing to signal uid 0")
        pid = os.fork()
        if pid == 0:
            try:
                os.setresgid(65534, 65534, 65534)
                os.setresuid(uid, uid, uid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, sig)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        return {"ok": True}

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.owned.pop(pid, None)  # ended: what is left of it is the host's to kill
            for at, (init, ctl, _) in list(self.serving.items()):
                if init == pid:
                    del self.serving[at]
                    ctl.close()
            for item in [i for i in self.idle if i[0] == pid]:
                self.idle.remove(item)
                item[1].close()
            for launch in self.launching.values():
                if launch.pid == pid:  # its status waits for the launch's outcome
                    launch.reaped[pid] = status
            for key, (template, ctl) in list(self.templates.items()):
                if template == pid:  # the next entry starts another
                    ctl.close()
                    del self.templates[key]
                    self.template_deaths[key] = self.template_deaths.get(key, 0) + 1
            fd = self.children.pop(pid, None)
            if fd is None and any(pid == p for p, _ in self.warm.values()):
                self.dead.add(pid)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.write(fd, str(status).encode())
                os.close(fd)

    def shutdown(self) -> None:
        """The host closed the socket or died: kill everything of every execution started
        here, at once (each one's cgroup, every process of its slot uid, the entries, and
        whatever was reparented to us), reap it, and remove the cgroups."""
        for wid in list(self.warm):
            self.discard(wid)
        for init, ctl, _ in [*self.serving.values(), *self.idle]:
            ctl.close()
            with contextlib.suppress(OSError):
                os.kill(init, signal.SIGKILL)
        self.serving.clear()
        self.idle.clear()
        for launch in list(self.launching.values()):
            with contextlib.suppress(OSError):
                os.kill(launch.pid, signal.SIGKILL)
            if launch.ctl is not None:
                launch.ctl.close()
            os.close(launch.err_r)
            os.close(launch.fds[2])
            launch.close()
        self.launching.clear()
        for pid, ctl in self.templates.values():
            ctl.close()
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        groups = [d for dirs, _ in self.owned.values() for d in dirs]
        uids = {uid for _, uid in self.owned.values() if uid is not None}
        for d in groups:
            _kill_cgroup(d)
        for uid in uids:
            with contextlib.suppress(Exception):
                self.kill_uid(uid, signal.SIGKILL)
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _kill_adopted(self.reap, deadline=1.0)  # setsid + double-forked strays come to us
        self.reap()
        for d in groups:
            _remove_cgroup(d)
        self.owned.clear()

    def after_host(self) -> None:
        """The host died (EOF without a bye): once its exit is complete (its grant ledger
        and tmp folders are a dead owner's only then), remove what it held. Never raises."""
        if self.sweep is None:
            return
        pid, start = self.host
        try:
            if start is not None and hostdirs.start_time(pid) == start:
                fd = os.pidfd_open(pid)  # not reaped yet: the pid is still the host's
                try:
                    exited = select.poll()
                    exited.register(fd, select.POLLIN)  # readable once it has exited
                    exited.poll(HOST_EXIT_WAIT * 1000)
                finally:
                    os.close(fd)
        except OSError:
            pass  # gone already
        tmp = self.sweep.get("tmp")
        # every cgroup of a dead host too: one it made for an entry it had not asked us to
        # prepare yet (a refill cut short by its death) is not among ours
        layout: cgroups.CgroupLayout | None = None
        with contextlib.suppress(Exception):
            layout = cgroups.discover()
        leftovers.sweep(layout, self.sweep.get("gid"), tmp)
        # and the host's own staging, runtime and socket folders (its next start's job)
        hostdirs.sweep(hostdirs.ENGINE_PREFIXES, dict.fromkeys((tmp, "/tmp")))



def _same_root(have: dict[str, Any], want: dict[str, Any]) -> bool:
    """Whether an entry made for ``have`` has the root and namespaces ``want`` asks for:
    the same root folder, network namespace or not, interpreter folders bound."""
    return (have.get("level") == want.get("level") == "isolated"
            and have.get("new_root") == want.get("new_root")
            and bool(have.get("netns")) == bool(want.get("netns"))
            and sorted(have["zygote"]["interp"]) == sorted(want["zygote"]["interp"]))


def _forks(warm: dict[str, Any]) -> bool:
    """Whether the entry ``warm`` describes has its interpreter forked from a template
    (see :func:`.entry.exec_template`)."""
    return bool((warm.get("zygote") or {}).get("fork")) and warm.get("level") == "isolated"


class _Launch:
    """A spawn request in progress: the plan, its descriptors (``[stdout, stderr, status,
    *passed]``, ours until the launch ends), the ways left to start it (a warm entry, a
    cold one forking from the template, a cold one), and the entry that has it now."""

    def __init__(self, rid: Any, plan: dict[str, Any], fds: list[int], userns: dict[str, int]
                 ) -> None:
        self.rid, self.plan, self.fds, self.userns = rid, plan, fds, userns
        #: (kind, warm id or request, zygote extras, paths bound ahead)
        self.ways: list[tuple[str, Any, dict[str, Any] | None, set[str]]] = []
        self.made: list[int] = []  # every bind descriptor made for it
        self.err_r = -1
        self.pid = 0
        self.ctl: socket.socket | None = None
        self.chunks: list[bytes] = []
        self.handover = False
        #: wait statuses of its entry reaped while it was in progress
        self.reaped: dict[int, int] = {}
        #: what the entry that has it was made for (its ``prepare`` request)
        self.entry: dict[str, Any] | None = None

    def clone(self, skip: set[str]) -> tuple[list[mounts.Bind], list[int]]:
        """The execution's paths (but ``skip``), as detached mounts made here in the host's
        view."""
        m = self.plan.get("mounts")
        if m is None:
            return [], []
        binds, bind_fds = mounts.clone_binds(mounts.MountPlan(
            new_root=m.get("new_root"),
            read_paths=tuple(p for p in m["read"] if p not in skip),
            write_paths=tuple(m["write"]), socket_dir=m.get("socket_dir"),
            tmp_mb=m.get("tmp_mb", 0), cwd=self.plan["cwd"], userns=self.userns,
            protect=tuple(m.get("protect", ())), hide=tuple(m.get("hide", ()))))
        self.made.extend(bind_fds)
        if len(self.fds) + len(bind_fds) + 2 > entry.MAX_FDS:
            raise ValueError("too many paths and descriptors for one sandbox")
        return binds, bind_fds

    def close(self) -> None:
        """Close our descriptors but the status one (given away, or closed, by then)."""
        for fd in [*self.fds[:2], *self.fds[3:], *self.made]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds, self.made = self.fds[:3], []


def zygote_extras(warm: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any] | None:
    """What a pre-started interpreter (``warm["zygote"]``, see :func:`.entry.exec_zygote`)
    must add for ``plan``: the Landlock paths beyond the fixed rules; None when the entry
    cannot serve it: it dropped to another uid, or applied other rlimits or another seccomp
    filter than the plan's, the plan needs a bridge or a port rule (set up before exec),
    the Landlock rules made ahead are not a subset of the plan's, or at ``isolated`` a
    path of the plan would cover the interpreter bound ahead, or a writable one lie in
    it. The CPU-time and open-files limits are the plan's own: the interpreter sets them."""
    z = warm["zygote"]
    ll, fixed = plan.get("landlock"), warm.get("landlock")
    if (plan["level"] != warm["level"] or bool(plan.get("netns")) != bool(warm.get("netns"))
            or plan.get("uid") != z.get("uid") or plan.get("gid") != z.get("gid")
            or [list(r) for r in plan["rlimits"] if r[0] not in PLAN_RLIMITS]
            != [list(r) for r in z["rlimits"]]
            or plan.get("seccomp") != z.get("seccomp") or plan.get("proxy_bridge")):
        return None
    if (ll is None) != (fixed is None):
        return None
    own = [list(r) for r in plan["rlimits"] if r[0] in PLAN_RLIMITS]
    extra: dict[str, Any] = {"read": [], "write": [], "rlimits": own}
    if ll is not None and fixed is not None:
        if (ll.get("connect_ports") or bool(ll["deny_tcp"]) != bool(fixed["deny_tcp"])
                or bool(ll["scope"]) != bool(fixed["scope"])
                or not set(fixed["read"]) <= set(ll["read"])
                or not set(fixed["write"]) <= set(ll["write"])):
            return None
        extra.update(
            read=[p for p in dict.fromkeys(ll["read"]) if p not in fixed["read"]],
            write=[p for p in dict.fromkeys(ll["write"]) if p not in fixed["write"]])
    m = plan.get("mounts")
    if m is not None:
        interp = [os.path.abspath(p) for p in z["interp"]]
        writes = {os.path.abspath(p) for p in m["write"]}
        for path in (*m["read"], *m["write"], m.get("socket_dir") or ""):
            path = os.path.abspath(path) if path else ""
            if path and any(mounts.beneath(i, path) or (path in writes and (
                    path == i or mounts.beneath(path, i))) for i in interp):
                return None
    return extra


def _kill_cgroup(d: str) -> None:
    """SIGKILL every member of one cgroup directory (``cgroup.kill`` where there is one)."""
    with contextlib.suppress(OSError):
        with open(os.path.join(d, "cgroup.kill"), "w") as fh:
            fh.write("1")
        return
    with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.procs")) as fh:
        for pid in fh.read().split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


def _remove_cgroup(d: str, timeout: float = 1.0) -> None:
    end = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(d)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > end:
                return
            _kill_cgroup(d)
            time.sleep(0.005)


def _adopted() -> list[int]:
    """Processes whose parent is this (subreaper) process."""
    me = str(os.getpid())
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[1].decode() == me and fields[0] != b"Z":
            found.append(int(name))
    return found


def _kill_adopted(reap: Callable[[], None], deadline: float) -> None:
    """SIGKILL and ``reap`` our children (adopted strays included) until none is left."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        pids = _adopted()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        reap()
        time.sleep(0.002)


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[1]))
    sweep = json.loads(argv[2]) if len(argv) > 2 else None
    # load libseccomp now: forked children must not import anything once they have
    # pivoted or dropped privileges (the interpreter's site-packages may be out of reach)
    with contextlib.suppress(ImportError, OSError):
        seccomp.load_module()
        # every filter, compiled once (see seccomp.compiled), as plans ask for them
        for sc in ({"allow_network": False}, {"allow_network": True},
                   {"allow_network": False, "stream_only": True}):  # the proxy's variant
            entry.seccomp_program(sc)
    entry.ZYGOTE_SOURCE = (sandbox_dir() / "zygote.py").read_text()
    # compiled once, here: each entry's pre-started interpreter of this interpreter gets it
    # so (see zygote_program)
    zygote_program(entry.ZYGOTE_SOURCE, "main", {}, sys.executable)
    # everything loaded so far lives as long as we do: out of the collector's sight, so
    # that neither our collections nor a forked entry's touch (and copy) those pages
    gc.freeze()
    with sock:
        Server(sock, sweep).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
