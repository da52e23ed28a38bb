"""Where execute_code does not pay: tasks of 1-3 calls, and tasks one shell command answers.

The sequential plans here are what a shell-savvy agent does: one ``grep``/``awk`` pipeline
over all the files instead of reading each. The script makes the same calls, so the
programmatic way only adds ``execute_code``'s definition, the script and a round trip.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import fact, failing_modules, settings, unnumber
from execengine.bench.workflow import Plan, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

FAMILY = "small"
COUNT = "ls configs | wc -l"
# every config's owner/replicas (or port/region) as `path:key value` lines, whatever the format
PAIRS = ("grep -rHoE '\"?({keys})\"?[[:space:]]*[:=][[:space:]]*\"?[A-Za-z0-9-]+' "
         "configs --include='config.*' | LC_ALL=C sort")
FAILS = ("python3 -m unittest discover -s proj/tests -t proj 2>&1 "
         "| grep -E '^(FAIL|ERROR):' | LC_ALL=C sort -u")
COMPILE = "python3 -m compileall -q proj >/dev/null 2>&1; echo $?"


def _out(result: Any) -> str:
    return str(result.get("output", ""))


def _pairs(output: str) -> dict[str, dict[str, str]]:
    """``{path: {key: value}}`` from the grep lines of :data:`PAIRS`."""
    out: dict[str, dict[str, str]] = {}
    for line in output.splitlines():
        path, _, hit = line.partition(":")
        m = re.match(r'"?(\w+)"?\s*[:=]\s*"?([\w-]+)', hit)
        if m:
            out.setdefault(path, {})[m.group(1)] = m.group(2)
    return out


def _first_service(fx: Fixtures) -> Any:
    return sorted(fx.truth.services, key=lambda s: s.name)[0]


def count_services() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=COUNT)]
        return int(_out(res).strip())

    def script(fx: Fixtures) -> str:
        return ("from hermes_tools import terminal\n"
                f"print(int(terminal({COUNT!r})['output']))\n")
    return Workflow("count-services", FAMILY, "How many services are there under configs/?",
                    plan, script, toolsets=("terminal",),
                    truth=lambda fx: len(fx.truth.services), answer_format="<count>")


def port_of_one() -> Workflow:
    def path(fx: Fixtures) -> str:
        s = _first_service(fx)
        return f"configs/{s.name}/config.{s.fmt}"

    def plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("read_file", path=path(fx))]
        return int(settings(unnumber(res["content"]))["port"])

    def script(fx: Fixtures) -> str:
        return f"""import re
from hermes_tools import read_file
print(re.search(r'"?port"?\\s*[:=]\\s*(\\d+)', read_file({path(fx)!r})["content"]).group(1))
"""
    return Workflow("port-of-one", FAMILY, "Which port does the service configured in "
                    "{first_config} listen on?", plan, script, toolsets=("file",),
                    truth=lambda fx: _first_service(fx).port, answer_format="<port>")


def owners_of_three() -> Workflow:
    def paths(fx: Fixtures) -> list[str]:
        return [f"configs/{s.name}/config.{s.fmt}"
                for s in sorted(fx.truth.services, key=lambda s: s.name)[:3]]

    def plan(fx: Fixtures) -> Plan:
        results = yield [call("read_file", path=p) for p in paths(fx)]
        found = [settings(unnumber(r["content"])) for r in results]
        return {s["name"]: s["owner"] for s in found}

    def script(fx: Fixtures) -> str:
        return f"""import json, re
from hermes_tools import read_file
out = {{}}
for path in {paths(fx)!r}:
    text = read_file(path)["content"]
    name, owner = (re.search(r'"?' + k + r'"?\\s*[:=]\\s*"?([\\w-]+)', text).group(1)
                   for k in ("name", "owner"))
    out[name] = owner
print(json.dumps(out))
"""
    return Workflow("owners-of-three", FAMILY, "Which team owns each of the services "
                    "configured in {first_three_configs}?", plan, script,
                    toolsets=("file",),
                    truth=lambda fx: {s.name: s.owner for s in
                                      sorted(fx.truth.services, key=lambda s: s.name)[:3]},
                    answer_format='{"<service>": "<team>"}')


def license_of_one() -> Workflow:
    def title(fx: Fixtures) -> str:
        return fx.truth.projects[0].title

    def plan(fx: Fixtures) -> Plan:
        (found,) = yield [call("web_search", query=title(fx), limit=1)]
        url = found["data"]["web"][0]["url"]
        (page,) = yield [call("web_extract", urls=[url])]
        return fact(page["results"][0]["content"], "License")

    def script(fx: Fixtures) -> str:
        return f"""import json, re
from hermes_tools import web_extract, web_search
url = web_search({title(fx)!r}, limit=1)["data"]["web"][0]["url"]
page = web_extract([url])["results"][0]["content"]
print(json.dumps(re.search(r"License: (\\S+)", page).group(1)))
"""
    return Workflow("license-of-one", FAMILY, "What is the license of the project "
                    "'{first_project}'? Search for it and read its page.", plan, script,
                    toolsets=("web",),
                    truth=lambda fx: fx.truth.projects[0].license, answer_format='"<license>"')


def _pairs_script(command: str) -> str:
    """The start of a script that runs ``command`` (a grep of ``key: value`` lines) and
    collects ``found[path][key] = value``."""
    return f"""import json, re
from hermes_tools import terminal
found = {{}}
for line in terminal({command!r})["output"].splitlines():
    path, _, hit = line.partition(":")
    key, value = re.match(r'"?(\\w+)"?\\s*[:=]\\s*"?([\\w-]+)', hit).groups()
    found.setdefault(path, {{}})[key] = value
"""


def replicas_per_team_shell() -> Workflow:
    command = PAIRS.format(keys="owner|replicas")

    def plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=command)]
        out: dict[str, int] = {}
        for kv in _pairs(_out(res)).values():
            out[kv["owner"]] = out.get(kv["owner"], 0) + int(kv["replicas"])
        return dict(sorted(out.items()))

    def script(fx: Fixtures) -> str:
        return _pairs_script(command) + """out = {}
for kv in found.values():
    out[kv["owner"]] = out.get(kv["owner"], 0) + int(kv["replicas"])
print(json.dumps(out))
"""

    def truth(fx: Fixtures) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in fx.truth.services:
            out[s.owner] = out.get(s.owner, 0) + s.replicas
        return out

    return Workflow("replicas-per-team-shell", FAMILY,
                    "Total replicas per owning team across every service config under configs/ "
                    "(one grep over all configs).", plan, script, toolsets=("terminal",),
                    truth=truth, answer_format='{"<team>": <total replicas>}')


def ports_by_region_shell() -> Workflow:
    command = PAIRS.format(keys="port|region")

    def plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=command)]
        out: dict[str, list[int]] = {}
        for kv in _pairs(_out(res)).values():
            out.setdefault(kv["region"], []).append(int(kv["port"]))
        return {r: sorted(p) for r, p in sorted(out.items())}

    def script(fx: Fixtures) -> str:
        return _pairs_script(command) + """out = {}
for kv in found.values():
    out.setdefault(kv["region"], []).append(int(kv["port"]))
print(json.dumps({r: sorted(v) for r, v in out.items()}))
"""

    def truth(fx: Fixtures) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for s in fx.truth.services:
            out.setdefault(s.region, []).append(s.port)
        return {r: sorted(p) for r, p in out.items()}

    return Workflow("ports-by-region-shell", FAMILY,
                    "The ports of every service under configs/, grouped by region (one grep "
                    "over all configs).", plan, script, toolsets=("terminal",), truth=truth,
                    answer_format='{"<region>": [<port>, ...] ascending}')


def failing_tests_shell() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=FAILS)]
        return failing_modules(_out(res))

    def script(fx: Fixtures) -> str:
        return f"""import json, re
from hermes_tools import terminal
out = terminal({FAILS!r})["output"]
print(json.dumps(sorted(set(re.findall(r"\\((tests\\.test_\\w+)\\.", out)))))
"""
    return Workflow("failing-tests-shell", FAMILY,
                    "Which test modules fail? (one test run, filtered by grep)", plan, script,
                    toolsets=("terminal",), truth=lambda fx: sorted(fx.truth.failing_tests),
                    answer_format='["tests.test_<module>", ...] sorted')


def compile_all_shell() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=COMPILE)]
        return int(_out(res).strip()) == 0

    def script(fx: Fixtures) -> str:
        return ("import json\nfrom hermes_tools import terminal\n"
                f"print(json.dumps(terminal({COMPILE!r})['output'].strip() == '0'))\n")
    return Workflow("compile-all-shell", FAMILY,
                    "Does every Python file under proj/ byte-compile? (one compileall run)",
                    plan, script, toolsets=("terminal",), truth=lambda fx: True,
                    answer_format="true or false")


WORKFLOWS = [
    count_services(),
    port_of_one(),
    owners_of_three(),
    license_of_one(),
    failing_tests_shell(),
    compile_all_shell(),
    replicas_per_team_shell(),
    ports_by_region_shell(),
]
