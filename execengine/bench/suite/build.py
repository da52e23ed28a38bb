"""Build-and-test loops: run the tests, parse failures, read (and fix) the failing files."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import failing_modules, prelude, unnumber
from execengine.bench.workflow import Plan, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

FAMILY = "build"
TOOLSETS = ("file", "terminal")
PRELUDE = prelude("patch", "read_file", "terminal")
RUN_TESTS = "python3 -m unittest discover -s proj/tests -t proj 2>&1"
TEST_FILES = "find proj/tests -name 'test_*.py' | sort"
BUG = "sum(prices) * (1 + tax) - 1)"
FIXED = "sum(prices) * (1 + tax))"

_SCRIPT_HELPERS = """
def source_of(test_module):
    return "proj/shop/" + test_module.split(".")[-1][len("test_"):] + ".py"

def run_one(test_path):
    name = test_path.rsplit("/", 1)[-1]
    return terminal("python3 -m unittest discover -s proj/tests -t proj -p " + name + " 2>&1")
"""


def source_of(test_module: str) -> str:
    return "proj/shop/" + test_module.split(".")[-1][len("test_"):] + ".py"


def _run_one(test_path: str) -> str:
    name = test_path.rsplit("/", 1)[-1]
    return f"python3 -m unittest discover -s proj/tests -t proj -p {name} 2>&1"


def _out(result: Any) -> str:
    return str(result.get("output", ""))


def diagnose() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (run,) = yield [call("terminal", command=RUN_TESTS)]
        out = {}
        for mod in failing_modules(_out(run)):
            yield [call("read_file", path="proj/" + mod.replace(".", "/") + ".py")]
            (src,) = yield [call("read_file", path=source_of(mod))]
            lines = [ln.strip() for ln in unnumber(src["content"]).splitlines()]
            out[mod] = next(ln for ln in lines if ln.startswith("return round_money(sum("))
        return out

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
out = {{}}
for mod in failing_modules(terminal({RUN_TESTS!r})["output"]):
    read_file("proj/" + mod.replace(".", "/") + ".py")
    lines = [ln.strip() for ln in unnumber(read_file(source_of(mod))["content"]).splitlines()]
    out[mod] = next(ln for ln in lines if ln.startswith("return round_money(sum("))
print(json.dumps(out))
"""
    return Workflow("diagnose-failures", FAMILY,
                    "Run the test suite and show the line computing the total in the module "
                    "behind each failing test.", plan, script, toolsets=TOOLSETS)


def fix_failing() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (run,) = yield [call("terminal", command=RUN_TESTS)]
        fixed = []
        for mod in failing_modules(_out(run)):
            yield [call("read_file", path=source_of(mod))]
            (res,) = yield [call("patch", path=source_of(mod), old_string=BUG,
                                 new_string=FIXED)]
            if res.get("success"):
                fixed.append(source_of(mod))
        (again,) = yield [call("terminal", command=RUN_TESTS)]
        return {"fixed": fixed, "still_failing": failing_modules(_out(again))}

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
fixed = []
for mod in failing_modules(terminal({RUN_TESTS!r})["output"]):
    read_file(source_of(mod))
    if patch(path=source_of(mod), old_string={BUG!r}, new_string={FIXED!r}).get("success"):
        fixed.append(source_of(mod))
again = failing_modules(terminal({RUN_TESTS!r})["output"])
print(json.dumps({{"fixed": fixed, "still_failing": again}}))
"""
    return Workflow("fix-failing-tests", FAMILY,
                    "Run the tests, fix the off-by-one in each failing module, run them again.",
                    plan, script, toolsets=TOOLSETS, mutates=True)


def per_module_tests() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (files,) = yield [call("terminal", command=TEST_FILES)]
        failing = []
        for path in _out(files).split():
            (run,) = yield [call("terminal", command=_run_one(path))]
            failing += failing_modules(_out(run))
        return sorted(failing)

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
failing = []
for path in terminal({TEST_FILES!r})["output"].split():
    failing += failing_modules(run_one(path)["output"])
print(json.dumps(sorted(failing)))
"""
    return Workflow("per-module-tests", FAMILY,
                    "Run each test module on its own and list the ones that fail.",
                    plan, script, toolsets=TOOLSETS)


def compile_all() -> Workflow:
    listing = "find proj -name '*.py' | sort"

    def plan(fx: Fixtures) -> Plan:
        (files,) = yield [call("terminal", command=listing)]
        bad = []
        paths = _out(files).split()
        for path in paths:
            (res,) = yield [call("terminal", command=f"python3 -m py_compile {path} 2>&1")]
            if res.get("exit_code") not in (0, None):
                bad.append(path)
        return {"checked": len(paths), "broken": bad}

    def script(fx: Fixtures) -> str:
        return PRELUDE + f"""
paths = terminal({listing!r})["output"].split()
bad = [p for p in paths
       if terminal("python3 -m py_compile " + p + " 2>&1").get("exit_code") not in (0, None)]
print(json.dumps({{"checked": len(paths), "broken": bad}}))
"""
    return Workflow("compile-all", FAMILY, "Byte-compile every Python file and list failures.",
                    plan, script, toolsets=TOOLSETS)


def failure_context() -> Workflow:
    """For each failing module: its test, its source, and which tests import it."""
    def plan(fx: Fixtures) -> Plan:
        (run,) = yield [call("terminal", command=RUN_TESTS)]
        out = {}
        for mod in failing_modules(_out(run)):
            name = mod.split(".")[-1][len("test_"):]
            yield [call("read_file", path="proj/" + mod.replace(".", "/") + ".py")]
            (src,) = yield [call("read_file", path=source_of(mod))]
            (users,) = yield [call("terminal",
                                   command=f"grep -rl 'shop.{name} ' proj/tests | sort")]
            funcs = re.findall(r"^def (\w+)", unnumber(src["content"]), re.M)
            out[mod] = {"functions": len(funcs), "importers": _out(users).split()}
        return out

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
out = {{}}
for mod in failing_modules(terminal({RUN_TESTS!r})["output"]):
    name = mod.split(".")[-1][len("test_"):]
    read_file("proj/" + mod.replace(".", "/") + ".py")
    src = unnumber(read_file(source_of(mod))["content"])
    users = terminal("grep -rl 'shop." + name + " ' proj/tests | sort")["output"].split()
    out[mod] = {{"functions": len(re.findall(r"^def (\\w+)", src, re.M)), "importers": users}}
print(json.dumps(out))
"""
    return Workflow("failure-context", FAMILY,
                    "For each failing test module: how many functions its source defines and "
                    "which test files import it.", plan, script, toolsets=TOOLSETS)


def fix_loop() -> Workflow:
    """Module by module: run its tests; when they fail read, patch, run again."""
    def plan(fx: Fixtures) -> Plan:
        (files,) = yield [call("terminal", command=TEST_FILES)]
        fixed = []
        for path in _out(files).split():
            (run,) = yield [call("terminal", command=_run_one(path))]
            for mod in failing_modules(_out(run)):
                yield [call("read_file", path=source_of(mod))]
                yield [call("patch", path=source_of(mod), old_string=BUG, new_string=FIXED)]
                (again,) = yield [call("terminal", command=_run_one(path))]
                if not failing_modules(_out(again)):
                    fixed.append(mod)
        return fixed

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
fixed = []
for path in terminal({TEST_FILES!r})["output"].split():
    for mod in failing_modules(run_one(path)["output"]):
        read_file(source_of(mod))
        patch(path=source_of(mod), old_string={BUG!r}, new_string={FIXED!r})
        if not failing_modules(run_one(path)["output"]):
            fixed.append(mod)
print(json.dumps(fixed))
"""
    return Workflow("fix-loop", FAMILY,
                    "Go through the test modules one by one, fixing each failing one until it "
                    "passes.", plan, script, toolsets=TOOLSETS, mutates=True)


WORKFLOWS = [
    diagnose(),
    fix_failing(),
    failure_context(),
    per_module_tests(),
    compile_all(),
    fix_loop(),
]
