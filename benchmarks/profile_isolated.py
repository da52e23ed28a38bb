"""Where the CPU of one ``isolated`` execution goes, by process role (Linux, root, ``perf``).

    sudo python benchmarks/profile_isolated.py [--runs 200] [--callers 1] [--out DIR]

Samples every CPU with ``perf record -a -g`` (the ``cpu-clock`` software event: a virtual
machine has no hardware counters) while one engine runs ``print("hi")`` at ``isolated``
``--runs`` times, then names each sample's process by the fork tree that ``perf`` recorded:

* **host**: this process (the engine, its RPC and background threads);
* **spawner**: the spawner process; **entry init**: its forks (each entry's namespaces'
  init, pid 1 there; and the spawner's short helpers);
* **template**: the interpreter every execution's is forked from; **interpreter**: its
  forks, one per entry, which run the scripts; **script's children**: below them;
* **kernel threads**: ``kworker``, ``ksoftirqd``, RCU and the like, machine-wide (part of
  their work is namespaces and mounts torn down for us; part is other processes');
* **elsewhere**: every other process (the other users of the machine).

Per role: CPU per execution (ms), its share in the kernel, and the functions where its
samples land (the leaf; for the kernel also what they serve: fork, exit, page faults,
exec, namespaces, mounts...). Run it with the interpreter the fair suite uses (the
reference's, ``execengine bench speed --suite reference``), so that the template and its
site are the same. CPU left on the machine after the last execution (the entry prepared
for the next launch) is waited for, and counted.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from execengine.bench.speed import _checked, _settled, noop_engine
from execengine.config import Config

#: names of a system call's entry in the kernel (``__x64_sys_clone3``, ``__do_sys_wait4``)
_SYSCALL = re.compile(r"^__(?:x64|ia32|do|se)_sys_(\w+)$")
KERNEL_THREADS = re.compile(r"^(kworker|ksoftirqd|rcu_|migration|kcompactd|khugepaged|"
                            r"kswapd|kdamond|cpuhp|idle_inject|jbd2|writeback|kthreadd)")
_FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
_HEAD = re.compile(r"^(\S.*?)\s+(\d+)/(\d+)\s+(\d+)\s+cpu-clock")


def parse(script: str) -> tuple[dict[int, int], list[tuple[int, str, int, list[tuple[str, str]]]]]:
    """``perf script`` text: the parent of every process forked (by pid), and the samples
    as (pid, comm, period in ns, call chain of (symbol, dso), leaf first)."""
    parent: dict[int, int] = {}
    samples: list[tuple[int, str, int, list[tuple[str, str]]]] = []
    chain: list[tuple[str, str]] | None = None
    for line in script.splitlines():
        if chain is not None:
            if not line.strip():
                chain = None
                continue
            parts = line.strip().split(None, 1)
            rest = parts[1] if len(parts) > 1 else ""
            sym, _, dso = rest.rpartition(" (")
            chain.append((sym.split("+0x")[0] or rest, dso.rstrip(")")))
            continue
        m = _FORK.search(line)
        if m:
            child, _, ppid, _ = (int(x) for x in m.groups())
            if child != ppid:  # a new thread is a fork of its own process
                parent.setdefault(child, ppid)
            continue
        h = _HEAD.match(line)
        if h:
            chain = []
            samples.append((int(h.group(2)), h.group(1).strip(), int(h.group(4)), chain))
    return parent, samples


def role_of(pid: int, comm: str, parent: dict[int, int], host: int, spawner: int,
            templates: set[int]) -> str:
    """The role of process ``pid`` (see the module docstring)."""
    if pid == host:
        return "host"
    if pid == spawner:
        return "spawner"
    if pid in templates:
        return "template"
    line = [pid]
    while line[-1] in parent and len(line) < 64:
        line.append(parent[line[-1]])
    for depth, ancestor in enumerate(line):
        if ancestor in templates:
            return "interpreter" if depth == 1 else "script's children"
        if ancestor == spawner:
            return "entry init" if depth == 1 else "entry's children"
        if ancestor == host:
            return "host's children"
    if pid == 0 or KERNEL_THREADS.match(comm):
        return "kernel threads" if pid else "idle"
    return "elsewhere"


def why(chain: list[tuple[str, str]]) -> str:
    """What a kernel sample serves: the system call it is in (the one nearest the root of
    its call chain), a page fault (copy on write or not), the first run of a new process,
    an interrupt, or a kernel thread's work."""
    kernel = [sym for sym, dso in chain if "kernel" in dso]
    for i, sym in enumerate(reversed(kernel)):  # from the root
        m = _SYSCALL.match(sym)
        if m:
            return f"syscall {m.group(1)}"
        if sym == "do_syscall_64":  # the entry inlined: name it by the next frame
            inner = [s for s in kernel[::-1][i + 1:] if s != "x64_sys_call"]
            if not inner:
                return "syscall (entry)"
            m = _SYSCALL.match(inner[0])
            if m:
                return f"syscall {m.group(1)}"
            if inner[0] == "exit_to_user_mode_loop":
                if any(s in ("do_exit", "do_group_exit") for s in inner):
                    return "exit on a signal"
                return "signals and scheduling on return"
            return "syscall " + re.sub(r"^(ksys_|__sys_|__do_sys_|do_sys_)", "", inner[0])
        if sym in ("asm_exc_page_fault", "exc_page_fault"):
            cow = any(s in ("do_wp_page", "wp_page_copy") for s in kernel)
            return "page fault, copy on write" if cow else "page fault"
        if sym == "ret_from_fork":
            return "new process: first run (ret_from_fork)"
        if sym.startswith("asm_sysvec") or sym.startswith("asm_common_interrupt"):
            return "interrupts"
    return f"kernel thread: {kernel[-1] if kernel else '?'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--callers", type=int, default=1)
    ap.add_argument("--freq", type=int, default=4999, help="samples per second per CPU")
    ap.add_argument("--out", help="keep perf.data and the script's text in this folder")
    ap.add_argument("--top", type=int, default=8, help="functions listed per role")
    ap.add_argument("--level", default="isolated", help="the isolation level (default isolated)")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="execengine-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    data = out / "perf.data"
    cfg = {"code_execution.python": sys.executable}
    with tempfile.TemporaryDirectory() as cwd, \
            noop_engine(Config(), args.level, **cfg) as engine:
        def one() -> None:
            _checked(engine.execute('print("hi")', mode="project", cwd=cwd), 'print("hi")')

        for _ in range(10):
            one()
        _settled()
        spawner = getattr(getattr(engine.launcher, "spawner", None), "pid", None)
        before = {int(p) for p in os.listdir("/proc") if p.isdigit()
                  and _is_template(int(p), spawner)}
        perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", str(args.freq),
                                 "-a", "-g", "-o", str(data)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # perf has opened its events
        started = time.perf_counter()
        with ThreadPoolExecutor(args.callers) as pool:
            for f in [pool.submit(one) for _ in range(args.runs)]:
                f.result()
        wall = time.perf_counter() - started
        _settled()  # the entry made for the next launch: counted
        perf.send_signal(signal.SIGINT)
        _, err = perf.communicate(timeout=120)
        templates = before | {int(p) for p in os.listdir("/proc") if p.isdigit()
                              and _is_template(int(p), spawner)}
    host = os.getpid()
    text = subprocess.run(["perf", "script", "-i", str(data), "--show-task-events",
                           "-F", "comm,pid,tid,period,event,ip,sym,dso"],
                          capture_output=True, text=True, check=True).stdout
    if args.out:
        (out / "perf.txt").write_text(text)
    parent, samples = parse(text)
    per_role: dict[str, float] = collections.Counter()
    kernel: dict[str, float] = collections.Counter()
    leaves: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    whys: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for pid, comm, period, chain in samples:
        role = role_of(pid, comm, parent, host, spawner or -1, templates)
        ms = period / 1e6
        per_role[role] += ms
        if not chain:
            continue
        sym, dso = chain[0]
        in_kernel = "kernel" in dso
        if in_kernel:
            kernel[role] += ms
            whys[role][why(chain)] += ms
        leaves[role][f"{sym} [{'kernel' if in_kernel else os.path.basename(dso)}]"] += ms
    n = args.runs
    print(f"host {host}, spawner {spawner}, templates {sorted(templates)}")
    print(f"{n} x print(\"hi\") at {args.level}, {args.callers} caller(s), {wall:.2f} s "
          f"({n / wall:.1f}/s); python {sys.version.split()[0]} at {sys.executable}; "
          f"perf {len(samples)} samples at {args.freq} Hz per CPU")
    ours = [r for r in per_role if r not in ("elsewhere", "idle", "kernel threads")]
    total = sum(per_role[r] for r in ours)
    print(f"ours: {total / n:.2f} ms of CPU per execution (kernel threads, machine-wide: "
          f"{per_role['kernel threads'] / n:.2f}; other processes: "
          f"{per_role['elsewhere'] / n:.2f}; idle {per_role['idle'] / n:.2f})")
    order = ("host", "host's children", "spawner", "entry init", "entry's children", "template",
             "interpreter", "script's children", "kernel threads")
    for role in order:
        if per_role.get(role):
            ms = per_role[role] / n
            share = kernel[role] / max(per_role[role], 1e-9)
            print(f"\n{role:18} {ms:6.2f} ms per execution, {share:4.0%} in the kernel")
            for label, v in whys[role].most_common(args.top):
                print(f"    kernel: {label:28} {v / n:6.2f} ms")
            for label, v in leaves[role].most_common(args.top):
                print(f"    {label[:70]:70} {v / n:6.2f} ms")
    if err.strip() and "Captured and wrote" not in err:
        print(err, file=sys.stderr)
    print(f"\nperf data: {data}")
    return 0


def _is_template(pid: int, spawner: int | None) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
    return ppid == spawner and b"_execengine_zygote" in cmd


if __name__ == "__main__":
    threading.current_thread().name = "profile"
    sys.exit(main())
