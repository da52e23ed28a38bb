"""Runs under the reference's interpreter (hermes-agent installed): Hermes discovers the
execengine plugin through its entry point and its config, then every case below goes
through Hermes' own dispatcher (``model_tools.handle_function_call``), as a model's
``execute_code`` call does. Prints one JSON object: ``{case: result}``.

The cases are the reference's ``execute_code`` behaviours (docs/compatibility.md and the
reference's own tests: basic print, one tool call, concurrent calls, a failing script, the
helpers, timeout, the tool-call limit, a tool outside the set, empty code, the child's
environment, interrupt) plus what the plugin adds (a tool error, MCP tools, sessions).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

os.environ["TERMINAL_ENV"] = "local"
out = {}

import model_tools  # noqa: E402  (discovers built-in tools, then plugins)
from hermes_cli.plugins import get_plugin_manager  # noqa: E402
from tools.interrupt import set_interrupt  # noqa: E402
from tools.registry import registry  # noqa: E402

entry = registry.get_entry("execute_code")
out["handler_module"] = getattr(entry.handler, "__module__", "")
out["plugins"] = {name: {"enabled": p.enabled, "error": p.error}
                  for name, p in get_plugin_manager()._plugins.items()
                  if name == "execengine"}


def echo_search(args, **kw):
    return json.dumps({"data": {"web": [{"title": "t", "url": "https://example.com/"
                                          + args.get("query", ""), "description": "d"}]}})


def broken(args, **kw):
    raise RuntimeError("the service is down")


async def mcp_echo(args, **kw):
    return json.dumps({"echo": args.get("text", ""), "task": kw.get("task_id")})


# no network: web_search answers at once; an MCP-like tool (async) and a failing one
registry.register(name="web_search", toolset="web", handler=echo_search,
                  schema={"name": "web_search", "description": "Search the web.",
                          "parameters": {"type": "object", "properties": {
                              "query": {"type": "string"}}, "required": ["query"]}})
registry.register(name="web_extract", toolset="web", handler=broken,
                  schema={"name": "web_extract", "description": "Extract pages.",
                          "parameters": {"type": "object", "properties": {
                              "urls": {"type": "array", "items": {"type": "string"}}}}})
registry.register(name="mcp_demo_echo", toolset="mcp-demo", handler=mcp_echo, is_async=True,
                  schema={"name": "mcp_demo_echo", "description": "Echo text back.",
                          "parameters": {"type": "object", "properties": {
                              "text": {"type": "string"}}, "required": ["text"]}})

ALL = ["terminal", "read_file", "write_file", "search_files", "patch", "web_search",
       "web_extract", "mcp_demo_echo"]


def run(code, task="t-default", tools=ALL, **kw):
    raw = model_tools.handle_function_call("execute_code", {"code": code}, task_id=task,
                                           enabled_tools=tools, **kw)
    return json.loads(raw)


out["basic"] = run('print("hello world")')
out["one_call"] = run('from hermes_tools import terminal\n'
                      'r = terminal("echo hello")\nprint(r.get("output", ""))')
out["concurrent"] = run('''
from concurrent.futures import ThreadPoolExecutor
from hermes_tools import terminal
def call(i):
    return i, terminal(f"echo TAG-{i}").get("output", "")
with ThreadPoolExecutor(10) as ex:
    results = list(ex.map(call, range(10)))
bad = [(i, o) for i, o in results if f"TAG-{i}" not in o]
print("MISMATCH" if bad else "OK 10/10")
''')
out["failing"] = run('print("before error")\nraise RuntimeError("deliberate crash")')
out["helpers"] = run('''
from hermes_tools import shell_quote, json_parse, retry
q = shell_quote('`rm -rf /` && $(whoami) "hello"')
assert q.startswith("'") and "rm -rf" in q
assert json_parse("\\ufeff" + '{"body": "bom-ok"}') == {"body": "bom-ok"}
def fail():
    raise ValueError("nope")
try:
    retry(fail, max_attempts=2, delay=0.01)
except ValueError as e:
    print("caught:", e)
''')
out["timeout"] = run('print("started", flush=True)\nimport time\ntime.sleep(30)')
out["limit"] = run('''
from hermes_tools import web_search
print([sorted(web_search(query=str(i))) for i in range(14)])
''')
out["outside_set"] = run('''
from _execengine.client import call_tool
print(call_tool("read_file", {"path": "x"}))
''', tools=["terminal"])
out["empty"] = json.loads(model_tools.handle_function_call(
    "execute_code", {"code": "  "}, task_id="t", enabled_tools=ALL))
os.environ["OPENAI_API_KEY"] = "sk-should-not-leak"
out["environment"] = run('import os, json\nprint(json.dumps(sorted(os.environ)))')
out["tool_error"] = run('from hermes_tools import web_extract\n'
                        'print(web_extract(urls=["https://example.com"]))')
out["mcp"] = run('''
from hermes_tools import mcp, mcp_demo_echo
print(mcp.demo.echo(text="hi"), mcp_demo_echo(text="yo"))
''', task="t-mcp")
out["fail_closed"] = run('print("ran")', tools=["vision_analyze"])
out["session_1"] = run("kept = 41", task="t-session")
out["session_2"] = run("print(kept + 1)", task="t-session")
out["session_other"] = run("print('kept' in globals())", task="t-other")
out["real_files"] = run(f'''
from hermes_tools import write_file, read_file
w = write_file(path={os.path.join(sys.argv[1], "note.txt")!r}, content="one\\ntwo\\n")
r = read_file(path={os.path.join(sys.argv[1], "note.txt")!r})
print(w.get("bytes_written"), "two" in r.get("content", ""))
''')

main_thread = threading.get_ident()
timer = threading.Timer(1.0, set_interrupt, args=(True, main_thread))
timer.start()
started = time.monotonic()
out["interrupt"] = run("import time\ntime.sleep(30)\nprint('should not reach')")
out["interrupt_seconds"] = time.monotonic() - started
set_interrupt(False, main_thread)

entry.handler.__self__.close()  # the plugin's engine and its session kernels
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)  # Hermes may leave non-daemon threads behind; what is ours is closed
