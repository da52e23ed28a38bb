from __future__ import annotations

import gzip
import json
import types

import pytest

from execengine.bench import tokens
from execengine.bench.tokens import TokenCounter
from execengine.errors import BenchError

pytest.importorskip("tiktoken")


@pytest.fixture(scope="module")
def o200k() -> TokenCounter:
    return TokenCounter("o200k_base")


@pytest.fixture(scope="module")
def cl100k() -> TokenCounter:
    return TokenCounter("cl100k_base")


# Token ids published for these strings by OpenAI's tokenizer documentation.
@pytest.mark.parametrize(("name", "text", "ids"), [
    ("o200k_base", "hello world", [24912, 2375]),
    ("o200k_base", "tiktoken is great!", [83, 8251, 2488, 382, 2212, 0]),
    ("cl100k_base", "hello world", [15339, 1917]),
    ("cl100k_base", "tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
])
def test_known_token_ids(name: str, text: str, ids: list[int]) -> None:
    assert tokens.get_encoding(name).encode(text) == ids


def test_encodings_differ_and_round_trip(o200k: TokenCounter, cl100k: TokenCounter) -> None:
    text = "def f(x):\n    return {'ключ': x ** 2}  # 日本語 🙂\n"
    assert o200k.encoding.decode(o200k.encoding.encode(text)) == text
    assert cl100k.encoding.decode(cl100k.encoding.encode(text)) == text
    assert o200k.encoding.encode(text) != cl100k.encoding.encode(text)
    assert o200k.encoding.n_vocab == 200019
    assert cl100k.encoding.n_vocab == 100277


def test_specs_match_tiktokens_own_definitions() -> None:
    """Our pattern and special tokens equal the ones tiktoken ships (its rank loader swapped
    for ours, so nothing is downloaded)."""
    public = pytest.importorskip("tiktoken_ext.openai_public")
    for name, spec in tokens.ENCODINGS.items():
        ctor = public.ENCODING_CONSTRUCTORS[name]
        offline = types.FunctionType(
            ctor.__code__,
            {**ctor.__globals__, "load_tiktoken_bpe": lambda *a, n=name, **k: {b"x": 0}},
        )
        ref = offline()
        assert ref["pat_str"] == spec.pat_str
        assert ref["special_tokens"] == dict(spec.special_tokens)


def test_special_token_text_counts_as_text(o200k: TokenCounter) -> None:
    assert o200k.count("<|endoftext|>") > 1


def test_message_overhead(o200k: TokenCounter) -> None:
    msg = {"role": "user", "content": "How many files are there?"}
    body = o200k.count("user") + o200k.count("How many files are there?")
    assert o200k.count_message(msg) == 3 + body
    assert o200k.count_messages([msg]) == 3 + body + 3
    named = {**msg, "name": "alice"}
    assert o200k.count_message(named) == 3 + body + o200k.count("alice") + 1
    assert o200k.count_messages([]) == 3


def test_tool_call_messages_count_no_call_ids(o200k: TokenCounter) -> None:
    """Call ids are minted by the API, not written by the model: they count nothing, as
    output or as input (a provider-length id weighed ~18 tokens)."""
    args = json.dumps({"path": "src/app.py"})
    long_id = "call_" + "aB3" * 8
    call = {"id": long_id, "type": "function",
            "function": {"name": "read_file", "arguments": args}}
    msg = {"role": "assistant", "content": None, "tool_calls": [call, call]}
    per_call = 3 + o200k.count("read_file") + o200k.count(args)
    assert o200k.count_message(msg) == 3 + o200k.count("assistant") + 2 * per_call
    short = {**msg, "tool_calls": [{**call, "id": "c"}, {**call, "id": "d"}]}
    assert o200k.count_message(short) == o200k.count_message(msg)
    result = {"role": "tool", "tool_call_id": long_id, "content": "x" * 40}
    assert o200k.count_message(result) == 3 + o200k.count("tool") + o200k.count("x" * 40)


def test_tool_definitions(o200k: TokenCounter, cl100k: TokenCounter) -> None:
    tool = {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name."},
            "unit": {"type": "string", "description": "", "enum": ["c", "f"]},
        }}}}
    expected = (7 + o200k.count("get_weather:Get the weather") + 3
                + 3 + o200k.count("city:string:City name")
                + 3 - 3 + (3 + o200k.count("c")) + (3 + o200k.count("f"))
                + o200k.count("unit:string:") + 12)
    assert o200k.count_tools([tool]) == expected
    assert o200k.count_tools([]) == 0
    # cl100k models frame each function with 3 more tokens
    assert cl100k.count_tools([tool]) - o200k.count_tools([tool]) == (
        3 + cl100k.count("get_weather:Get the weather") - o200k.count("get_weather:Get the weather")
        + cl100k.count("city:string:City name") - o200k.count("city:string:City name")
        + cl100k.count("unit:string:") - o200k.count("unit:string:"))
    nested = {"type": "function", "function": {
        "name": "f", "description": "d",
        "parameters": {"type": "object", "properties": {
            "urls": {"type": "array", "items": {"type": "string"}, "description": "u"}}}}}
    assert o200k.count_tools([nested]) > 7 + 3 + 3 + 12


def test_unknown_encoding_is_a_clear_error() -> None:
    with pytest.raises(BenchError, match="unknown encoding 'p51k'.*cl100k_base, o200k_base"):
        TokenCounter("p51k")


def test_tampered_rank_file_is_refused(tmp_path) -> None:
    bad = tmp_path / "o200k_base.tiktoken.gz"
    bad.write_bytes(gzip.compress(b"aGVsbG8= 0\n"))
    with pytest.raises(BenchError, match="not the published o200k_base rank file"):
        tokens.load_ranks("o200k_base", bad)
    missing = tmp_path / "nope.gz"
    with pytest.raises(BenchError, match="cannot read"):
        tokens.load_ranks("o200k_base", missing)
