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
