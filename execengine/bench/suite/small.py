"""Where execute_code does not pay: tasks of 1-3 calls.

The script makes the same calls, so the programmatic way only adds ``execute_code``'s
definition, the script and a round trip. (The shell strategies that answer the larger
tasks with one command are alternatives of those tasks, :mod:`~execengine.bench.suite.shell`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import fact, grep_pairs, settings, unnumber
from execengine.bench.suite import shell
from execengine.bench.workflow import Plan, Strategy, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

FAMILY = "small"
COUNT = "ls configs | wc -l"


def _out(result: Any) -> str:
    return str(result.get("output", ""))


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
    def command(fx: Fixtures) -> str:
        return shell.pairs("port", files=f"echo {path(fx)}")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=command(fx))]
        return int(grep_pairs(_out(res))[path(fx)]["port"])

    def shell_script(fx: Fixtures) -> str:
        return shell.pairs_script(command(fx), imports="re") + \
            f"print(int(found[{path(fx)!r}]['port']))\n"
    return Workflow("port-of-one", FAMILY, "Which port does the service configured in "
                    "{first_config} listen on?", plan, script, toolsets=("file", "terminal"),
                    alternatives=(Strategy("shell", shell_plan, shell_script),),
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
    def command(fx: Fixtures) -> str:
        return shell.pairs("name|owner", files=f"echo {' '.join(paths(fx))}")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=command(fx))]
        return {s["name"]: s["owner"] for s in grep_pairs(_out(res)).values()}

    def shell_script(fx: Fixtures) -> str:
        return shell.pairs_script(command(fx)) + \
            'print(json.dumps({c["name"]: c["owner"] for c in found.values()}))\n'
    return Workflow("owners-of-three", FAMILY, "Which team owns each of the services "
                    "configured in {first_three_configs}?", plan, script,
                    toolsets=("file", "terminal"),
                    alternatives=(Strategy("shell", shell_plan, shell_script),),
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


WORKFLOWS = [
    count_services(),
    port_of_one(),
    owners_of_three(),
    license_of_one(),
]
