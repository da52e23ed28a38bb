import pytest

from execengine.schema import validate_arguments

PARAMS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1, "maximum": 10},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "urls": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "maybe": {"type": ["string", "null"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "opts": {"type": "object"},
    },
    "required": ["path"],
}


def test_valid_arguments_pass():
    assert validate_arguments(PARAMS, {"path": "x", "limit": 3, "mode": "a", "urls": ["u"],
                                       "maybe": None, "either": True, "opts": {"k": 1}}) == []
    assert validate_arguments(PARAMS, {"path": "x", "limit": 3.0}) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "path: required field missing"),
        ({"path": 5}, "path: expected string, got integer"),
        ({"path": ""}, "path: shorter than 1 characters"),
        ({"path": "x", "limit": 0}, "limit: must be >= 1, got 0"),
        ({"path": "x", "limit": True}, "limit: expected integer, got boolean"),
        ({"path": "x", "mode": "c"}, "mode: must be one of ['a', 'b'], got 'c'"),
        ({"path": "x", "urls": ["a", 1]}, "urls[1]: expected string, got integer"),
        ({"path": "x", "urls": ["a", "b", "c"]}, "urls: allows at most 2 items"),
        ({"path": "x", "either": "s"}, "either: 's' matches none of the allowed forms"),
        ({"path": "x", "extra": 1}, "extra: unknown field (known fields:"),
    ],
)
def test_violations_are_readable(args, expected):
    errors = validate_arguments(PARAMS, args)
    assert any(e.startswith(expected) for e in errors), errors


def test_free_form_objects_accept_any_keys():
    assert validate_arguments({"type": "object"}, {"anything": 1}) == []
    assert validate_arguments({"type": "object", "properties": {"a": {}},
                               "additionalProperties": True}, {"b": 1}) == []


# -- Draft 2020-12 through jsonschema: keywords the hand-written subset did not check ------

RICH = {
    "type": "object",
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"},
                                                         "y": {"type": "number"}},
                        "required": ["x", "y"]}},
    "properties": {
        "at": {"$ref": "#/$defs/point"},
        "name": {"type": "string", "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "ratio": {"type": "number", "exclusiveMinimum": 0},
        "mode": {"type": "string", "anyOf": [{"const": "a"}, {"const": "b"}], "minLength": 1},
        "one": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
        "never": {"not": {"type": "null"}},
        "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                           {"properties": {"b": {"type": "integer"}}}]},
    },
}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"at": {"x": 1}}, "at.y: required field missing"),
        ({"at": {"x": 1, "y": 2, "z": 3}}, "at.z: unknown field (known fields: x, y)"),
        ({"name": "Bob"}, "name: 'Bob' does not match the pattern '^[a-z]+$'"),
        ({"tags": ["a", "a"]}, "tags: items must be unique"),
        ({"ratio": 0}, "ratio: must be > 0, got 0"),
        ({"mode": "c"}, "mode: 'c' matches none of the allowed forms"),
        ({"one": 7}, "one: 7 matches more than one of the allowed forms"),
        ({"one": "s"}, "one: 's' matches none of the allowed forms"),
        ({"never": None}, "never: None is not allowed here"),
        ({"both": {"a": "s", "b": "x"}}, "both.b: expected integer, got string"),
        ({"both": {"a": "s", "c": 1}}, "both.c: unknown field (known fields: a, b)"),
    ],
)
def test_every_keyword_is_enforced(args, expected):
    assert expected in validate_arguments(RICH, args)


def test_all_of_branches_together_make_the_known_fields():
    assert validate_arguments(RICH, {"both": {"a": "s", "b": 1}, "at": {"x": 1, "y": 2},
                                     "one": 7.5, "mode": "a", "ratio": 0.1}) == []


def test_errors_come_in_a_stable_order_and_a_broken_schema_does_not_raise():
    errors = validate_arguments(PARAMS, {"path": 5, "limit": 0, "extra": 1})
    assert errors == sorted(errors, key=lambda e: e.split(":")[0]) and len(errors) == 3
    broken = {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}
    assert validate_arguments(broken, {"a": 1})[0].startswith("arguments: the tool's schema")


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"type": "string", "minLength": "3"}}},
         "parameters.properties.a.minLength: '3' is not of type 'integer'"),
        ({"type": "object", "properties": {"a": {"pattern": 5}}}, "pattern"),
        ({"type": "object", "properties": {"a": {"oneOf": []}}}, "oneOf"),
        ({"type": "object", "properties": {"a": {"enum": "x"}}}, "enum"),
        ({"type": "object", "properties": {"a": {"type": "strng"}}}, "not a JSON type"),
    ],
)
def test_malformed_schemas_fail_at_registration(params, fragment):
    from execengine import ToolRegistry
    from execengine.errors import SchemaError

    with pytest.raises(SchemaError, match=None) as info:
        ToolRegistry().register("t", "demo", {"parameters": params}, lambda a, c: "")
    assert fragment in str(info.value)
