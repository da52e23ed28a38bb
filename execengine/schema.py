"""Tool schemas: checking OpenAI function schemas, and checking arguments against them.

The registry serves one schema per tool to the model, renders the sandbox stub from it and
validates arguments with it (the model's, and those a script sends), so the schema is the
single source of truth. Schemas are JSON Schema Draft 2020-12, checked with ``jsonschema``:
at registration against the metaschema (``"minLength": "3"`` is refused there, not at the
first call), and every keyword is enforced on arguments (``$ref``, ``allOf``, ``not``,
``pattern``, ``uniqueItems``, ``exclusiveMinimum``...).

One rule is ours, for tool calls: an object schema that lists ``properties`` rejects other
fields unless it says otherwise (``additionalProperties`` or ``unevaluatedProperties``).
Models invent fields; they should hear about it. Violations are worded for the model:
``path: expected string, got integer``, ``junk: unknown field (known fields: path)``.

A precompiled acceptance check for the common, flat tool schemas (a fast path).

Validating ``{}`` or ``{"path": "x"}`` with ``jsonschema`` costs tens of microseconds per
call, most of a no-op tool call's host time. Most tool schemas are a flat object of typed
fields, so :func:`compile_check` turns such a schema (already :func:`closed
<execengine.schema.closed>`) into a tree of small closures answering one question: *is this
instance surely valid?*

The check only ever says "yes" or "not sure". "Yes" means ``jsonschema`` would report no
error, so the caller skips it; "not sure" (a violation, or a value the check does not
reason about, such as ``1.0`` for an integer) sends the call to ``jsonschema``, which
decides and words the message. So acceptance and refusal stay exactly ``jsonschema``'s; a
differential test (``tests/test_schemafast.py``) holds the two together over many schemas
and argument shapes.

A schema using anything outside the subset below compiles to None (always ``jsonschema``):

* ``type`` (a name or a list), ``enum`` of strings, integers, booleans and null,
  ``const`` of the same;
* strings: ``minLength``, ``maxLength``, ``pattern`` (``re.search``, as ``jsonschema``);
* numbers: ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``;
* arrays: ``items`` (a schema of this subset), ``minItems``, ``maxItems``;
* objects: ``properties``, ``required``, ``additionalProperties`` (a boolean or a schema of
  this subset), ``unevaluatedProperties: false`` when nothing else evaluates properties;
* annotations, which assert nothing: ``description``, ``title``, ``default``, ``examples``,
  ``$comment``, ``deprecated``, ``readOnly``, ``writeOnly``, ``format`` (``jsonschema``
  asserts formats only with a format checker, which this codebase does not pass).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as JsonSchemaError
from jsonschema.exceptions import ValidationError

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
    unknown = set(schema) - {"name", "description", "parameters", "strict"}
    if unknown:
        raise SchemaError(f"tool {name!r}: unexpected schema keys {sorted(unknown)}")
    params = schema.get("parameters", {"type": "object", "properties": {}})
    check_parameters_schema(name, params)
    out: dict[str, Any] = {
        "name": name, "description": description, "parameters": copy.deepcopy(dict(params))
    }
    if "strict" in schema:
        out["strict"] = bool(schema["strict"])
    return out


def check_parameters_schema(tool: str, params: Any) -> None:
    """A tool's ``parameters``: a valid Draft 2020-12 schema of an object whose required
    names are properties; raises :class:`SchemaError` saying where it is wrong."""
    if not isinstance(params, Mapping):
        raise SchemaError(f"tool {tool!r}: parameters must be a JSON schema object")
    if params.get("type") != "object":
        raise SchemaError(
            f"tool {tool!r}: parameters.type must be 'object', got {params.get('type')!r}"
        )
    try:
        Draft202012Validator.check_schema(params)
    except JsonSchemaError as exc:
        where = ".".join(["parameters", *(str(p) for p in exc.path)])
        raise SchemaError(f"tool {tool!r}: {where}: {_schema_problem(exc)}") from exc
    props = params.get("properties", {})
    missing = [r for r in params.get("required", []) if r not in props]
    if missing:
        raise SchemaError(
            f"tool {tool!r}: parameters.required names undefined properties {missing}")
    try:
        json.dumps(params)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"tool {tool!r}: parameters must be plain JSON: {exc}") from exc


def _schema_problem(exc: JsonSchemaError) -> str:
    if exc.validator == "anyOf" and list(exc.path)[-1:] == ["type"]:
        return f"{exc.instance!r} is not a JSON type (one of {', '.join(JSON_TYPES)})"
    return str(exc.message)


# -- arguments ---------------------------------------------------------------------------

_COMBINED = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")
_NESTED_ONE = ("items", "additionalProperties", "unevaluatedProperties", "contains",
               "propertyNames", "unevaluatedItems")
_NESTED_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def closed(schema: Any, *, in_all_of: bool = False) -> Any:
    """``schema`` with the no-unknown-fields rule made explicit (a copy).

    Every object schema listing ``properties`` (or combining schemas that do, through
    ``allOf``) and saying nothing about extra fields gets ``unevaluatedProperties: false``,
    which sees through ``allOf`` and ``$ref``. Branches of an ``allOf`` are left open: their
    parent closes the whole.
    """
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    for key in _NESTED_ONE:
        if key in out:
            out[key] = closed(out[key])
    for key in _NESTED_MAP:
        if isinstance(out.get(key), Mapping):
            out[key] = {k: closed(v) for k, v in out[key].items()}
    if isinstance(out.get("prefixItems"), list):
        out["prefixItems"] = [closed(s) for s in out["prefixItems"]]
    for key in _COMBINED:
        if isinstance(out.get(key), list):
            out[key] = [closed(s, in_all_of=key == "allOf") for s in out[key]]
        elif isinstance(out.get(key), Mapping):
            out[key] = closed(out[key])
    lists_fields = "properties" in out or any(
        isinstance(s, Mapping) and "properties" in s for s in out.get("allOf") or ())
    says = "additionalProperties" in out or "unevaluatedProperties" in out
    if lists_fields and not says and not in_all_of:
        out["unevaluatedProperties"] = False
    return out


class _Checker:
    """A schema's ``jsonschema`` validator and, when it compiles, its fast acceptance
    check (:mod:`execengine.schema`)."""

    __slots__ = ("fast", "validator")

    def __init__(self, schema: Any) -> None:
        self.validator = Draft202012Validator(schema)
        self.fast = compile_check(schema)


@lru_cache(maxsize=512)
def _checker(key: str) -> _Checker:
    return _Checker(closed(json.loads(key)))


#: checkers by the identity of the schema object they were built for (a registered
#: tool's schema is one object for its life): spares the JSON key on every call
_by_identity: dict[int, tuple[Mapping[str, Any], _Checker]] = {}


def _checker_for(schema: Mapping[str, Any]) -> _Checker:
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    checker = _checker(json.dumps(schema, sort_keys=True, default=repr))
    if len(_by_identity) >= 1024:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, checker)
    return checker


def validate_arguments(schema: Mapping[str, Any], args: Any, *,
                       fast: bool = True) -> list[str]:
    """Violations of ``args`` against a parameters schema, as readable strings (empty = ok).

    The schema is assumed valid (checked at registration); a broken one reports itself as a
    violation rather than raising. Arguments the schema's fast check accepts skip
    ``jsonschema`` (``fast=False``: never; the differential tests compare the two).
    """
    try:
        checker = _checker_for(schema)
        if fast and checker.fast is not None and _surely_valid(checker.fast, args):
            return []
        found = sorted(checker.validator.iter_errors(args),
                       key=lambda e: list(map(str, e.path)))
    except Exception as exc:  # an unresolvable $ref, a recursive schema: say so, never raise
        return [f"arguments: the tool's schema cannot be checked ({type(exc).__name__})"]
    out: list[str] = []
    for error in found:
        for line in _describe(error):
            if line not in out:
                out.append(line)
    return out


def _surely_valid(check: Callable[[Any], bool], args: Any) -> bool:
    try:
        return check(args)
    except Exception:  # not expected; jsonschema decides
        return False


def violations_message(tool: str, violations: list[str] | tuple[str, ...]) -> str:
    """The error the model (or a script) reads for arguments that failed validation."""
    return (f"Invalid arguments for {tool!r}; the tool was not run:\n"
            + "\n".join(f"- {v}" for v in violations) + "\nFix these and call it again.")


def _label(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "arguments"


def _join(where: str, key: str) -> str:
    return key if where == "arguments" else f"{where}.{key}"


def _describe(error: ValidationError) -> list[str]:
    """One model-friendly line per problem (several for missing or unknown fields)."""
    label = _label(error.absolute_path)
    kind, want, value = error.validator, error.validator_value, error.instance
    if kind == "required" and isinstance(value, dict):
        return [f"{_join(label, r)}: required field missing" for r in want if r not in value]
    if kind in ("unevaluatedProperties", "additionalProperties") and isinstance(value, dict):
        known = _known_fields(error.schema)
        listed = ", ".join(sorted(known)) or "none"
        return [f"{_join(label, k)}: unknown field (known fields: {listed})"
                for k in sorted(value, key=str) if k not in known]
    if kind == "type":
        types = want if isinstance(want, list) else [want]
        return [f"{label}: expected {' or '.join(types)}, got {_json_type(value)}"]
    simple: dict[str, Callable[[], str]] = {
        "enum": lambda: f"must be one of {want!r}, got {value!r}",
        "const": lambda: f"must be {want!r}",
        "minLength": lambda: f"shorter than {want} characters",
        "maxLength": lambda: f"longer than {want} characters",
        "pattern": lambda: f"{value!r} does not match the pattern {want!r}",
        "minimum": lambda: f"must be >= {want}, got {value}",
        "maximum": lambda: f"must be <= {want}, got {value}",
        "exclusiveMinimum": lambda: f"must be > {want}, got {value}",
        "exclusiveMaximum": lambda: f"must be < {want}, got {value}",
        "multipleOf": lambda: f"must be a multiple of {want}, got {value}",
        "minItems": lambda: f"needs at least {want} items",
        "maxItems": lambda: f"allows at most {want} items",
        "uniqueItems": lambda: "items must be unique",
        "minProperties": lambda: f"needs at least {want} fields",
        "maxProperties": lambda: f"allows at most {want} fields",
        "anyOf": lambda: f"{value!r} matches none of the allowed forms",
        "oneOf": lambda: (f"{value!r} matches more than one of the allowed forms"
                          if _matches(error) > 1 else
                          f"{value!r} matches none of the allowed forms"),
        "not": lambda: f"{value!r} is not allowed here",
    }
    text = simple[kind]() if kind in simple else str(error.message)
    return [f"{label}: {text}"]


def _matches(error: ValidationError) -> int:
    branches = error.validator_value if isinstance(error.validator_value, list) else []
    failed = {e.relative_schema_path[0] for e in error.context or ()
              if e.relative_schema_path}
    return len(branches) - len(failed)


def _known_fields(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    known = set(schema.get("properties") or {})
    for branch in schema.get("allOf") or ():
        known |= _known_fields(branch)
    return known


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


# -- the fast path: schemas simple enough to check in a few comparisons --------------------

#: ``check(instance) -> True`` when surely valid, False when not sure
Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment",
                          "deprecated", "readOnly", "writeOnly", "format"})
_KEYWORDS = frozenset({"type", "enum", "const", "minLength", "maxLength", "pattern",
                       "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "items",
                       "minItems", "maxItems", "properties", "required",
                       "additionalProperties", "unevaluatedProperties"}) | _ANNOTATIONS
#: the Python types of decoded JSON that surely have each JSON type (``1.0`` is an integer
#: to jsonschema too, but the check leaves such values to it)
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
    "number": (int, float), "boolean": (bool,), "null": (type(None),)}


def _unsupported(what: str) -> ValueError:
    """Raised inside the compiler: the schema uses something the check does not model."""
    return ValueError(f"not in the fast subset: {what}")


def compile_check(schema: Any) -> Check | None:
    """The fast acceptance check of a (closed) parameters schema, or None when the schema
    is outside the subset (see the module docstring)."""
    try:
        return _node(schema)
    except (ValueError, re.error, RecursionError):
        return None


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _literal_set(values: Any) -> tuple[frozenset[Any], bool, bool, bool]:
    """``enum`` members: (str and int members, has null, has True, has False)."""
    if not isinstance(values, list) or not values:
        raise _unsupported("enum")
    plain: set[Any] = set()
    null = yes = no = False
    for v in values:
        if v is None:
            null = True
        elif v is True:
            yes = True
        elif v is False:
            no = True
        elif type(v) in (str, int):
            plain.add(v)
        else:
            raise _unsupported("enum member")
    return frozenset(plain), null, yes, no


def _node(schema: Any) -> Check:
    if schema is True or (isinstance(schema, Mapping) and not schema):
        return _accept
    if not isinstance(schema, Mapping) or not set(schema) <= _KEYWORDS:
        raise _unsupported("keyword")
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        names = kind if isinstance(kind, list) else [kind]
        if not names or any(not isinstance(n, str) or n not in _TYPES for n in names):
            raise _unsupported("type")
        # exact types: bool (an int to Python) is neither an integer nor a number here
        types = tuple({t for n in names for t in _TYPES[n]})
        checks.append(lambda value: type(value) in types)
    if "enum" in schema:
        checks.append(_enum_check(*_literal_set(schema["enum"])))
    if "const" in schema:
        checks.append(_enum_check(*_literal_set([schema["const"]])))
    checks.extend(_string_checks(schema))
    checks.extend(_number_checks(schema))
    checks.extend(_array_checks(schema))
    checks.extend(_object_checks(schema))
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _accept(value: Any) -> bool:
    return True


def _enum_check(plain: frozenset[Any], null: bool, yes: bool, no: bool) -> Check:
    def check(value: Any) -> bool:
        kind = type(value)
        if kind is str or kind is int:
            return value in plain
        if value is None:
            return null
        if value is True:
            return yes
        if value is False:
            return no
        return False  # a float, a container: jsonschema decides
    return check


def _string_checks(schema: Mapping[str, Any]) -> list[Check]:
    out: list[Check] = []
    low, high = schema.get("minLength"), schema.get("maxLength")
    for bound in (low, high):
        if bound is not None and not _count(bound):
            raise _unsupported("length")
    if low is not None or high is not None:
        lo = low or 0
        hi = high

        def lengths(value: Any) -> bool:
            if type(value) is not str:
                return True
            n = len(value)
            return n >= lo and (hi is None or n <= hi)
        out.append(lengths)
    if "pattern" in schema:
        pattern = schema["pattern"]
        if not isinstance(pattern, str):
            raise _unsupported("pattern")
        search = re.compile(pattern).search
        out.append(lambda value: type(value) is not str or search(value) is not None)
    return out


def _number_checks(schema: Mapping[str, Any]) -> list[Check]:
    bounds = [(key, schema[key]) for key in ("minimum", "maximum", "exclusiveMinimum",
                                             "exclusiveMaximum") if key in schema]
    if not bounds:
        return []
    if any(not _number(b) for _, b in bounds):
        raise _unsupported("bound")
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    xlo = schema.get("exclusiveMinimum")
    xhi = schema.get("exclusiveMaximum")

    def numbers(value: Any) -> bool:
        if type(value) not in (int, float):
            return True  # bool and the rest: the keywords do not apply
        # written so that NaN is never accepted here (jsonschema decides it)
        return ((lo is None or value >= lo) and (hi is None or value <= hi)
                and (xlo is None or value > xlo) and (xhi is None or value < xhi))
    return [numbers]


def _array_checks(schema: Mapping[str, Any]) -> list[Check]:
    out: list[Check] = []
    low, high = schema.get("minItems"), schema.get("maxItems")
    for bound in (low, high):
        if bound is not None and not _count(bound):
            raise _unsupported("items bound")
    if low is not None or high is not None:
        lo, hi = low or 0, high
        out.append(lambda value: type(value) is not list or (
            len(value) >= lo and (hi is None or len(value) <= hi)))
    if "items" in schema:
        item = _node(schema["items"])
        if item is not _accept:
            out.append(lambda value: type(value) is not list or all(item(v) for v in value))
    return out


def _object_checks(schema: Mapping[str, Any]) -> list[Check]:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    uneval = schema.get("unevaluatedProperties", True)
    if not isinstance(props, Mapping) or not isinstance(required, list) or any(
            not isinstance(r, str) for r in required):
        raise _unsupported("properties")
    if uneval is not True:
        # without other evaluating keywords here, unevaluated = not in properties
        if uneval is not False or "additionalProperties" in schema:
            raise _unsupported("unevaluatedProperties")
        extra = False
    if not props and not required and extra is True:
        return []
    fields = {name: _node(sub) for name, sub in props.items()}
    closed = extra is False
    rest = None if extra is True or extra is False else _node(extra)
    needed = tuple(required)

    def fields_ok(value: Any) -> bool:
        if type(value) is not dict:
            return True  # the keywords do not apply (a type check says otherwise)
        for name in needed:
            if name not in value:
                return False
        for key, item in value.items():
            check = fields.get(key) if type(key) is str else None
            if check is None:
                if closed or type(key) is not str:
                    return False
                if rest is not None and not rest(item):
                    return False
            elif not check(item):
                return False
        return True
    return [fields_ok]
