"""The chat-completions client and the scripted fake."""

from __future__ import annotations

import socket

import pytest

from execengine.agent.client import (
    ChatCompletionsClient,
    ChatResponse,
    ScriptedModel,
    parse_completion,
)
from execengine.config import Config
from execengine.errors import ConfigError, ExecEngineError, ModelError

from .conftest import HttpStatus, reply


def test_url_building():
    assert ChatCompletionsClient("http://h/v1/", "m").url == "http://h/v1/chat/completions"
    assert ChatCompletionsClient("http://h/v1/chat/completions", "m").url == \
        "http://h/v1/chat/completions"


def test_from_config_precedence():
    cfg = Config().with_overrides({"agent.base_url": "http://cfg/v1",
                                   "agent.api_key_env": "MY_KEY"})
    env = {"OPENAI_BASE_URL": "http://env/v1", "EXECENGINE_MODEL": "env-model",
           "MY_KEY": "k1", "OPENAI_API_KEY": "other"}
    c = ChatCompletionsClient.from_config(cfg, environ=env)
    assert (c.url, c.model) == ("http://cfg/v1/chat/completions", "env-model")
    assert c._headers["Authorization"] == "Bearer k1"
    c = ChatCompletionsClient.from_config(Config(), base_url="http://arg/v1", model="m",
                                          environ={"OPENAI_BASE_URL": "http://env/v1"})
    assert c.url.startswith("http://arg/") and "Authorization" not in c._headers


@pytest.mark.parametrize("kw, key", [({"base_url": "", "model": "m"}, "agent.base_url"),
                                     ({"base_url": "http://x", "model": ""}, "agent.model")])
def test_missing_endpoint_or_model_is_a_config_error(kw, key):
    with pytest.raises(ConfigError) as info:
        ChatCompletionsClient(**kw)
    assert info.value.key == key


@pytest.mark.parametrize("body, message", [
    ([], "not a JSON object"),
    ({"choices": []}, "no choices"),
    ({"error": {"message": "quota exceeded"}}, "quota exceeded"),
    ({"choices": [{"finish_reason": "stop"}]}, "no message"),
])
def test_malformed_completions_raise(body, message):
    with pytest.raises(ModelError, match=message):
        parse_completion(body)


def test_parse_completion():
    r = parse_completion(reply("hi"))
    assert (r.message["content"], r.finish_reason, r.usage["total_tokens"]) == ("hi", "stop", 15)


def test_invalid_json_body(chat_server):
    chat_server.play(HttpStatus(200, "<html>gateway</html>"))
    with pytest.raises(ModelError, match="invalid JSON"):
        ChatCompletionsClient(chat_server.base_url, "m").complete([], None)


def test_retries_stop_after_max(chat_server):
    chat_server.play(*[HttpStatus(429, {"error": {"message": "slow down"}})] * 3)
    client = ChatCompletionsClient(chat_server.base_url, "m", max_retries=2,
                                   retry_backoff=0.01)
    with pytest.raises(ModelError) as info:
        client.complete([{"role": "user", "content": "x"}], None)
    assert info.value.status == 429 and "slow down" in str(info.value)
    assert len(chat_server.requests) == 3
    assert isinstance(info.value, ExecEngineError)


def test_client_error_is_not_retried(chat_server):
    chat_server.play(HttpStatus(400, {"error": {"message": "bad"}}), reply("x"))
    with pytest.raises(ModelError):
        ChatCompletionsClient(chat_server.base_url, "m", retry_backoff=0.01).complete([], None)
    assert len(chat_server.requests) == 1


def test_unreachable_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ChatCompletionsClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=1,
                                   retry_backoff=0.01)
    with pytest.raises(ModelError, match="cannot reach"):
        client.complete([], None)


def test_silent_server_times_out():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        client = ChatCompletionsClient(f"http://127.0.0.1:{port}/v1", "m", timeout=0.3,
                                       retry_backoff=0.01)
        with pytest.raises(ModelError, match="did not answer within 0.3s"):
            client.complete([], None)


def test_tools_are_omitted_when_none(chat_server):
    chat_server.play(reply("a"), reply("b"))
    client = ChatCompletionsClient(chat_server.base_url, "m")
    client.complete([], None)
    client.complete([], [{"type": "function", "function": {"name": "t"}}])
    assert "tools" not in chat_server.requests[0] and chat_server.requests[1]["tools"]


def test_scripted_model_records_and_runs_out():
    model = ScriptedModel([{"role": "assistant", "content": "x"},
                           ChatResponse({"role": "assistant", "content": "y"}, "length")])
    assert model.complete([{"role": "user", "content": "q"}], None).finish_reason == "stop"
    assert model.complete([], None).finish_reason == "length"
    assert model.requests[0]["messages"] == [{"role": "user", "content": "q"}]
    with pytest.raises(ModelError, match="no responses left"):
        model.complete([], None)
