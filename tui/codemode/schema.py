"""A small JSON schema checker for tool arguments.

It covers what tool schemas use: ``type`` (one or a list), ``properties``, ``required``,
``enum``, ``const``, ``items``, ``additionalProperties``, ``minItems``/``maxItems``,
``minLength``/``maxLength`` and ``minimum``/``maximum``. Other keywords are ignored, so a schema
written for a full validator is checked at least this far.
"""

from __future__ import annotations

from typing import Any

__all__ = ["schema_complaint"]

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


_JSON_TYPES: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
}


def _json_type(value: Any) -> str:
    known = _JSON_TYPES.get(type(value))
    if known is not None:
        return known
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
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    actual = _json_type(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == name


def schema_complaint(value: Any, schema: Any, where: str = "arguments") -> str | None:
    """Check a value against a JSON schema.

    Args:
        value: the decoded JSON value.
        schema: the schema (a dict; ``True``/``{}`` accept anything, ``False`` nothing).
        where: how to name the value in the complaint.

    Returns:
        None when the value fits, else one sentence saying what is wrong and where.
    """
    if schema is True or schema is None:
        return None
    if schema is False:
        return f"{where} is not allowed"
    if not isinstance(schema, dict):
        return None
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, n) for n in names):
            wanted = " or ".join(_TYPE_NAMES.get(n, str(n)) for n in names)
            return f"{where} must be {wanted}, not {_json_type(value)}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(c) for c in schema["enum"])
        return f"{where} must be one of {choices}, not {value!r}"
    if "const" in schema and value != schema["const"]:
        return f"{where} must be {schema['const']!r}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} must be at least {schema['minLength']} characters long"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where} must be at most {schema['maxLength']} characters long"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be at most {schema['maximum']}"
    if isinstance(value, list | tuple):
        return _array_complaint(list(value), schema, where)
    if isinstance(value, dict):
        return _object_complaint(value, schema, where)
    return None


def _array_complaint(value: list[Any], schema: dict[str, Any], where: str) -> str | None:
    if len(value) < schema.get("minItems", 0):
        return f"{where} must have at least {schema['minItems']} items"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"{where} must have at most {schema['maxItems']} items"
    items = schema.get("items")
    if items is not None:
        for index, item in enumerate(value):
            complaint = schema_complaint(item, items, f"{where}[{index}]")
            if complaint:
                return complaint
    return None


def _object_complaint(value: dict[str, Any], schema: dict[str, Any], where: str) -> str | None:
    properties: dict[str, Any] = schema.get("properties") or {}
    top = where == "arguments"
    for name in schema.get("required") or []:
        if name not in value:
            return f"missing required argument {name!r}" if top else f"{where} needs {name!r}"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        inner = repr(name) if top else f"{where}[{name!r}]"
        if name in properties:
            complaint = schema_complaint(item, properties[name], inner)
        elif extra is False:
            allowed = ", ".join(properties) or "none"
            kind = "argument" if top else "key"
            return f"unexpected {kind} {name!r} (allowed: {allowed})"
        else:
            complaint = schema_complaint(item, extra, inner)
        if complaint:
            return complaint
    return None
