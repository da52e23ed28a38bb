"""Live mode end to end against a scripted model endpoint on loopback that speaks the OpenAI
and Anthropic API shapes and reports usage as providers do (cached prefix, reasoning)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from execengine.bench.cost import load_prices
from execengine.bench.live.providers import make_provider, parse_target, to_anthropic
from execengine.bench.live.run import final_answer, run_live, summarize_live, wilson
from execengine.bench.suite import by_name
from execengine.cli import main

COUNT = "ls configs | wc -l"
SCRIPT = "from hermes_tools import terminal\nprint(int(terminal('ls configs | wc -l')['output']))\n"


class ScriptedModel:
    """A model that does count-services: with execute_code offered it writes a script, else
    it calls terminal; it reads the answer off the tool result. Its first final answer in
    tools mode is off by one; the first request can be refused with a 429."""

    def __init__(self, *, rate_limit_first: bool = False) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.rate_limit = rate_limit_first
        self.wrong_once = True
        self.previous: list[Any] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with model._lock:
                    status, reply = model.answer(self.path, body, dict(self.headers))
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def answer(self, path: str, body: dict[str, Any], headers: dict[str, str]
               ) -> tuple[int, dict[str, Any]]:
        self.requests.append((path, body))
        if self.rate_limit:
            self.rate_limit = False
            return 429, {"error": {"message": "slow down"}}
        anthropic = path.endswith("/messages")
        msgs = body["messages"]
        tools = [t["name"] if anthropic else t["function"]["name"] for t in body["tools"]]
        results = _tool_results(msgs, anthropic)
        code = "execute_code" in tools
        text, call = "", None
        if not results:
            call = ("execute_code", {"code": SCRIPT}) if code else ("terminal",
                                                                   {"command": COUNT})
        else:
            last = json.loads(results[-1])
            n = int(str(last["output"]).strip().splitlines()[-1])
            if not code and self.wrong_once:
                self.wrong_once, n = False, n + 1
            text = f"Counted the folders.\n{n}"
        # usage as providers report it: the prompt, the part of it seen in the previous
        # request (cached, in 128-token steps from 1024), completion with reasoning
        prompt_text = json.dumps([body.get("system", ""), msgs, body["tools"]])
        prompt = len(prompt_text) // 4
        shared = len(self.previous) if msgs[:len(self.previous)] == self.previous else 0
        cached = 0 if not shared or prompt < 1024 else 1024 + (prompt // 2 - 1024) // 128 * 128
        cached = max(0, min(cached, prompt))
        self.previous = list(msgs)
        completion = 40 if call is None else 60
        if anthropic:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            if call:
                content.append({"type": "tool_use", "id": f"toolu_{len(self.requests):024d}",
                                "name": call[0], "input": call[1]})
            return 200, {"id": "msg", "type": "message", "role": "assistant",
                         "content": content, "stop_reason": "tool_use" if call else "end_turn",
                         "usage": {"input_tokens": prompt - cached - 10,
                                   "cache_read_input_tokens": cached,
                                   "cache_creation_input_tokens": 10,
                                   "output_tokens": completion}}
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        if call:
            msg["tool_calls"] = [{"id": f"call_{len(self.requests):024d}", "type": "function",
                                  "function": {"name": call[0],
                                               "arguments": json.dumps(call[1])}}]
        return 200, {"id": "c", "object": "chat.completion", "model": body["model"],
                     "choices": [{"index": 0, "message": msg,
                                  "finish_reason": "tool_calls" if call else "stop"}],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion,
                               "prompt_tokens_details": {"cached_tokens": cached},
                               "completion_tokens_details": {"reasoning_tokens": 12}}}


def _tool_results(msgs: list[dict[str, Any]], anthropic: bool) -> list[str]:
    if not anthropic:
        return [m["content"] for m in msgs if m["role"] == "tool"]
    return [b["content"] for m in msgs if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    srv = ScriptedModel(rate_limit_first=True)
    try:
        yield srv
    finally:
        srv.close()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_live_runs_check_answers_and_record_usage(scripted: ScriptedModel, api: str) -> None:
    provider = make_provider(f"{scripted.base}/scripted-1", api=api, api_key="k",
                             retry_backoff=0.01)
    wf = by_name()["count-services"]
    runs = run_live(provider, [wf], runs=2, modes=("tools", "code"))
    assert [(r.mode, r.success) for r in runs] == [("tools", False), ("tools", True),
                                                   ("code", True), ("code", True)]
    assert all(not r.error for r in runs), [r.error for r in runs]
    assert runs[0].answer == 41 and runs[1].answer == 40  # 40 services, the first off by one
    assert runs[0].retries == 1 and sum(r.retries for r in runs) == 1
    assert all(r.model_calls == 2 and r.tool_calls == 1 for r in runs)
    assert all(r.usage.prompt > 0 and r.usage.completion == 100 for r in runs)
    if api == "openai":
        assert all(r.usage.reasoning == 24 for r in runs)
        assert scripted.requests[1][1]["messages"][0]["role"] == "system"
    else:
        assert all(r.usage.cache_write == 20 for r in runs)
        assert scripted.requests[1][0] == "/v1/messages" and scripted.requests[1][1]["system"]
    # the code-mode run really went through execute_code, with the task's answer shape
    code_req = next(b for p, b in scripted.requests[1:] if "execute_code" in json.dumps(
        b["tools"]))
    assert "JSON on the last line" in json.dumps(code_req["messages"])
    summary = summarize_live(runs, load_prices().sheet(), model="scripted")
    tools, code = summary["by_mode"]["tools"], summary["by_mode"]["code"]
    assert (tools["successes"], code["successes"]) == (1, 2)
    assert tools["success_ci95"][0] < 0.5 < tools["success_ci95"][1]
    assert code["cost"]["mean"] > 0 and code["cost"]["ci95"][0] <= code["cost"]["mean"]
    assert "code_vs_tools" in summary and len(summary["runs"]) == 4


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_cli_live_mode_beside_the_oracle(tmp_path: Any, capsys: pytest.CaptureFixture[str],
                                         api: str) -> None:
    """The documented recipe, against an endpoint of each API shape on loopback: N runs per
    task and mode, success, the reported usage, and the oracle's figures beside them."""
    srv = ScriptedModel()
    try:
        out = tmp_path / "live.json"
        rc = main(["bench", "tokens", "--model", f"{srv.base}/scripted-1", "--api", api,
                   "--only", "count-services", "--runs", "2", "--modes", "tools,code",
                   "--out", str(out)])
    finally:
        srv.close()
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert rc == 1  # the first tools run answers off by one: exit 1
    assert data["by_mode"]["tools"]["successes"] == 1 and data["by_mode"]["code"]["successes"] == 2
    assert data["model"].endswith("scripted-1") and data["prices"]["sheet"] == "gpt-4.1"
    oracle = data["oracle"]["by_workflow"]["count-services"]
    assert data["oracle"]["right"] and oracle["tools"]["model_calls"] == 2
    assert oracle["tools"]["cost"] > 0 and oracle["code"]["strategy"] == "naive"
    beside = data["beside_oracle"]["count-services"]
    assert beside["tools"]["success_rate"] == 0.5 and beside["code"]["success_rate"] == 1.0
    assert beside["tools"]["live_prompt_tokens"] > 0 and beside["tools"]["oracle_prompt_tokens"] > 0
    assert beside["code"]["live_model_calls"] == 2.0 == beside["code"]["oracle_model_calls"]
    if api == "openai":  # reasoning tokens as the API reported them (12 per request)
        assert beside["tools"]["live_reasoning_tokens"] == 24.0
    assert set(beside["code_vs_tools"]) == {"live", "oracle_bound"}
    assert "beside the oracle" in text and "oracle bound" in text


def test_targets_answers_and_intervals() -> None:
    assert parse_target("https://api.openai.com/v1/gpt-4.1") == ("https://api.openai.com/v1",
                                                                 "gpt-4.1")
    assert parse_target("https://openrouter.ai/api/v1/openai/gpt-4o") == (
        "https://openrouter.ai/api/v1", "openai/gpt-4o")
    assert parse_target("http://127.0.0.1:8000/qwen") == ("http://127.0.0.1:8000", "qwen")
    with pytest.raises(ValueError, match="URL/NAME"):
        parse_target("gpt-4o")
    assert final_answer("Here it is:\n```json\n{\"a\": 1}\n```") == {"a": 1}
    assert final_answer("The answer:\n[1, 2]") == [1, 2]
    with pytest.raises(ValueError, match="no JSON"):
        final_answer("I could not do it.")
    lo, hi = wilson(8, 10)
    assert 0.44 < lo < 0.5 and 0.94 < hi < 0.98
    blocks = to_anthropic([{"role": "user", "content": "t"},
                           {"role": "assistant", "content": None, "tool_calls": [
                               {"id": "a", "function": {"name": "x", "arguments": "{}"}},
                               {"id": "b", "function": {"name": "y", "arguments": "{}"}}]},
                           {"role": "tool", "tool_call_id": "a", "content": "1"},
                           {"role": "tool", "tool_call_id": "b", "content": "2"}])
    assert [m["role"] for m in blocks] == ["user", "assistant", "user"]
    assert [b["tool_use_id"] for b in blocks[2]["content"]] == ["a", "b"]
    assert blocks[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
