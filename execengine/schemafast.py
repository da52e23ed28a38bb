"""A precompiled acceptance check for the common, flat tool schemas (a fast path).

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

import re
from collections.abc import Callable, Mapping
from typing import Any

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
