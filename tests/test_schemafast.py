"""The fast acceptance check agrees with jsonschema: a differential test over many schemas
and argument shapes, hostile ones included."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from execengine.schema import closed, compile_check, validate_arguments

NAMES = ["path", "n", "q", "flag", "items", "sub", "\u00fcn\u00ef", ""]
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
LITERALS: list[Any] = [None, True, False, 0, 1, -3, 3, "a", "b", "", "1", 0.5, 2.0, -0.0]
BOUNDS: list[Any] = [-5, -1, 0, 1, 2, 5, -2.5, 0.5, 1.0, 4.75]
SCALARS: list[Any] = [None, True, False, 0, 1, -1, 2, 3, 5, 6, -6, 10**40, 2**63, -(2**70),
                      0.0, -0.0, 1.0, 2.5, -5.0, 5.0, 0.1, math.nan, math.inf, -math.inf,
                      "", "a", "ab", "b", "1", "abc1", "\ud800", "\u00e9", "x" * 50, "\x00"]

# -- schemas ------------------------------------------------------------------------------


def _leaf(rng: random.Random) -> dict[str, Any]:
    choices: dict[str, Any] = {
        "type": lambda: (rng.choice(TYPES) if rng.random() < 0.7
                         else rng.sample(TYPES, rng.randint(1, 3))),
        "enum": lambda: rng.sample(LITERALS, rng.randint(1, 4)),
        "const": lambda: rng.choice(LITERALS),
        "minLength": lambda: rng.randint(0, 4), "maxLength": lambda: rng.randint(0, 4),
        "pattern": lambda: rng.choice(["^a", "b$", "[0-9]+", "^$", "\u00e9"]),
        "minimum": lambda: rng.choice(BOUNDS), "maximum": lambda: rng.choice(BOUNDS),
        "exclusiveMinimum": lambda: rng.choice(BOUNDS),
        "exclusiveMaximum": lambda: rng.choice(BOUNDS),
        "minItems": lambda: rng.randint(0, 4), "maxItems": lambda: rng.randint(0, 4),
        "description": lambda: "d", "default": lambda: rng.choice(LITERALS),
        "format": lambda: rng.choice(["uri", "date-time", "email"]),
        # outside the fast subset: such schemas must fall back whole
        "multipleOf": lambda: rng.choice([2, 0.5]),
        "uniqueItems": lambda: rng.random() < 0.5,
    }
    # mostly the common shapes: a type and one or two constraints
    keys = rng.sample(sorted(choices), rng.choice([0, 1, 1, 2, 2, 3]))
    if rng.random() < 0.8 and "type" not in keys:
        keys.append("type")
    return {k: choices[k]() for k in keys}


def _sub(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.6:
        return rng.choice([True, {}]) if roll < 0.03 else _leaf(rng)
    if roll < 0.75:
        return {**_leaf(rng), "items": _sub(rng, depth - 1)}
    if roll < 0.95:
        return _object(rng, depth - 1)
    return {"anyOf": [_sub(rng, depth - 1), _sub(rng, depth - 1)]}


def _object(rng: random.Random, depth: int) -> dict[str, Any]:
    props = {n: _sub(rng, depth) for n in rng.sample(NAMES, rng.randint(0, 4))}
    out: dict[str, Any] = {"properties": props}
    if rng.random() < 0.7:
        out["type"] = "object"
    if rng.random() < 0.5:
        pool = list(props) if rng.random() < 0.7 else NAMES
        out["required"] = rng.sample(pool, min(len(pool), rng.randint(0, 2)))
    extra = rng.random()
    if extra < 0.15:
        out["additionalProperties"] = extra < 0.08
    elif extra < 0.2:
        out["additionalProperties"] = _sub(rng, depth - 1)
    return out


def parameters(rng: random.Random) -> dict[str, Any]:
    schema = _object(rng, 2)
    schema["type"] = "object"
    return schema


# -- argument shapes, hostile included --------------------------------------------------


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.75:
        return rng.choice(SCALARS)
    if roll < 0.87:
        return [_value(rng, depth - 1) for _ in range(rng.randint(0, 5))]
    return {rng.choice(NAMES): _value(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def _fitting(rng: random.Random, schema: Any, depth: int) -> Any:
    """A value shaped after ``schema`` (so that many arguments are valid), mutated now and
    then (so that many are not)."""
    if rng.random() < 0.15 or not isinstance(schema, dict) or depth <= 0:
        return _value(rng, 2)
    if "enum" in schema and rng.random() < 0.7:
        return rng.choice(schema["enum"])
    if "const" in schema and rng.random() < 0.7:
        return schema["const"]
    kind = schema.get("type")
    kind = rng.choice(kind) if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        return arguments(rng, schema, depth - 1)
    if kind == "array":
        return [_fitting(rng, schema.get("items"), depth - 1) for _ in range(rng.randint(0, 4))]
    pools = {"string": ["", "a", "ab", "abc", "1", "b", "\u00e9"], "integer": [-6, 0, 1, 2, 5, 6],
             "number": [-5.0, 0, 0.5, 1, 2.5, 4.75, 5], "boolean": [True, False],
             "null": [None]}
    return rng.choice(pools.get(kind or "", SCALARS))


def arguments(rng: random.Random, schema: dict[str, Any], depth: int = 3) -> Any:
    if rng.random() < 0.05:
        return _value(rng, 2)  # not even an object
    props = schema.get("properties") or {}
    out = {}
    for name in props:
        if name in schema.get("required", ()) or rng.random() < 0.6:
            out[name] = _fitting(rng, props[name], depth)
    if rng.random() < 0.15:
        out[rng.choice(NAMES)] = _value(rng, 2)  # an unknown or duplicated field
    if rng.random() < 0.05 and out:
        del out[rng.choice(sorted(out))]
    return out


def _same(schema: dict[str, Any], args: Any) -> None:
    assert validate_arguments(schema, args) == validate_arguments(schema, args, fast=False)


@pytest.mark.parametrize("seed", range(6))
def test_fast_check_agrees_with_jsonschema(seed: int) -> None:
    """Over many random schemas and argument shapes, the fast path changes nothing: the
    same violations (or none) as jsonschema alone."""
    rng = random.Random(seed)
    compiled = accepted = 0
    for _ in range(100):
        schema = parameters(rng)
        Draft202012Validator.check_schema(schema)
        check = compile_check(closed(schema))
        compiled += check is not None
        validator = Draft202012Validator(closed(schema))
        for _ in range(10):
            args = arguments(rng, schema)
            _same(schema, args)
            if check is not None and check(args):
                accepted += 1
                # the one property soundness rests on, on the compiled check itself
                assert not list(validator.iter_errors(args)), (schema, args)
    # not vacuous: the fast path is taken often, and refused often
    assert compiled >= 25, compiled
    assert accepted >= 100, accepted


# -- hand-picked cases ---------------------------------------------------------------------

FLAT = {"type": "object", "properties": {
    "path": {"type": "string", "minLength": 1, "description": "a file"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
    "ratio": {"type": "number", "exclusiveMinimum": 0},
    "mode": {"type": "string", "enum": ["r", "w"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "opt": {"type": ["string", "null"]},
}, "required": ["path"]}

CASES: list[Any] = [
    {"path": "x"}, {"path": "x", "limit": 5, "ratio": 0.5, "mode": "r", "tags": ["a"]},
    {}, {"path": ""}, {"path": 1}, {"path": True}, {"path": None}, {"path": "x", "junk": 1},
    {"path": "x", "limit": True}, {"path": "x", "limit": 1.0}, {"path": "x", "limit": 1.5},
    {"path": "x", "limit": 0}, {"path": "x", "limit": 10**30}, {"path": "x", "ratio": 0},
    {"path": "x", "ratio": math.nan}, {"path": "x", "ratio": math.inf},
    {"path": "x", "ratio": -math.inf}, {"path": "x", "mode": "R"}, {"path": "x", "mode": 1},
    {"path": "x", "tags": ["a", 1]}, {"path": "x", "tags": ["a"] * 4}, {"path": "x", "tags": {}},
    {"path": "x", "opt": None}, {"path": "x", "opt": 0}, {"path": "\ud800"},
    {"path": "x", "tags": [[[[]]]]}, [], "x", None, 1, {1: "x", "path": "x"},
    {"path": "x", "__proto__": {}}, {"path": ["x"] * 1000},
]


@pytest.mark.parametrize("args", CASES, ids=range(len(CASES)))
def test_hand_picked_cases_agree(args: Any) -> None:
    _same(FLAT, args)


def test_common_schemas_take_the_fast_path() -> None:
    """Not vacuous: a typical flat tool schema compiles, and accepts valid arguments."""
    check = compile_check(closed(FLAT))
    assert check is not None
    assert check({"path": "x", "limit": 5, "tags": ["a"], "opt": None})
    assert not check({"path": "x", "junk": 1})
    assert not check({"limit": 5})
    assert not check({"path": "x", "limit": True})
    noop = {"type": "object", "properties": {"sleep": {"type": "number"}}}
    assert compile_check(closed(noop)) is not None


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
    {"type": "object", "properties": {"a": {"multipleOf": 2}}},
    {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
    {"type": "object", "patternProperties": {"^x": {}}},
    {"type": "object", "properties": {"a": {"enum": [1.5]}}},
    {"type": "object", "properties": {"a": {"pattern": "("}}},
])
def test_other_schemas_fall_back(schema: dict[str, Any]) -> None:
    assert compile_check(closed(schema)) is None
