"""Checks a decoded JSON value against an explicit JSON Schema, for ``parameters_schema``.

Derived schemas never need this: their checks come from the type hints. An explicit schema can say
more than the hints (an enum on a ``str`` parameter, a minimum), so its common keywords are
checked here with the standard library: ``type``, ``enum``, ``const``, ``properties``,
``required``, ``additionalProperties``, ``items``, ``anyOf``, ``oneOf``, ``allOf``, ``minimum``,
``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``,
``minItems``, ``maxItems``, and ``pattern``. Other keywords, such as ``$ref`` or ``format``,
constrain nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from dex_agents.stepwise._json_schema import ArgumentValidationError, describe_json_type, shown

__all__ = ["validate_against_schema"]

_TYPE_CHECKS: dict[str, Callable[[object], bool]] = {
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: (
        (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, float) and value.is_integer())
    ),
    "number": lambda value: isinstance(value, int | float) and not isinstance(value, bool),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}


def _subject(path: str) -> str:
    return f"argument {path}" if path else "arguments"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def validate_against_schema(value: object, schema: Mapping[str, object], path: str = "") -> None:
    """Checks ``value`` against ``schema``.

    Raises:
        ArgumentValidationError: Naming the argument at ``path`` and the first problem found.
    """
    _check_type(value, schema, path)
    _check_choices(value, schema, path)
    _check_combinators(value, schema, path)
    if isinstance(value, dict):
        _check_object(value, schema, path)
    elif isinstance(value, list):
        _check_array(value, schema, path)
    elif isinstance(value, str):
        _check_string(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(value, schema, path)


def _check_type(value: object, schema: Mapping[str, object], path: str) -> None:
    expected = schema.get("type")
    if expected is None:
        return
    names = (
        [str(expected)] if isinstance(expected, str) else [str(name) for name in _list(expected)]
    )
    if names and not any(name not in _TYPE_CHECKS or _TYPE_CHECKS[name](value) for name in names):
        wanted = " or ".join(str(name) for name in names)
        raise ArgumentValidationError(
            f"{_subject(path)} must be of type {wanted}, got {describe_json_type(value)}"
        )


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _check_choices(value: object, schema: Mapping[str, object], path: str) -> None:
    if "const" in schema and value != schema["const"]:
        raise ArgumentValidationError(f"{_subject(path)} must be {shown(schema['const'])}")
    choices = schema.get("enum")
    if isinstance(choices, list) and value not in choices:
        listed = ", ".join(shown(choice) for choice in choices)
        raise ArgumentValidationError(
            f"{_subject(path)} must be one of {listed}, got {shown(value)}"
        )


def _matches(value: object, schema: object, path: str) -> bool:
    if not isinstance(schema, Mapping):
        return True
    try:
        validate_against_schema(value, schema, path)
    except ArgumentValidationError:
        return False
    return True


def _check_combinators(value: object, schema: Mapping[str, object], path: str) -> None:
    for sub_schema in _schemas(schema.get("allOf")):
        validate_against_schema(value, sub_schema, path)
    any_of = _schemas(schema.get("anyOf"))
    if any_of and not any(_matches(value, sub, path) for sub in any_of):
        raise ArgumentValidationError(f"{_subject(path)} matches none of the allowed schemas")
    one_of = _schemas(schema.get("oneOf"))
    if one_of and sum(_matches(value, sub, path) for sub in one_of) != 1:
        raise ArgumentValidationError(f"{_subject(path)} must match exactly one allowed schema")


def _schemas(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _check_object(value: dict[str, object], schema: Mapping[str, object], path: str) -> None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if name not in value:
            raise ArgumentValidationError(f"missing required argument {_join(path, str(name))}")
    additional = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            sub_schema = properties[key]
            if isinstance(sub_schema, Mapping):
                validate_against_schema(item, sub_schema, _join(path, key))
        elif additional is False:
            raise ArgumentValidationError(f"unexpected argument {_join(path, key)}")
        elif isinstance(additional, Mapping):
            validate_against_schema(item, additional, _join(path, key))


def _check_array(value: list[object], schema: Mapping[str, object], path: str) -> None:
    _check_size(len(value), schema, "minItems", "maxItems", path, "items")
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            validate_against_schema(item, items, f"{path}[{index}]")


def _check_string(value: str, schema: Mapping[str, object], path: str) -> None:
    _check_size(len(value), schema, "minLength", "maxLength", path, "characters")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and re.search(pattern, value) is None:
        raise ArgumentValidationError(f"{_subject(path)} must match the pattern {pattern}")


def _check_size(
    size: int, schema: Mapping[str, object], low: str, high: str, path: str, unit: str
) -> None:
    minimum, maximum = schema.get(low), schema.get(high)
    if isinstance(minimum, int) and size < minimum:
        raise ArgumentValidationError(f"{_subject(path)} must have at least {minimum} {unit}")
    if isinstance(maximum, int) and size > maximum:
        raise ArgumentValidationError(f"{_subject(path)} must have at most {maximum} {unit}")


def _check_number(value: float, schema: Mapping[str, object], path: str) -> None:
    bounds: tuple[tuple[str, Callable[[float, float], bool], str], ...] = (
        ("minimum", lambda v, b: v >= b, "at least"),
        ("maximum", lambda v, b: v <= b, "at most"),
        ("exclusiveMinimum", lambda v, b: v > b, "more than"),
        ("exclusiveMaximum", lambda v, b: v < b, "less than"),
    )
    for keyword, holds, words in bounds:
        bound = schema.get(keyword)
        if (
            isinstance(bound, int | float)
            and not isinstance(bound, bool)
            and not holds(value, bound)
        ):
            raise ArgumentValidationError(f"{_subject(path)} must be {words} {bound}, got {value}")
