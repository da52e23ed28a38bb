"""Batch refactoring: find call sites, patch them, verify."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import prelude, search_paths, unnumber
from execengine.bench.workflow import Plan, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

FAMILY = "refactor"
TOOLSETS = ("file", "terminal")
PRELUDE = prelude("patch", "read_file", "search_files", "terminal")
LEGACY_FILES = "grep -rl 'legacy_round(' proj/shop --include='*.py' | grep -v money.py | sort"
FETCH_SITES = "grep -rn 'fetch_config(\"' proj/shop | sort"
MODULES = "find proj/shop -name '*.py' | sort"


def _lines(result: Any) -> list[str]:
    return [ln for ln in str(result.get("output", "")).splitlines() if ln.strip()]


def find_legacy_callers() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (hits,) = yield [call("terminal", command=LEGACY_FILES)]
        out = {}
        for path in _lines(hits):
            (res,) = yield [call("read_file", path=path)]
            out[path] = unnumber(res["content"]).count("legacy_round(x")
        return out

    def script(fx: Fixtures) -> str:
        return PRELUDE + f"""
out = {{}}
for path in terminal({LEGACY_FILES!r})["output"].split():
    out[path] = unnumber(read_file(path)["content"]).count("legacy_round(x")
print(json.dumps(out))
"""
    return Workflow("find-legacy-callers", FAMILY,
                    "How many calls to the deprecated legacy_round does each module make?",
                    plan, script, toolsets=TOOLSETS)


def rename_legacy_round() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (found,) = yield [call("search_files", pattern=r"legacy_round\(x", path="proj/shop",
                               limit=200)]
        changed = []
        for path in search_paths(found):
            (res,) = yield [call("patch", path=path, old_string="legacy_round(x",
                                 new_string="round_money(x", replace_all=True)]
            if res.get("success"):
                changed.append(path)
        (check,) = yield [call("terminal", command="grep -rc 'legacy_round(x' proj/shop "
                                                   "| awk -F: '{s+=$2} END {print s}'")]
        return {"changed": sorted(changed), "remaining": int(_lines(check)[-1])}

    def script(fx: Fixtures) -> str:
        return PRELUDE + """
changed = []
found = search_files(r"legacy_round\\(x", path="proj/shop", limit=200)
for path in search_paths(found):
    if patch(path=path, old_string="legacy_round(x", new_string="round_money(x",
             replace_all=True).get("success"):
        changed.append(path)
left = terminal("grep -rc 'legacy_round(x' proj/shop | awk -F: '{s+=$2} END {print s}'")
print(json.dumps({"changed": sorted(changed), "remaining": int(left["output"].split()[-1])}))
"""
    return Workflow("rename-legacy-round", FAMILY,
                    "Replace every call of legacy_round with round_money and verify none is left.",
                    plan, script, toolsets=TOOLSETS, mutates=True)


def rename_fetch_config_each_site() -> Workflow:
    """One patch per call site, reading the file first as a careful agent does."""
    def plan(fx: Fixtures) -> Plan:
        (hits,) = yield [call("terminal", command=FETCH_SITES)]
        patched = 0
        for line in _lines(hits):
            path, _, text = line.split(":", 2)
            site = re.search(r'fetch_config\("[^"]*"\)', text)
            if not site:
                continue
            yield [call("read_file", path=path)]
            old = site.group(0)
            (res,) = yield [call("patch", path=path, old_string=old,
                                 new_string=old.replace("fetch_config", "load_settings"))]
            patched += bool(res.get("success"))
        (check,) = yield [call("terminal", command=FETCH_SITES)]
        return {"patched": patched, "remaining": len(_lines(check))}

    def script(fx: Fixtures) -> str:
        return PRELUDE + f"""
patched = 0
for line in terminal({FETCH_SITES!r})["output"].splitlines():
    if not line.strip():
        continue
    path, _, text = line.split(":", 2)
    site = re.search(r'fetch_config\\("[^"]*"\\)', text)
    if not site:
        continue
    read_file(path)
    old = site.group(0)
    res = patch(path=path, old_string=old, new_string=old.replace("fetch_config", "load_settings"))
    patched += bool(res.get("success"))
left = [ln for ln in terminal({FETCH_SITES!r})["output"].splitlines() if ln.strip()]
print(json.dumps({{"patched": patched, "remaining": len(left)}}))
"""
    return Workflow("rename-fetch-config-sites", FAMILY,
                    "Replace each fetch_config(...) call site with load_settings(...), one "
                    "site at a time, and verify.", plan, script, toolsets=TOOLSETS, mutates=True)


def rename_all_and_test() -> Workflow:
    tests = "python3 -m unittest discover -s proj/tests -t proj 2>&1 | tail -n 3"

    def plan(fx: Fixtures) -> Plan:
        (legacy,) = yield [call("terminal", command=LEGACY_FILES)]
        (fetch,) = yield [call("terminal", command=FETCH_SITES)]
        fetch_files = sorted({ln.split(":", 1)[0] for ln in _lines(fetch)})
        done = 0
        for path in _lines(legacy):
            (res,) = yield [call("patch", path=path, old_string="legacy_round(x",
                                 new_string="round_money(x", replace_all=True)]
            done += bool(res.get("success"))
        for path in fetch_files:
            (res,) = yield [call("patch", path=path, old_string='fetch_config("',
                                 new_string='load_settings("', replace_all=True)]
            done += bool(res.get("success"))
        (run,) = yield [call("terminal", command=tests)]
        return {"patches": done, "summary": _lines(run)[-1]}

    def script(fx: Fixtures) -> str:
        return PRELUDE + f"""
done = 0
for path in terminal({LEGACY_FILES!r})["output"].split():
    done += bool(patch(path=path, old_string="legacy_round(x", new_string="round_money(x",
                       replace_all=True).get("success"))
fetch = terminal({FETCH_SITES!r})["output"].splitlines()
for path in sorted({{ln.split(":", 1)[0] for ln in fetch if ln.strip()}}):
    done += bool(patch(path=path, old_string='fetch_config("', new_string='load_settings("',
                       replace_all=True).get("success"))
run = [ln for ln in terminal({tests!r})["output"].splitlines() if ln.strip()]
print(json.dumps({{"patches": done, "summary": run[-1]}}))
"""
    return Workflow("rename-all-and-test", FAMILY,
                    "Move every module off legacy_round and fetch_config, then run the tests.",
                    plan, script, toolsets=TOOLSETS, mutates=True)


def add_module_headers() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (mods,) = yield [call("terminal", command=MODULES)]
        done = []
        for path in _lines(mods):
            (head,) = yield [call("read_file", path=path, offset=1, limit=1)]
            first = unnumber(head["content"]).strip()
            if not first.endswith('."""'):
                continue
            (res,) = yield [call("patch", path=path, old_string=first,
                                 new_string=first[:-3] + ' Owner: shop team."""')]
            if res.get("success"):
                done.append(path)
        return done

    def script(fx: Fixtures) -> str:
        return PRELUDE + f"""
done = []
for path in terminal({MODULES!r})["output"].split():
    first = unnumber(read_file(path, offset=1, limit=1)["content"]).strip()
    if not first.endswith('.\"\"\"'):
        continue
    res = patch(path=path, old_string=first, new_string=first[:-3] + ' Owner: shop team.\"\"\"')
    if res.get("success"):
        done.append(path)
print(json.dumps(done))
"""
    return Workflow("add-module-headers", FAMILY,
                    "Add 'Owner: shop team.' to the docstring of every module in proj/shop.",
                    plan, script, toolsets=TOOLSETS, mutates=True)


def inventory_functions(n: int) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (mods,) = yield [call("terminal", command=MODULES)]
        out = {}
        for path in _lines(mods)[:n]:
            (res,) = yield [call("read_file", path=path)]
            out[path] = re.findall(r"^def (\w+)", unnumber(res["content"]), re.M)
        return out

    def script(fx: Fixtures) -> str:
        return PRELUDE + f"""
out = {{}}
for path in terminal({MODULES!r})["output"].split()[:{n}]:
    out[path] = re.findall(r"^def (\\w+)", unnumber(read_file(path)["content"]), re.M)
print(json.dumps(out))
"""
    return Workflow(f"inventory-functions-{n}", FAMILY,
                    f"List the functions defined in the first {n} modules of proj/shop.",
                    plan, script, toolsets=TOOLSETS)


WORKFLOWS = [
    inventory_functions(5),
    find_legacy_callers(),
    rename_legacy_round(),
    rename_fetch_config_each_site(),
    rename_all_and_test(),
    add_module_headers(),
]
