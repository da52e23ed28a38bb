"""Build-and-test loops: run the tests, parse failures, read (and fix) the failing files.

Naive strategies read and patch with the file tools; shell ones filter the test output with
``grep`` and edit with ``sed -i``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import failing_modules, unnumber
from execengine.bench.workflow import Plan, Strategy, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

FAMILY = "build"
TOOLSETS = ("file", "terminal")
RUN_TESTS = "python3 -m unittest discover -s proj/tests -t proj 2>&1"
TEST_FILES = "find proj/tests -name 'test_*.py' | LC_ALL=C sort"
ALL_FILES = "find proj -name '*.py' | LC_ALL=C sort"
BUG = "sum(prices) * (1 + tax) - 1)"
FIXED = "sum(prices) * (1 + tax))"
BUGGY_LINE = "return round_money(sum(prices) * (1 + tax) - 1)  # off by one"
#: the test run, only its FAIL/ERROR lines
FAILS = RUN_TESTS + " | grep -E '^(FAIL|ERROR):' | LC_ALL=C sort -u"
#: the fix as a sed expression (the same edit as the patch of BUG to FIXED)
SED_FIX = "sed -i 's/(1 + tax) - 1)/(1 + tax))/'"

# How a script finds the failing test modules in unittest's output, and the module a test
# exercises (its own code; a script carries only what it uses).
SCRIPT_FAILING_ONLY = '''def failing(output):
    return sorted(set(re.findall(r"^(?:FAIL|ERROR): \\w+ \\((tests\\.test_\\w+)\\.", output, re.M)))

'''
SCRIPT_FAILING = SCRIPT_FAILING_ONLY + '''def source_of(module):
    return "proj/shop/" + module.split(".")[-1][len("test_"):] + ".py"

'''


def source_of(test_module: str) -> str:
    return "proj/shop/" + test_module.split(".")[-1][len("test_"):] + ".py"


def run_one(test_path: str) -> str:
    name = test_path.rsplit("/", 1)[-1]
    return f"python3 -m unittest discover -s proj/tests -t proj -p {name} 2>&1"


def _out(result: Any) -> str:
    return str(result.get("output", ""))


def _shell(plan: Any, script: Any) -> tuple[Strategy, ...]:
    return (Strategy("shell", plan, script),)


def _fails() -> Plan:
    """The shell strategies' first step: the failing test modules, from one filtered run."""
    (run,) = yield [call("terminal", command=FAILS)]
    return failing_modules(_out(run))


def _failing(fx: Fixtures) -> list[str]:
    return sorted(fx.truth.failing_tests)


def _name(test_module: str) -> str:
    return test_module.split(".")[-1][len("test_"):]


def diagnose() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (run,) = yield [call("terminal", command=RUN_TESTS)]
        mods = failing_modules(_out(run))
        sources = yield [call("read_file", path=source_of(m)) for m in mods]
        out = {}
        for mod, src in zip(mods, sources, strict=True):
            lines = [ln.strip() for ln in unnumber(src["content"]).splitlines()]
            out[mod] = next(ln for ln in lines if ln.startswith("return round_money(sum("))
        return out

    def script(fx: Fixtures) -> str:
        return "import json, re\nfrom hermes_tools import read_file, terminal\n" + \
            SCRIPT_FAILING + f"""out = {{}}
for mod in failing(terminal({RUN_TESTS!r})["output"]):
    for line in read_file(source_of(mod))["content"].splitlines():
        code = line.split("|", 1)[1].strip()
        if code.startswith("return round_money(sum("):
            out[mod] = code
            break
print(json.dumps(out))
"""
    def shell_plan(fx: Fixtures) -> Plan:
        mods = yield from _fails()
        files = " ".join(source_of(m) for m in mods)
        (hits,) = yield [call("terminal", command=f"grep -H 'return round_money(sum(' {files}")]
        lines = dict(ln.split(":", 1) for ln in _out(hits).splitlines() if ":" in ln)
        return {m: lines[source_of(m)].strip() for m in mods}

    def shell_script(fx: Fixtures) -> str:
        return "import json, re\nfrom hermes_tools import terminal\n" + SCRIPT_FAILING + \
            f"""mods = failing(terminal({FAILS!r})["output"])
files = " ".join(source_of(m) for m in mods)
hits = terminal("grep -H 'return round_money(sum(' " + files)["output"].splitlines()
lines = dict(ln.split(":", 1) for ln in hits)
print(json.dumps({{m: lines[source_of(m)].strip() for m in mods}}))
"""
    return Workflow("diagnose-failures", FAMILY,
                    "Run the test suite and show the line computing the total in the module "
                    "behind each failing test.", plan, script, toolsets=TOOLSETS,
                    alternatives=_shell(shell_plan, shell_script),
                    truth=lambda fx: {m: BUGGY_LINE for m in _failing(fx)},
                    answer_format='{"tests.test_<module>": "<the stripped source line>"}')


def fix_failing() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (run,) = yield [call("terminal", command=RUN_TESTS)]
        paths = [source_of(m) for m in failing_modules(_out(run))]
        sources = yield [call("read_file", path=p) for p in paths]
        todo = [p for p, s in zip(paths, sources, strict=True) if BUG in s["content"]]
        results = yield [call("patch", path=p, old_string=BUG, new_string=FIXED) for p in todo]
        fixed = [p for p, r in zip(todo, results, strict=True) if r.get("success")]
        (again,) = yield [call("terminal", command=RUN_TESTS)]
        return {"fixed": sorted(fixed), "still_failing": failing_modules(_out(again))}

    def script(fx: Fixtures) -> str:
        return "import json, re\nfrom hermes_tools import patch, read_file, terminal\n" + \
            SCRIPT_FAILING + f"""fixed = []
for mod in failing(terminal({RUN_TESTS!r})["output"]):
    path = source_of(mod)
    if {BUG!r} in read_file(path)["content"]:
        if patch(path=path, old_string={BUG!r}, new_string={FIXED!r}).get("success"):
            fixed.append(path)
again = failing(terminal({RUN_TESTS!r})["output"])
print(json.dumps({{"fixed": fixed, "still_failing": again}}))
"""
    def fix_cmd(paths: list[str]) -> str:
        return (f"for f in {' '.join(paths)}; do grep -qF {BUG!r} \"$f\" && {SED_FIX} \"$f\" "
                f"&& echo \"fixed $f\"; done; {FAILS}")

    def shell_plan(fx: Fixtures) -> Plan:
        paths = [source_of(m) for m in (yield from _fails())]
        (res,) = yield [call("terminal", command=fix_cmd(paths))]
        out = _out(res)
        fixed = [ln[len("fixed "):] for ln in out.splitlines() if ln.startswith("fixed ")]
        return {"fixed": sorted(fixed), "still_failing": failing_modules(out)}

    def shell_script(fx: Fixtures) -> str:
        return "import json, re\nfrom hermes_tools import terminal\n" + SCRIPT_FAILING + \
            f"""paths = [source_of(m) for m in failing(terminal({FAILS!r})["output"])]
out = terminal("for f in " + " ".join(paths) + {fix_cmd([])[len("for f in "):]!r})["output"]
fixed = sorted(ln[6:] for ln in out.splitlines() if ln.startswith("fixed "))
print(json.dumps({{"fixed": fixed, "still_failing": failing(out)}}))
"""
    return Workflow("fix-failing-tests", FAMILY,
                    "Run the tests, fix the off-by-one in each failing module, run them again.",
                    plan, script, toolsets=TOOLSETS, mutates=True, cluster="fix-tests",
                    alternatives=_shell(shell_plan, shell_script),
                    truth=lambda fx: {"fixed": sorted("proj/" + p for p in
                                                      fx.truth.failing_tests.values()),
                                      "still_failing": []},
                    answer_format='{"fixed": ["proj/shop/<module>.py", ...] sorted, '
                                  '"still_failing": ["tests.test_<module>", ...]}')


def per_module_tests() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (files,) = yield [call("terminal", command=TEST_FILES)]
        runs = yield [call("terminal", command=run_one(p)) for p in _out(files).split()]
        return sorted(m for r in runs for m in failing_modules(_out(r)))

    def script(fx: Fixtures) -> str:
        return "import json, re\nfrom hermes_tools import terminal\n" + SCRIPT_FAILING_ONLY + \
            f"""found = []
for path in terminal({TEST_FILES!r})["output"].split():
    name = path.rsplit("/", 1)[-1]
    found += failing(terminal("python3 -m unittest discover -s proj/tests -t proj -p "
                              + name + " 2>&1")["output"])
print(json.dumps(sorted(found)))
"""
    def shell_plan(fx: Fixtures) -> Plan:
        return (yield from _fails())

    def shell_script(fx: Fixtures) -> str:
        return f"""import json, re
from hermes_tools import terminal
out = terminal({FAILS!r})["output"]
print(json.dumps(sorted(set(re.findall(r"\\((tests\\.test_\\w+)\\.", out)))))
"""
    return Workflow("failing-tests", FAMILY,
                    "Which test modules fail?", plan, script, toolsets=TOOLSETS, truth=_failing,
                    alternatives=_shell(shell_plan, shell_script),
                    answer_format='["tests.test_<module>", ...] sorted')


def _all_files(fx: Fixtures) -> int:
    # shop/__init__, shop/money, tests/__init__, and a module and its test per module
    return 3 + 2 * len(fx.truth.functions)


def compile_all() -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (files,) = yield [call("terminal", command=ALL_FILES)]
        paths = _out(files).split()
        results = yield [call("terminal", command=f"python3 -m py_compile {p} 2>&1")
                         for p in paths]
        bad = [p for p, r in zip(paths, results, strict=True)
               if r.get("exit_code") not in (0, None)]
        return {"checked": len(paths), "broken": bad}

    def script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
paths = terminal({ALL_FILES!r})["output"].split()
bad = [p for p in paths if terminal("python3 -m py_compile " + p + " 2>&1")["exit_code"] != 0]
print(json.dumps({{"checked": len(paths), "broken": bad}}))
"""
    loop = (f"n=0; for f in $({ALL_FILES}); do n=$((n+1)); python3 -m py_compile \"$f\" "
            "2>/dev/null || echo \"broken $f\"; done; echo \"checked $n\"")

    def shell_plan(fx: Fixtures) -> Plan:
        (res,) = yield [call("terminal", command=loop)]
        lines = _out(res).split("\n")
        return {"checked": int(next(ln for ln in lines if ln.startswith("checked "))[8:]),
                "broken": [ln[7:] for ln in lines if ln.startswith("broken ")]}

    def shell_script(fx: Fixtures) -> str:
        return f"""import json
from hermes_tools import terminal
lines = terminal({loop!r})["output"].splitlines()
print(json.dumps({{"checked": int(lines[-1].split()[1]),
                  "broken": [ln[7:] for ln in lines if ln.startswith("broken ")]}}))
"""
    return Workflow("compile-all", FAMILY, "Byte-compile every Python file and list failures.",
                    plan, script, toolsets=TOOLSETS,
                    alternatives=_shell(shell_plan, shell_script),
                    truth=lambda fx: {"checked": _all_files(fx), "broken": []},
                    answer_format='{"checked": <files>, "broken": ["<path>", ...]}')


def failure_context() -> Workflow:
    """For each failing module: how many functions its source defines, which tests import it."""
    def plan(fx: Fixtures) -> Plan:
        (run,) = yield [call("terminal", command=RUN_TESTS)]
        mods = failing_modules(_out(run))
        got = yield [c for m in mods for c in (
            call("read_file", path=source_of(m)),
            call("terminal", command=f"grep -rl 'shop.{_name(m)} ' proj/tests | LC_ALL=C sort"))]
        out = {}
        for i, mod in enumerate(mods):
            src, users = got[2 * i], got[2 * i + 1]
            funcs = re.findall(r"^def (\w+)", unnumber(src["content"]), re.M)
            out[mod] = {"functions": len(funcs), "importers": _out(users).split()}
        return out

    def script(fx: Fixtures) -> str:
        return "import json, re\nfrom hermes_tools import read_file, terminal\n" + \
            SCRIPT_FAILING + f"""out = {{}}
for mod in failing(terminal({RUN_TESTS!r})["output"]):
    name = mod.split(".")[-1][len("test_"):]
    src = read_file(source_of(mod))["content"]
    users = terminal("grep -rl 'shop." + name + " ' proj/tests | LC_ALL=C sort")["output"]
    out[mod] = {{"functions": len(re.findall(r"^ *\\d+\\|def ", src, re.M)),
                "importers": users.split()}}
print(json.dumps(out))
"""

    def truth(fx: Fixtures) -> dict[str, Any]:
        return {m: {"functions": len(fx.truth.functions[_name(m)]),
                    "importers": [f"proj/tests/test_{_name(m)}.py"]} for m in _failing(fx)}

    def context_cmd(names: list[str]) -> str:
        return (f"for n in {' '.join(names)}; do echo \"$n $(grep -c '^def ' proj/shop/$n.py) "
                "$(grep -rl \"shop.$n \" proj/tests | LC_ALL=C sort | tr '\\n' ' ')\"; done")

    def shell_plan(fx: Fixtures) -> Plan:
        mods = yield from _fails()
        (res,) = yield [call("terminal", command=context_cmd([_name(m) for m in mods]))]
        rows = {ln.split()[0]: ln.split()[1:] for ln in _out(res).splitlines() if ln.strip()}
        return {m: {"functions": int(rows[_name(m)][0]), "importers": rows[_name(m)][1:]}
                for m in mods}

    def shell_script(fx: Fixtures) -> str:
        tail = context_cmd([])[len("for n in "):]
        return "import json, re\nfrom hermes_tools import terminal\n" + SCRIPT_FAILING_ONLY + \
            f"""mods = failing(terminal({FAILS!r})["output"])
names = [m.split(".")[-1][len("test_"):] for m in mods]
rows = {{}}
for line in terminal("for n in " + " ".join(names) + {tail!r})["output"].splitlines():
    name, count, *importers = line.split()
    rows[name] = {{"functions": int(count), "importers": importers}}
print(json.dumps({{m: rows[n] for m, n in zip(mods, names)}}))
"""
    return Workflow("failure-context", FAMILY,
                    "For each failing test module: how many functions its source defines and "
                    "which test files import it.", plan, script, toolsets=TOOLSETS, truth=truth,
                    answer_format='{"tests.test_<module>": {"functions": <count>, '
                                  '"importers": ["proj/tests/<file>.py", ...]}}',
                    alternatives=_shell(shell_plan, shell_script))


def fix_loop() -> Workflow:
    """Run every test module; read, patch and re-run the failing ones (each step one batch)."""
    def plan(fx: Fixtures) -> Plan:
        (files,) = yield [call("terminal", command=TEST_FILES)]
        tests = _out(files).split()
        runs = yield [call("terminal", command=run_one(p)) for p in tests]
        failing = [(p, m) for p, r in zip(tests, runs, strict=True)
                   for m in failing_modules(_out(r))]
        sources = yield [call("read_file", path=source_of(m)) for _, m in failing]
        todo = [(p, m) for (p, m), s in zip(failing, sources, strict=True)
                if BUG in s["content"]]
        yield [call("patch", path=source_of(m), old_string=BUG, new_string=FIXED)
               for _, m in todo]
        again = yield [call("terminal", command=run_one(p)) for p, _ in todo]
        return sorted(m for (_, m), r in zip(todo, again, strict=True)
                      if not failing_modules(_out(r)))

    def script(fx: Fixtures) -> str:
        return "import json, re\nfrom hermes_tools import patch, read_file, terminal\n" + \
            SCRIPT_FAILING + f"""def run(path):
    name = path.rsplit("/", 1)[-1]
    return terminal("python3 -m unittest discover -s proj/tests -t proj -p " + name
                    + " 2>&1")["output"]

fixed = []
for path in terminal({TEST_FILES!r})["output"].split():
    for mod in failing(run(path)):
        if {BUG!r} in read_file(source_of(mod))["content"]:
            patch(path=source_of(mod), old_string={BUG!r}, new_string={FIXED!r})
            if not failing(run(path)):
                fixed.append(mod)
print(json.dumps(sorted(fixed)))
"""
    def loop_cmd(names: list[str]) -> str:
        return (f"for n in {' '.join(names)}; do {SED_FIX} proj/shop/$n.py; "
                "python3 -m unittest discover -s proj/tests -t proj -p test_$n.py 2>&1 "
                "| grep -qE '^(FAIL|ERROR):' || echo tests.test_$n; done")

    def shell_plan(fx: Fixtures) -> Plan:
        mods = yield from _fails()
        (res,) = yield [call("terminal", command=loop_cmd([_name(m) for m in mods]))]
        return sorted(_out(res).split())

    def shell_script(fx: Fixtures) -> str:
        tail = loop_cmd([])[len("for n in "):]
        return "import json, re\nfrom hermes_tools import terminal\n" + SCRIPT_FAILING_ONLY + \
            f"""mods = failing(terminal({FAILS!r})["output"])
names = [m.split(".")[-1][len("test_"):] for m in mods]
print(json.dumps(sorted(terminal("for n in " + " ".join(names) + {tail!r})["output"].split())))
"""
    return Workflow("fix-loop", FAMILY,
                    "Go through the test modules one by one, fixing each failing one until it "
                    "passes.", plan, script, toolsets=TOOLSETS, mutates=True, truth=_failing,
                    cluster="fix-tests", alternatives=_shell(shell_plan, shell_script),
                    answer_format='["tests.test_<module>", ...] fixed, sorted')


WORKFLOWS = [
    diagnose(),
    fix_failing(),
    failure_context(),
    per_module_tests(),
    compile_all(),
    fix_loop(),
]
