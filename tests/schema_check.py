"""A small JSON Schema validator for exactly the keywords :mod:`calc.schema` emits (jsonschema
is not a dependency of this project). :data:`KEYWORDS` lists them; ``tests/calc/test_schema.py``
fails if the generated schemas use any other, so this validator never silently ignores one."""

from __future__ import annotations

import re

# annotations (no effect on validity): title, description, default, examples
KEYWORDS = {
    "$schema",
    "$id",
    "title",
    "description",
    "default",
    "examples",
    "type",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "pattern",
    "items",
    "minItems",
    "properties",
    "required",
    "additionalProperties",
    "oneOf",
    "anyOf",
    "deprecated",
}  # an annotation: nothing to check

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # JSON Schema's integer is a number with no fraction: 2.0 is one
    "integer": lambda v: (
        isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()
    ),
    "number": lambda v: (
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        and v == v
        and v not in (float("inf"), float("-inf"))
    ),
}


def errors(instance: object, schema: dict, path: str = "$") -> list[str]:
    """Why ``instance`` does not match ``schema`` (empty: it matches)."""
    out: list[str] = []
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](instance) for t in types):
            return [f"{path}: not {types}"]
    if "enum" in schema and instance not in schema["enum"]:
        out.append(f"{path}: not one of the enum")
    if _TYPES["number"](instance):
        if "minimum" in schema and instance < schema["minimum"]:
            out.append(f"{path}: < minimum")
        if "exclusiveMinimum" in schema and instance <= schema["exclusiveMinimum"]:
            out.append(f"{path}: <= exclusiveMinimum")
        if "maximum" in schema and instance > schema["maximum"]:
            out.append(f"{path}: > maximum")
        if "exclusiveMaximum" in schema and instance >= schema["exclusiveMaximum"]:
            out.append(f"{path}: >= exclusiveMaximum")
    if (
        isinstance(instance, str)
        and "pattern" in schema
        and not re.search(schema["pattern"], instance)
    ):
        out.append(f"{path}: pattern")
    if isinstance(instance, list):
        if len(instance) < schema.get("minItems", 0):
            out.append(f"{path}: minItems")
        if "items" in schema:
            for i, item in enumerate(instance):
                out += errors(item, schema["items"], f"{path}[{i}]")
    if isinstance(instance, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in instance:
                out.append(f"{path}: missing {key}")
        for key, value in instance.items():
            if key in props:
                out += errors(value, props[key], f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                out.append(f"{path}: unknown {key}")
    if "oneOf" in schema:
        if sum(not errors(instance, sub, path) for sub in schema["oneOf"]) != 1:
            out.append(f"{path}: not exactly one of oneOf")
    if "anyOf" in schema:
        if not any(not errors(instance, sub, path) for sub in schema["anyOf"]):
            out.append(f"{path}: none of anyOf")
    return out


def keywords(schema: object) -> set[str]:
    """Every keyword used anywhere in ``schema`` (property names excluded)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key == "properties":
                for sub in value.values():
                    found |= keywords(sub)
            elif key in ("items",):
                found |= keywords(value)
            elif key in ("oneOf", "anyOf"):
                for sub in value:
                    found |= keywords(sub)
    return found
