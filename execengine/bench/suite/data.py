"""Data pipelines over many files: find configs, extract settings, aggregate.

Each has a naive strategy (list the configs, read each with ``read_file``) and a shell one
(one ``grep`` over the files, :mod:`~execengine.bench.suite.shell`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import grep_pairs, settings, unnumber
from execengine.bench.suite import shell
from execengine.bench.workflow import Plan, Strategy, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures, Service

LIST_CMD = "find configs -name 'config.*' | LC_ALL=C sort"
DEBUG_CMD = "grep -rlE 'log_level.{0,4}debug' configs | LC_ALL=C sort"
FAMILY = "data"

# What every script starts with: reading a config's settings whatever its format. A model
# writes this itself; it shares no code with the sequential plans or the expected answers.
SCRIPT_HEAD = '''import json, re
from hermes_tools import read_file, terminal

def config(path):
    text = "\\n".join(ln.split("|", 1)[1] for ln in read_file(path)["content"].splitlines())
    if path.endswith(".json"):
        return json.loads(text)["service"]
    return dict(re.findall(r"^[ \\t]*(\\w+)[ \\t]*[:=][ \\t]*(\\S+)", text, re.M))

'''
LISTING = f"paths = terminal({LIST_CMD!r})['output'].split()\n"


def _paths(result: Any) -> list[str]:
    return [p for p in str(result.get("output", "")).split() if p.startswith("configs/")]


def _read_all(paths: list[str]) -> Plan:
    """Read ``paths`` in one batch of parallel calls; the settings of each, in order."""
    results = yield [call("read_file", path=p) for p in paths]
    return [settings(unnumber(r.get("content", ""))) for r in results]


def _grep(command: str) -> Plan:
    """One shell command printing settings; ``{path: {key: value}}``."""
    (res,) = yield [call("terminal", command=command)]
    return grep_pairs(str(res.get("output", "")))


def _listing() -> Plan:
    (listing,) = yield [call("terminal", command=LIST_CMD)]
    return _paths(listing)


def _first(fx: Fixtures, n: int | None = None) -> list[Service]:
    """The first ``n`` services by path (configs/<name>/...: by name); every one for None."""
    return sorted(fx.truth.services, key=lambda s: s.name)[:n]


def _ports_by_region(services: Sequence[Service]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for s in services:
        out.setdefault(s.region, []).append(s.port)
    return {r: sorted(p) for r, p in sorted(out.items())}


def _group_ports(pairs: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for s in pairs:
        out.setdefault(s["region"], []).append(int(s["port"]))
    return {r: sorted(p) for r, p in sorted(out.items())}


GROUP_PORTS = """out = {}
for c in found.values():
    out.setdefault(c["region"], []).append(int(c["port"]))
print(json.dumps({r: sorted(v) for r, v in out.items()}))
"""


def ports_by_region(n: int | None) -> Workflow:
    """The first ``n`` services' ports by region (every service's for None)."""
    head = "" if n is None else f"[:{n}]"

    def plan(fx: Fixtures) -> Plan:
        paths = (yield from _listing())[:n]
        return _group_ports((yield from _read_all(paths)))

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + LISTING + f"""out = {{}}
for p in paths{head}:
    c = config(p)
    out.setdefault(c["region"], []).append(int(c["port"]))
print(json.dumps({{r: sorted(v) for r, v in out.items()}}))
"""
    command = shell.pairs("port|region", first=n)

    def shell_plan(fx: Fixtures) -> Plan:
        return _group_ports(list((yield from _grep(command)).values()))

    def shell_script(fx: Fixtures) -> str:
        return shell.pairs_script(command) + GROUP_PORTS

    which = "every service" if n is None else f"the first {n} services"
    return Workflow(f"ports-by-region-{'all' if n is None else n}", FAMILY,
                    f"List the ports of {which} under configs/ (sorted by path), grouped by "
                    "region.", plan, script,
                    truth=lambda fx: _ports_by_region(_first(fx, n)),
                    answer_format='{"<region>": [<port>, ...]} with each list ascending',
                    alternatives=(Strategy("shell", shell_plan, shell_script),),
                    cluster="ports-by-region")


def replicas_per_team() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        paths = yield from _listing()
        cfgs = yield from _read_all(paths)
        out: dict[str, int] = {}
        for s in cfgs:
            out[s["owner"]] = out.get(s["owner"], 0) + int(s["replicas"])
        return dict(sorted(out.items()))

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + LISTING + """out = {}
for p in paths:
    c = config(p)
    out[c["owner"]] = out.get(c["owner"], 0) + int(c["replicas"])
print(json.dumps(out))
"""

    def truth(fx: Fixtures) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in fx.truth.services:
            out[s.owner] = out.get(s.owner, 0) + s.replicas
        return out

    command = shell.pairs("owner|replicas")

    def shell_plan(fx: Fixtures) -> Plan:
        out: dict[str, int] = {}
        for kv in (yield from _grep(command)).values():
            out[kv["owner"]] = out.get(kv["owner"], 0) + int(kv["replicas"])
        return dict(sorted(out.items()))

    def shell_script(fx: Fixtures) -> str:
        return shell.pairs_script(command) + """out = {}
for kv in found.values():
    out[kv["owner"]] = out.get(kv["owner"], 0) + int(kv["replicas"])
print(json.dumps(out))
"""

    return Workflow("replicas-per-team", FAMILY,
                    "Total replicas per owning team across every service config under configs/.",
                    plan, script, truth=truth, answer_format='{"<team>": <total replicas>}',
                    alternatives=(Strategy("shell", shell_plan, shell_script),))


def debug_services() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (hits,) = yield [call("terminal", command=DEBUG_CMD)]
        cfgs = yield from _read_all(_paths(hits))
        return sorted([s["name"], s["owner"]] for s in cfgs)

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + f"""rows = []
for p in terminal({DEBUG_CMD!r})["output"].split():
    c = config(p)
    rows.append([c["name"], c["owner"]])
print(json.dumps(sorted(rows)))
"""
    command = shell.pairs("name|owner", files=DEBUG_CMD)

    def shell_plan(fx: Fixtures) -> Plan:
        return sorted([s["name"], s["owner"]] for s in (yield from _grep(command)).values())

    def shell_script(fx: Fixtures) -> str:
        return shell.pairs_script(command) + """print(json.dumps(sorted([c["name"], c["owner"]]
                      for c in found.values())))
"""
    return Workflow("debug-services", FAMILY,
                    "Which services log at debug level, and which team owns each?", plan, script,
                    truth=lambda fx: sorted([s.name, s.owner] for s in fx.truth.services
                                            if s.log_level == "debug"),
                    answer_format='[["<service>", "<team>"], ...] sorted by service name',
                    alternatives=(Strategy("shell", shell_plan, shell_script),))


def slow_timeouts(n: int) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        paths = (yield from _listing())[:n]
        cfgs = yield from _read_all(paths)
        return sorted([s["name"], int(s["timeout"])] for s in cfgs if int(s["timeout"]) >= 30)

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + LISTING + f"""rows = []
for p in paths[:{n}]:
    c = config(p)
    if int(c["timeout"]) >= 30:
        rows.append([c["name"], int(c["timeout"])])
print(json.dumps(sorted(rows)))
"""
    command = shell.pairs("name|timeout", first=n)

    def shell_plan(fx: Fixtures) -> Plan:
        found = (yield from _grep(command)).values()
        return sorted([s["name"], int(s["timeout"])] for s in found if int(s["timeout"]) >= 30)

    def shell_script(fx: Fixtures) -> str:
        return shell.pairs_script(command) + """rows = [[c["name"], int(c["timeout"])]
        for c in found.values()]
print(json.dumps(sorted(r for r in rows if r[1] >= 30)))
"""
    return Workflow(f"slow-timeouts-{n}", FAMILY,
                    f"Among the first {n} service configs (sorted by path), which have a timeout "
                    "of 30 s or more?", plan, script,
                    truth=lambda fx: sorted([s.name, s.timeout] for s in _first(fx, n)
                                            if s.timeout >= 30),
                    answer_format='[["<service>", <timeout>], ...] sorted by service name',
                    alternatives=(Strategy("shell", shell_plan, shell_script),))


def docs_and_ports(n: int) -> Workflow:
    """Per service: its config and its README, all read in one batch."""
    def plan(fx: Fixtures) -> Plan:
        paths = (yield from _listing())[:n]
        readmes = [p.rsplit("/", 1)[0] + "/README.md" for p in paths]
        results = yield [call("read_file", path=p) for p in [*paths, *readmes]]
        ports: dict[str, list[int]] = {}
        words: dict[str, int] = {}
        for cfg, doc in zip(results[:len(paths)], results[len(paths):], strict=True):
            s = settings(unnumber(cfg.get("content", "")))
            ports.setdefault(s["region"], []).append(int(s["port"]))
            words[s["owner"]] = words.get(s["owner"], 0) + len(
                unnumber(doc.get("content", "")).split())
        return {"ports": {r: sorted(v) for r, v in sorted(ports.items())},
                "readme_words": dict(sorted(words.items()))}

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + LISTING + f"""ports, words = {{}}, {{}}
for p in paths[:{n}]:
    c = config(p)
    ports.setdefault(c["region"], []).append(int(c["port"]))
    doc = read_file(p.rsplit("/", 1)[0] + "/README.md")["content"]
    text = " ".join(ln.split("|", 1)[1] for ln in doc.splitlines())
    words[c["owner"]] = words.get(c["owner"], 0) + len(text.split())
print(json.dumps({{"ports": {{r: sorted(v) for r, v in ports.items()}}, "readme_words": words}}))
"""

    def truth(fx: Fixtures) -> dict[str, Any]:
        words: dict[str, int] = {}
        for s in _first(fx, n):
            words[s.owner] = words.get(s.owner, 0) + fx.truth.readme_words[s.name]
        return {"ports": _ports_by_region(_first(fx, n)), "readme_words": words}

    settings_cmd = shell.pairs("port|region|owner", first=n)
    words_cmd = (f"{shell.LIST} | head -n {n} | sed 's|/config[.][a-z]*$|/README.md|' "
                 "| xargs wc -w")

    def shell_plan(fx: Fixtures) -> Plan:
        cfgs, counts = yield [call("terminal", command=settings_cmd),
                              call("terminal", command=words_cmd)]
        found = grep_pairs(str(cfgs.get("output", "")))
        per_dir = {}
        for line in str(counts.get("output", "")).splitlines():
            count, _, path = line.strip().partition(" ")
            per_dir[path.rsplit("/", 1)[0]] = int(count)
        words: dict[str, int] = {}
        for path, s in found.items():
            words[s["owner"]] = words.get(s["owner"], 0) + per_dir[path.rsplit("/", 1)[0]]
        return {"ports": _group_ports(list(found.values())),
                "readme_words": dict(sorted(words.items()))}

    def shell_script(fx: Fixtures) -> str:
        return shell.pairs_script(settings_cmd) + f"""per_dir = {{}}
for line in terminal({words_cmd!r})["output"].splitlines():
    count, _, path = line.strip().partition(" ")
    per_dir[path.rsplit("/", 1)[0]] = int(count)
ports, words = {{}}, {{}}
for path, c in found.items():
    ports.setdefault(c["region"], []).append(int(c["port"]))
    words[c["owner"]] = words.get(c["owner"], 0) + per_dir[path.rsplit("/", 1)[0]]
print(json.dumps({{"ports": {{r: sorted(v) for r, v in ports.items()}}, "readme_words": words}}))
"""
    return Workflow(f"docs-and-ports-{n}", FAMILY,
                    f"For the first {n} services (sorted by path): ports per region, and README "
                    "word counts per team.", plan, script, truth=truth,
                    answer_format='{"ports": {"<region>": [<port>, ...] ascending}, '
                                  '"readme_words": {"<team>": <words>}}',
                    alternatives=(Strategy("shell", shell_plan, shell_script),))


WORKFLOWS = [
    ports_by_region(4),
    ports_by_region(20),
    ports_by_region(None),
    replicas_per_team(),
    debug_services(),
    slow_timeouts(30),
    docs_and_ports(33),
]
