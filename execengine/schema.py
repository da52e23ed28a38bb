"""Tool schemas: checking OpenAI function schemas, and checking arguments against them.

The registry serves one schema per tool to the model, renders the sandbox stub from it and
validates the model's arguments with it, so the schema is the single source of truth.
Only the JSON-Schema subset that function calling uses is understood: ``type`` (one or a
list), ``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``,
``const``, ``anyOf``/``oneOf``, ``minimum``/``maximum``, ``minLength``/``maxLength``,
``minItems``/``maxItems``; unknown keywords are ignored as JSON Schema says.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from execengine.errors import SchemaError

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def normalize_function_schema(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``{"name", "description", "parameters"}`` or raise :class:`SchemaError`.

    Accepts the bare function object or the ``{"type": "function", "function": {...}}``
    wrapper. The name inside, if given, must equal ``name``.
    """
    if not isinstance(schema, Mapping):
        raise SchemaError(f"tool {name!r}: schema must be a mapping, got {type(schema).__name__}")
    if schema.get("type") == "function" and "function" in schema:
        schema = schema["function"]
        if not isinstance(schema, Mapping):
            raise SchemaError(f"tool {name!r}: 'function' must be a mapping")
    if not NAME_RE.match(name or ""):
        raise SchemaError(
            f"tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
        )
    inner_name = schema.get("name", name)
    if inner_name != name:
        raise SchemaError(f"tool {name!r}: schema names a different tool, {inner_name!r}")
    description = schema.get("description", "")
    if not isinstance(description, str):
        raise SchemaError(f"tool {name!r}: 'description' must be a string")
    params = schema.get("parameters", {"type": "object", "properties": {}})
    _check_object_schema(name, params, "parameters")
    unknown = set(schema) - {"name", "description", "parameters", "strict"}
    if unknown:
        raise SchemaError(f"tool {name!r}: unexpected schema keys {sorted(unknown)}")
    out: dict[str, Any] = {
        "name": name, "description": description, "parameters": copy.deepcopy(dict(params))
    }
    if "strict" in schema:
        out["strict"] = bool(schema["strict"])
    return out


def _check_object_schema(tool: str, params: Any, where: str) -> None:
    if not isinstance(params, Mapping):
        raise SchemaError(f"tool {tool!r}: {where} must be a JSON schema object")
    if params.get("type") != "object":
        raise SchemaError(
            f"tool {tool!r}: {where}.type must be 'object', got {params.get('type')!r}"
        )
    props = params.get("properties", {})
    if not isinstance(props, Mapping):
        raise SchemaError(f"tool {tool!r}: {where}.properties must be a mapping")
    for pname, pschema in props.items():
        _check_property(tool, pschema, f"{where}.properties.{pname}")
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError(f"tool {tool!r}: {where}.required must be a list of names")
    missing = [r for r in required if r not in props]
    if missing:
        raise SchemaError(f"tool {tool!r}: {where}.required names undefined properties {missing}")


def _check_property(tool: str, schema: Any, where: str) -> None:
    if not isinstance(schema, Mapping):
        raise SchemaError(f"tool {tool!r}: {where} must be a mapping")
    types = schema.get("type")
    if types is not None:
        for t in types if isinstance(types, list) else [types]:
            if t not in JSON_TYPES:
                raise SchemaError(f"tool {tool!r}: {where}.type {t!r} is not a JSON type")
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            if not isinstance(options, list) or not options:
                raise SchemaError(f"tool {tool!r}: {where}.{key} must be a non-empty list")
            for i, opt in enumerate(options):
                _check_property(tool, opt, f"{where}.{key}[{i}]")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise SchemaError(f"tool {tool!r}: {where}.enum must be a list")
    if "items" in schema:
        _check_property(tool, schema["items"], f"{where}.items")
    if types == "object" and "properties" in schema:
        _check_object_schema(tool, schema, where)


def validate_arguments(schema: Mapping[str, Any], args: Any) -> list[str]:
    """Violations of ``args`` against a parameters schema, as readable strings (empty = ok)."""
    errors: list[str] = []
    _validate(schema, args, "", errors)
    return errors


def _type_ok(value: Any, t: str) -> bool:
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "null":
        return value is None
    return True


def _validate(schema: Mapping[str, Any], value: Any, where: str, errors: list[str]) -> None:
    label = where or "arguments"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            if not any(not validate_arguments(opt, value) for opt in schema[key]):
                errors.append(f"{label}: {value!r} matches none of the allowed forms")
            return
    types = schema.get("type")
    if types is not None:
        allowed = types if isinstance(types, list) else [types]
        if not any(_type_ok(value, t) for t in allowed):
            errors.append(f"{label}: expected {' or '.join(allowed)}, got {_json_type(value)}")
            return
    if "const" in schema and value != schema["const"]:
        errors.append(f"{label}: must be {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{label}: must be one of {schema['enum']!r}, got {value!r}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{label}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{label}: longer than {schema['maxLength']} characters")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{label}: must be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{label}: must be <= {schema['maximum']}, got {value}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{label}: needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{label}: allows at most {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _validate(items, item, f"{where}[{i}]" if where else f"[{i}]", errors)
    if isinstance(value, dict) and (types == "object" or "properties" in schema):
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                errors.append(f"{_join(where, req)}: required field missing")
        # Tool-call semantics: an object that lists its properties rejects others unless it
        # says ``additionalProperties`` (models invent fields; they should hear about it).
        extra = schema.get("additionalProperties", "properties" not in schema)
        for key, item in value.items():
            if key in props:
                _validate(props[key], item, _join(where, key), errors)
            elif extra is False or extra is None:
                known = ", ".join(sorted(props)) or "none"
                errors.append(f"{_join(where, key)}: unknown field (known fields: {known})")
            elif isinstance(extra, Mapping):
                _validate(extra, item, _join(where, key), errors)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
