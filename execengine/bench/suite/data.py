"""Data pipelines over many files: find configs, extract settings, aggregate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import prelude, settings, unnumber
from execengine.bench.workflow import Plan, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

LIST_CMD = "find configs -name 'config.*' | sort"
FAMILY = "data"


def _config_paths(result: Any) -> list[str]:
    return [p for p in str(result.get("output", "")).split() if p.startswith("configs/")]


def _read_all(paths: list[str], batch: int) -> Plan:
    """Read ``paths`` in batches of parallel calls; returns the settings of each, in order."""
    found: list[dict[str, str]] = []
    for i in range(0, len(paths), batch):
        chunk = paths[i:i + batch]
        results = yield [call("read_file", path=p) for p in chunk]
        found += [settings(unnumber(r.get("content", ""))) for r in results]
    return found


def _listing() -> Plan:
    (listing,) = yield [call("terminal", command=LIST_CMD)]
    return _config_paths(listing)


def _script_listing() -> str:
    return (f"listing = terminal({LIST_CMD!r})\n"
            "paths = [p for p in listing['output'].split() if p.startswith('configs/')]\n")


def ports_by_region(n: int, batch: int = 1) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        paths = (yield from _listing())[:n]
        cfgs = yield from _read_all(paths, batch)
        out: dict[str, list[int]] = {}
        for s in cfgs:
            out.setdefault(s["region"], []).append(int(s["port"]))
        return {r: sorted(p) for r, p in sorted(out.items())}

    def script(fx: Fixtures) -> str:
        return prelude("read_file", "terminal") + _script_listing() + f"""
out = {{}}
for p in paths[:{n}]:
    s = settings(unnumber(read_file(p)["content"]))
    out.setdefault(s["region"], []).append(int(s["port"]))
print(json.dumps({{r: sorted(v) for r, v in sorted(out.items())}}))
"""
    return Workflow(f"ports-by-region-{n}", FAMILY,
                    f"List the ports of the first {n} services under configs/ (sorted by path), "
                    "grouped by region.", plan, script)


def replicas_per_team(batch: int) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        paths = yield from _listing()
        cfgs = yield from _read_all(paths, batch)
        out: dict[str, int] = {}
        for s in cfgs:
            out[s["owner"]] = out.get(s["owner"], 0) + int(s["replicas"])
        return dict(sorted(out.items()))

    def script(fx: Fixtures) -> str:
        return prelude("read_file", "terminal") + _script_listing() + """
out = {}
for p in paths:
    s = settings(unnumber(read_file(p)["content"]))
    out[s["owner"]] = out.get(s["owner"], 0) + int(s["replicas"])
print(json.dumps(dict(sorted(out.items()))))
"""
    return Workflow(f"replicas-per-team-b{batch}", FAMILY,
                    "Total replicas per owning team across every service config under configs/.",
                    plan, script)


def debug_services() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (hits,) = yield [call("terminal",
                              command="grep -rlE 'log_level.{0,4}debug' configs | sort")]
        paths = [p for p in str(hits.get("output", "")).split() if p.startswith("configs/")]
        cfgs = yield from _read_all(paths, 1)
        return sorted([s["name"], s["owner"]] for s in cfgs)

    def script(fx: Fixtures) -> str:
        return prelude("read_file", "terminal") + """
hits = terminal("grep -rlE 'log_level.{0,4}debug' configs | sort")
paths = [p for p in hits["output"].split() if p.startswith("configs/")]
rows = []
for p in paths:
    s = settings(unnumber(read_file(p)["content"]))
    rows.append([s["name"], s["owner"]])
print(json.dumps(sorted(rows)))
"""
    return Workflow("debug-services", FAMILY,
                    "Which services log at debug level, and which team owns each?", plan, script)


def slow_timeouts(n: int) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        paths = (yield from _listing())[:n]
        cfgs = yield from _read_all(paths, 1)
        return sorted([s["name"], int(s["timeout"])] for s in cfgs if int(s["timeout"]) >= 30)

    def script(fx: Fixtures) -> str:
        return prelude("read_file", "terminal") + _script_listing() + f"""
rows = []
for p in paths[:{n}]:
    s = settings(unnumber(read_file(p)["content"]))
    if int(s["timeout"]) >= 30:
        rows.append([s["name"], int(s["timeout"])])
print(json.dumps(sorted(rows)))
"""
    return Workflow(f"slow-timeouts-{n}", FAMILY,
                    f"Among the first {n} service configs, which have a timeout of 30 s or more?",
                    plan, script)


def docs_and_ports(n: int) -> Workflow:
    """Per service: list its folder, read its config and its README (3 calls each)."""
    def plan(fx: Fixtures) -> Plan:
        paths = (yield from _listing())[:n]
        ports: dict[str, list[int]] = {}
        words: dict[str, int] = {}
        for p in paths:
            yield [call("terminal", command="ls " + p.rsplit("/", 1)[0])]
            (cfg,) = yield [call("read_file", path=p)]
            s = settings(unnumber(cfg.get("content", "")))
            ports.setdefault(s["region"], []).append(int(s["port"]))
            readme = p.rsplit("/", 1)[0] + "/README.md"
            (doc,) = yield [call("read_file", path=readme)]
            words[s["owner"]] = words.get(s["owner"], 0) + len(
                unnumber(doc.get("content", "")).split())
        return {"ports": {r: sorted(v) for r, v in sorted(ports.items())},
                "readme_words": dict(sorted(words.items()))}

    def script(fx: Fixtures) -> str:
        return prelude("read_file", "terminal") + _script_listing() + f"""
ports, words = {{}}, {{}}
for p in paths[:{n}]:
    terminal("ls " + p.rsplit("/", 1)[0])
    s = settings(unnumber(read_file(p)["content"]))
    ports.setdefault(s["region"], []).append(int(s["port"]))
    doc = unnumber(read_file(p.rsplit("/", 1)[0] + "/README.md")["content"])
    words[s["owner"]] = words.get(s["owner"], 0) + len(doc.split())
print(json.dumps({{"ports": {{r: sorted(v) for r, v in sorted(ports.items())}},
                  "readme_words": dict(sorted(words.items()))}}))
"""
    return Workflow(f"docs-and-ports-{n}", FAMILY,
                    f"For the first {n} services: ports per region, and README word counts "
                    "per team.",
                    plan, script)


WORKFLOWS = [
    ports_by_region(4),
    ports_by_region(20),
    replicas_per_team(batch=10),
    debug_services(),
    slow_timeouts(30),
    docs_and_ports(33),
]
