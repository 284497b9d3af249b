"""The Dex SDK's JSON text of a wire value, reusing the text of stored messages already written.

The SDK's ``JsonCodec`` writes ``json.dumps(data, sort_keys=True, separators=(",", ":"),
allow_nan=False)``. A session writes the same stored messages again and again: every chunk it
rewrites and every snapshot holds messages that earlier Steps already wrote. A value that is
immutable all the way down (only text, numbers, flags, enums, datetimes and such values, no mapping
or free-form ``object``) writes its text once and keeps it on the object. A value that holds such
values composes its own text around theirs, field by field in sorted order, exactly as
``json.dumps`` would. Every other value goes through ``json.dumps`` unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, Final, Union, get_args, get_origin, get_type_hints

from dex_agents._json_values import WireValue, encode_json_value

__all__ = ["wire_value_json_text"]

# Where an immutable value keeps its text, in its instance dictionary. Not a dataclass field, so
# equality, ``repr``, ``replace`` and ``asdict`` never see it.
_TEXT_ATTRIBUTE: Final = "_dex_agents_json_text"
_SCALAR_TYPES: Final = (str, int, float, bool, datetime, type(None))


def wire_value_json_text(value: WireValue) -> str:
    """Return ``value``'s JSON text, byte for byte what the SDK's ``JsonCodec`` writes for it.

    Raises:
        TypeError: When a field holds something JSON cannot represent.
        ValueError: When a field holds NaN or an infinity.

    Example:
        >>> from dex_agents import ToolCallCompleted
        >>> wire_value_json_text(ToolCallCompleted("call-1"))
        '{"tool_call_id":"call-1"}'
    """
    plan = _plan(type(value))
    if plan.is_immutable:
        instance_dict = getattr(value, "__dict__", None)
        text = instance_dict.get(_TEXT_ATTRIBUTE) if instance_dict is not None else None
        if text is None:
            text = _dumps(value.to_json())
            if instance_dict is not None:
                object.__setattr__(value, _TEXT_ATTRIBUTE, text)
        return text
    if not plan.composed_fields:
        return _dumps(value.to_json())
    parts = []
    for name in plan.sorted_field_names:
        field_value = getattr(value, name)
        if name in plan.composed_fields:
            text = _field_text(field_value)
        else:
            text = _dumps(encode_json_value(field_value))
        parts.append(f"{_dumps(name)}:{text}")
    return "{" + ",".join(parts) + "}"


def _field_text(value: object) -> str:
    if isinstance(value, WireValue):
        return wire_value_json_text(value)
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(_field_text(item) for item in value) + "]"
    if isinstance(value, Mapping):
        items = sorted((str(key), item) for key, item in value.items())
        return "{" + ",".join(f"{_dumps(key)}:{_field_text(item)}" for key, item in items) + "}"
    return _dumps(encode_json_value(value))


def _dumps(data: object) -> str:
    return json.dumps(data, allow_nan=False, separators=(",", ":"), sort_keys=True)


@dataclasses.dataclass(frozen=True)
class _TextPlan:
    """How one wire value type writes its text."""

    is_immutable: bool
    """Every field, all the way down, is immutable, so the text can be kept."""
    composed_fields: frozenset[str]
    """The fields that hold, somewhere inside, an immutable wire value with a kept text."""
    sorted_field_names: tuple[str, ...]


_PLANS: dict[type, _TextPlan] = {}


def _plan(value_type: type) -> _TextPlan:
    plan = _PLANS.get(value_type)
    if plan is None:
        # Two threads may both build a type's plan; they are equal, so either one wins.
        hints = _field_hints(value_type)
        is_immutable = all(_hint_is_immutable(hint) for hint in hints.values())
        composed = frozenset(name for name, hint in hints.items() if _hint_holds_kept_text(hint))
        plan = _PLANS[value_type] = _TextPlan(is_immutable, composed, tuple(sorted(hints)))
    return plan


def _field_hints(value_type: type) -> dict[str, Any]:
    hints = get_type_hints(value_type)
    fields = dataclasses.fields(value_type)  # type: ignore[arg-type]
    return {field.name: hints[field.name] for field in fields if field.init}


def _hint_is_immutable(hint: object) -> bool:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return all(_hint_is_immutable(argument) for argument in get_args(hint))
    if origin is tuple:
        return all(
            argument is Ellipsis or _hint_is_immutable(argument) for argument in get_args(hint)
        )
    if not isinstance(hint, type):
        return False
    if issubclass(hint, WireValue):
        return _plan(hint).is_immutable
    return issubclass(hint, (*_SCALAR_TYPES, Enum))


def _hint_holds_kept_text(hint: object) -> bool:
    if isinstance(hint, type) and issubclass(hint, WireValue):
        plan = _plan(hint)
        return plan.is_immutable or bool(plan.composed_fields)
    return any(_hint_holds_kept_text(argument) for argument in get_args(hint))
