"""Batch refactoring: find call sites, patch them, verify.

Naive strategies use the file tools (``search_files``, ``read_file``, ``patch``) call by call;
shell ones let ``grep`` count and ``sed -i`` edit, as a shell-savvy agent does."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import search_paths, unnumber
from execengine.bench.workflow import Plan, Strategy, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

FAMILY = "refactor"
TOOLSETS = ("file", "terminal")
LEGACY_FILES = ("grep -rl 'legacy_round(' proj/shop --include='*.py' | grep -v money.py "
                "| LC_ALL=C sort")
FETCH_SITES = "grep -rn 'fetch_config(\"' proj/shop | LC_ALL=C sort"
MODULES = "find proj/shop -name '*.py' | LC_ALL=C sort"
COUNT_LEFT = "grep -rc 'legacy_round(x' proj/shop | awk -F: '{s+=$2} END {print s}'"
TESTS = "python3 -m unittest discover -s proj/tests -t proj 2>&1 | tail -n 1"
MONEY_FUNCTIONS = ["round_money", "legacy_round", "fetch_config", "load_settings"]
LEGACY_SED = "sed -i 's/legacy_round(x/round_money(x/g'"
FETCH_SED = "sed -i 's/fetch_config(\"/load_settings(\"/g'"


def _shell(plan: Any, script: Any) -> tuple[Strategy, ...]:
    return (Strategy("shell", plan, script),)


def _lines(result: Any) -> list[str]:
    return [ln for ln in str(result.get("output", "")).splitlines() if ln.strip()]


def _text(result: Any) -> str:
    return unnumber(str(result.get("content", "")))


def _modules(fx: Fixtures) -> list[str]:
    """Every module of proj/shop, as the sorted listing names them."""
    return sorted(["proj/shop/__init__.py", "proj/shop/money.py",
                   *(f"proj/shop/{name}.py" for name in fx.truth.functions)])


def _functions(fx: Fixtures, path: str) -> list[str]:
    name = path.rsplit("/", 1)[1][:-3]
    if name == "money":
        return MONEY_FUNCTIONS
    return list(fx.truth.functions.get(name, []))


def find_legacy_callers() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (hits,) = yield [call("terminal", command=LEGACY_FILES)]
        paths = _lines(hits)
        results = yield [call("read_file", path=p) for p in paths]
        return {p: _text(r).count("legacy_round(x") for p, r in zip(paths, results, strict=True)}

    def script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import read_file, terminal
out = {{}}
for path in terminal({LEGACY_FILES!r})["output"].split():
    out[path] = read_file(path)["content"].count("legacy_round(x")
print(json.dumps(out))
"""
    count = ("grep -rc 'legacy_round(x' proj/shop --include='*.py' | grep -v ':0$' "
             "| LC_ALL=C sort")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=count)]
        return {p: int(n) for p, n in (ln.rsplit(":", 1) for ln in _lines(res))}

    def shell_script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
lines = terminal({count!r})["output"].split()
print(json.dumps({{p: int(n) for p, n in (ln.rsplit(":", 1) for ln in lines)}}))
"""
    return Workflow("find-legacy-callers", FAMILY,
                    "How many calls to the deprecated legacy_round does each module make?",
                    plan, script, toolsets=TOOLSETS, alternatives=_shell(shell_plan, shell_script),
                    truth=lambda fx: {"proj/" + p: n for p, n in fx.truth.legacy_calls.items()},
                    answer_format='{"proj/shop/<module>.py": <calls>}')


def rename_legacy_round() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (found,) = yield [call("search_files", pattern=r"legacy_round\(x", path="proj/shop",
                               limit=200)]
        paths = search_paths(found)
        results = yield [call("patch", path=p, old_string="legacy_round(x",
                              new_string="round_money(x", replace_all=True) for p in paths]
        changed = [p for p, r in zip(paths, results, strict=True) if r.get("success")]
        (check,) = yield [call("terminal", command=COUNT_LEFT)]
        return {"changed": sorted(changed), "remaining": int(_lines(check)[-1])}

    def script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import patch, search_files, terminal
found = search_files(r"legacy_round\\(x", path="proj/shop", limit=200)["matches"]
changed = []
for path in sorted({{m["path"] for m in found}}):
    if patch(path=path, old_string="legacy_round(x", new_string="round_money(x",
             replace_all=True).get("success"):
        changed.append(path)
left = int(terminal({COUNT_LEFT!r})["output"])
print(json.dumps({{"changed": changed, "remaining": left}}))
"""
    sed = ("files=$(grep -rl 'legacy_round(x' proj/shop | LC_ALL=C sort); echo \"$files\"; "
           f"{LEGACY_SED} $files; {COUNT_LEFT}")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=sed)]
        *changed, left = _lines(res)
        return {"changed": changed, "remaining": int(left)}

    def shell_script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
*changed, left = terminal({sed!r})["output"].split()
print(json.dumps({{"changed": changed, "remaining": int(left)}}))
"""
    return Workflow("rename-legacy-round", FAMILY,
                    "Replace every call of legacy_round with round_money and verify none is left.",
                    plan, script, toolsets=TOOLSETS, mutates=True, cluster="rename-call-sites",
                    alternatives=_shell(shell_plan, shell_script),
                    truth=lambda fx: {"changed": sorted("proj/" + p for p in fx.truth.legacy_calls),
                                      "remaining": 0},
                    answer_format='{"changed": ["proj/shop/<module>.py", ...] sorted, '
                                  '"remaining": <calls left>}')


def rename_fetch_config_each_site() -> Workflow:
    """Read each file first, as a careful agent does, then one patch per call site (the
    k-th site of every file in the k-th batch: two patches of one file never run at once)."""
    def plan(fx: Fixtures) -> Plan:
        (hits,) = yield [call("terminal", command=FETCH_SITES)]
        sites: dict[str, list[str]] = {}
        for line in _lines(hits):
            path, _, text = line.split(":", 2)
            site = re.search(r'fetch_config\("[^"]*"\)', text)
            if site:
                sites.setdefault(path, []).append(site.group(0))
        files = list(sites)
        texts = yield [call("read_file", path=p) for p in files]
        todo = {p: [s for s in sites[p] if s in _text(t)]
                for p, t in zip(files, texts, strict=True)}
        patched = 0
        for k in range(max((len(v) for v in todo.values()), default=0)):
            batch = [(p, v[k]) for p, v in todo.items() if k < len(v)]
            results = yield [call("patch", path=p, old_string=s,
                                  new_string=s.replace("fetch_config", "load_settings"))
                             for p, s in batch]
            patched += sum(bool(r.get("success")) for r in results)
        (check,) = yield [call("terminal", command=FETCH_SITES)]
        return {"patched": patched, "remaining": len(_lines(check))}

    def script(fx: Fixtures) -> str:
        return f"""import json, re
from hermes_tools import patch, read_file, terminal
sites = {{}}
for line in terminal({FETCH_SITES!r})["output"].splitlines():
    path, _, text = line.partition(":")
    for site in re.findall(r'fetch_config\\("[^"]*"\\)', text):
        sites.setdefault(path, []).append(site)
patched = 0
for path, found in sites.items():
    text = read_file(path)["content"]
    for site in found:
        if site in text:
            res = patch(path=path, old_string=site,
                        new_string=site.replace("fetch_config", "load_settings"))
            patched += bool(res.get("success"))
left = terminal({FETCH_SITES!r})["output"].split()
print(json.dumps({{"patched": patched, "remaining": len(left)}}))
"""
    sed = (f"{FETCH_SITES} | wc -l; {FETCH_SED} $(grep -rl 'fetch_config(\"' proj/shop); "
           f"{FETCH_SITES} | wc -l")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=sed)]
        before, after = (int(n) for n in _lines(res))
        return {"patched": before - after, "remaining": after}

    def shell_script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
before, after = (int(n) for n in terminal({sed!r})["output"].split())
print(json.dumps({{"patched": before - after, "remaining": after}}))
"""
    return Workflow("rename-fetch-config-sites", FAMILY,
                    "Replace each fetch_config(...) call site with load_settings(...) and "
                    "verify none is left.", plan, script, toolsets=TOOLSETS, mutates=True,
                    cluster="rename-call-sites", alternatives=_shell(shell_plan, shell_script),
                    truth=lambda fx: {"patched": sum(fx.truth.fetch_calls.values()),
                                      "remaining": 0},
                    answer_format='{"patched": <sites patched>, "remaining": <sites left>}')


def rename_all_and_test() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        legacy, fetch = yield [call("terminal", command=LEGACY_FILES),
                               call("terminal", command=FETCH_SITES)]
        fetch_files = sorted({ln.split(":", 1)[0] for ln in _lines(fetch)})
        done = 0
        # two patches of one file never run at once: the legacy ones, then the fetch ones
        for paths, old, new in ((_lines(legacy), "legacy_round(x", "round_money(x"),
                                (fetch_files, 'fetch_config("', 'load_settings("')):
            results = yield [call("patch", path=p, old_string=old, new_string=new,
                                  replace_all=True) for p in paths]
            done += sum(bool(r.get("success")) for r in results)
        (run,) = yield [call("terminal", command=TESTS)]
        return {"patches": done, "summary": _lines(run)[-1]}

    def script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import patch, terminal
legacy = terminal({LEGACY_FILES!r})["output"].split()
fetch = sorted({{ln.split(":")[0] for ln in terminal({FETCH_SITES!r})["output"].splitlines()}})
done = 0
for path in legacy:
    done += bool(patch(path=path, old_string="legacy_round(x", new_string="round_money(x",
                       replace_all=True).get("success"))
for path in fetch:
    done += bool(patch(path=path, old_string='fetch_config("', new_string='load_settings("',
                       replace_all=True).get("success"))
summary = terminal({TESTS!r})["output"].strip()
print(json.dumps({{"patches": done, "summary": summary}}))
"""

    def truth(fx: Fixtures) -> dict[str, Any]:
        # every buggy module fails both of its tests
        return {"patches": len(fx.truth.legacy_calls) + len(fx.truth.fetch_calls),
                "summary": f"FAILED (failures={2 * len(fx.truth.failing_tests)})"}

    sed = (f"legacy=$({LEGACY_FILES}); fetch=$(grep -rl 'fetch_config(\"' proj/shop "
           f"| LC_ALL=C sort); {LEGACY_SED} $legacy; {FETCH_SED} $fetch; "
           "echo $legacy $fetch | wc -w; " + TESTS)

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=sed)]
        lines = _lines(res)
        return {"patches": int(lines[0]), "summary": lines[-1]}

    def shell_script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
lines = terminal({sed!r})["output"].strip().splitlines()
print(json.dumps({{"patches": int(lines[0]), "summary": lines[-1]}}))
"""
    return Workflow("rename-all-and-test", FAMILY,
                    "Move every module off legacy_round and fetch_config, then run the tests.",
                    plan, script, toolsets=TOOLSETS, mutates=True, truth=truth,
                    alternatives=_shell(shell_plan, shell_script),
                    answer_format='{"patches": <files patched>, "summary": "<last line of the '
                                  'unittest output>"}')


def add_module_headers() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (mods,) = yield [call("terminal", command=MODULES)]
        paths = _lines(mods)
        heads = yield [call("read_file", path=p, offset=1, limit=1) for p in paths]
        todo = [(p, _text(h).strip()) for p, h in zip(paths, heads, strict=True)]
        todo = [(p, first) for p, first in todo if first.endswith('."""')]
        results = yield [call("patch", path=p, old_string=first,
                              new_string=first[:-3] + ' Owner: shop team."""')
                         for p, first in todo]
        return [p for (p, _), r in zip(todo, results, strict=True) if r.get("success")]

    def script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import patch, read_file, terminal
done = []
for path in terminal({MODULES!r})["output"].split():
    first = read_file(path, offset=1, limit=1)["content"].split("|", 1)[1].strip()
    if first.endswith('.\"\"\"'):
        res = patch(path=path, old_string=first,
                    new_string=first[:-3] + ' Owner: shop team.\"\"\"')
        if res.get("success"):
            done.append(path)
print(json.dumps(done))
"""
    sed = (f"for f in $({MODULES}); do head -n 1 \"$f\" | grep -q '[.]\"\"\"$' && "
           "sed -i '1s/\"\"\"$/ Owner: shop team.\"\"\"/' \"$f\" && echo \"$f\"; done")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=sed)]
        return _lines(res)

    def shell_script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
print(json.dumps(terminal({sed!r})["output"].split()))
"""
    return Workflow("add-module-headers", FAMILY,
                    "Add 'Owner: shop team.' to the docstring of every module in proj/shop.",
                    plan, script, toolsets=TOOLSETS, mutates=True, truth=_modules,
                    alternatives=_shell(shell_plan, shell_script),
                    answer_format='["proj/shop/<module>.py", ...] in path order')


def inventory_functions(n: int) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (mods,) = yield [call("terminal", command=MODULES)]
        paths = _lines(mods)[:n]
        results = yield [call("read_file", path=p) for p in paths]
        return {p: re.findall(r"^def (\w+)", _text(r), re.M)
                for p, r in zip(paths, results, strict=True)}

    def script(fx: Fixtures) -> str:
        return f"""import json, re
from hermes_tools import read_file, terminal
out = {{}}
for path in terminal({MODULES!r})["output"].split()[:{n}]:
    out[path] = re.findall(r"^ *\\d+\\|def (\\w+)", read_file(path)["content"], re.M)
print(json.dumps(out))
"""
    defs = (f"for f in $({MODULES} | head -n {n}); do echo \"== $f\"; "
            "grep -oE '^def \\w+' \"$f\"; done")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=defs)]
        out: dict[str, list[str]] = {}
        path = ""
        for line in _lines(res):
            if line.startswith("== "):
                path = line[3:]
                out[path] = []
            else:
                out[path].append(line.removeprefix("def "))
        return out

    def shell_script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
out = {{}}
for line in terminal({defs!r})["output"].splitlines():
    if line.startswith("== "):
        path = line[3:]
        out[path] = []
    elif line.startswith("def "):
        out[path].append(line[4:])
print(json.dumps(out))
"""
    return Workflow(f"inventory-functions-{n}", FAMILY,
                    f"List the functions defined in the first {n} modules of proj/shop "
                    "(sorted by path).", plan, script, toolsets=TOOLSETS,
                    truth=lambda fx: {p: _functions(fx, p) for p in _modules(fx)[:n]},
                    answer_format='{"proj/shop/<module>.py": ["<function>", ...] in source '
                                  'order}', alternatives=_shell(shell_plan, shell_script))


WORKFLOWS = [
    inventory_functions(5),
    find_legacy_callers(),
    rename_legacy_round(),
    rename_fetch_config_each_site(),
    rename_all_and_test(),
    add_module_headers(),
]
