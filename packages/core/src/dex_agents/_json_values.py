"""One JSON codec for every wire value: frozen dataclasses <-> plain JSON objects.

A wire value subclasses :class:`WireValue`; its field type hints drive both directions, so no value
hand-writes per-field code. Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``,
``datetime`` (ISO 8601 text), ``Enum``/``StrEnum`` (their plain values), nested ``WireValue``
dataclasses, ``tuple[X, ...]``, ``Mapping[str, X]``/``dict[str, X]``, ``X | None`` unions, and
``object`` (any JSON value, kept as is).

Reading tolerates unknown fields, for forward compatibility, and uses a field's default when the
field is missing, so a newer optional field reads from an older stored value. A missing required
field or a value of the wrong type raises :class:`WireValueError`, naming the value and the field.

Constructing a value also converts plain JSON in its fields (a dict where a nested value is
expected, ISO text for a datetime, a list for a tuple), so the Dex SDK's automatic dataclass codec,
which decodes ``X | None`` fields as raw JSON, still yields fully typed values.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any, Self, TypeAlias, Union, get_args, get_origin, get_type_hints

from dex_agents.exceptions import ConfigurationTypeError, DexAgentsError

__all__ = [
    "JsonObject",
    "JsonValue",
    "WireValue",
    "WireValueError",
    "dump_json_text",
    "encode_json_value",
    "resolve_wire_value_annotations",
]

JsonValue: TypeAlias = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None
"""A value that ``json.dumps`` writes without a custom encoder."""
JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object, the wire form of every wire value."""


class WireValueError(DexAgentsError, ValueError):
    """A wire value could not be read from JSON, or a field holds a value of the wrong type."""


def dump_json_text(data: object) -> str:
    """Write compact JSON with sorted keys and non-ASCII text unescaped.

    Raises:
        TypeError: When ``data`` holds something JSON cannot represent.
        ValueError: When ``data`` holds NaN or an infinity.

    Example:
        >>> dump_json_text({"b": 1, "a": "é"})
        '{"a":"é","b":1}'
    """
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


class WireValue:
    """Base of frozen dataclass wire values: ``to_json``/``from_json`` and field conversion.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Point(WireValue):
        ...     x: int
        ...     label: str | None = None
        >>> Point.from_json({"x": 1, "future_field": True})
        Point(x=1, label=None)
        >>> Point(2).to_json()
        {'x': 2, 'label': None}
    """

    __slots__ = ()

    def __post_init__(self) -> None:
        for plan in _field_plans(type(self)):
            current = getattr(self, plan.name)
            if type(current) in plan.ready_types:
                continue
            converted = plan.convert(current, f"{type(self).__name__}.{plan.name}")
            if converted is not current:
                object.__setattr__(self, plan.name, converted)

    def to_json(self) -> JsonObject:
        """Return this value as a plain JSON object (StrEnums as plain strings).

        Example:
            See :class:`WireValue`.
        """
        return {
            plan.name: encode_json_value(getattr(self, plan.name))
            for plan in _field_plans(type(self))
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Self:
        """Read a value from a JSON object; unknown fields are ignored.

        Raises:
            WireValueError: When ``data`` is not an object, a required field is missing, or a
                field has the wrong type.

        Example:
            See :class:`WireValue`.
        """
        if not isinstance(data, Mapping):
            raise WireValueError(f"{cls.__name__} requires a JSON object, got {_describe(data)}")
        arguments: dict[str, object] = {}
        for plan in _field_plans(cls):
            if plan.name in data:
                raw = data[plan.name]
                if type(raw) in plan.ready_types:
                    arguments[plan.name] = raw
                else:
                    arguments[plan.name] = plan.convert(raw, f"{cls.__name__}.{plan.name}")
            elif not plan.has_default:
                raise WireValueError(f"{cls.__name__} is missing required field {plan.name!r}")
        return cls(**arguments)

    def to_json_text(self) -> str:
        """Return :meth:`to_json` as compact JSON text with sorted keys.

        Example:
            >>> from dex_agents import ToolCallCompleted
            >>> ToolCallCompleted("call-1").to_json_text()
            '{"tool_call_id":"call-1"}'
        """
        return dump_json_text(self.to_json())

    @classmethod
    def from_json_text(cls, text: str | bytes) -> Self:
        """Read a value from JSON text.

        Raises:
            WireValueError: When the text is not JSON or does not hold a valid value.

        Example:
            >>> from dex_agents import ToolCallCompleted
            >>> ToolCallCompleted.from_json_text('{"tool_call_id":"call-1"}').tool_call_id
            'call-1'
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise WireValueError(f"{cls.__name__} JSON text is malformed: {error}") from None
        return cls.from_json(data)


def resolve_wire_value_annotations(module_name: str) -> None:
    """Replace the postponed (string) annotations of a module's wire values by their types.

    Call it once at the end of every module that defines wire values. The Dex SDK codec calls
    ``typing.get_type_hints`` on every dataclass it encodes or decodes; with string annotations
    that evaluates each field's annotation text every time, the main cost of reading stored
    values. Resolved once here, each later call only walks types that are already resolved.

    Raises:
        KeyError: When ``module_name`` is not an imported module.
        NameError: When an annotation names something the module does not define.

    Example:
        >>> resolve_wire_value_annotations(__name__)
    """
    namespace = vars(sys.modules[module_name])
    for value in list(namespace.values()):
        if (
            isinstance(value, type)
            and issubclass(value, WireValue)
            and value.__module__ == module_name
            and dataclasses.is_dataclass(value)
        ):
            value.__annotations__ = get_type_hints(value, localns=namespace)


@dataclasses.dataclass(frozen=True)
class _FieldPlan:
    name: str
    has_default: bool
    convert: Callable[[object, str], object]
    ready_types: frozenset[type]
    """Exact types a value already has when ``convert`` would return it unchanged, so the
    common case skips the call (and the text that would name the field in an error)."""


_FIELD_PLANS: dict[type, tuple[_FieldPlan, ...]] = {}


def _field_plans(cls: type) -> tuple[_FieldPlan, ...]:
    plans = _FIELD_PLANS.get(cls)
    if plans is None:
        # Two threads may both build a class's plans; they are equal, so either one wins.
        plans = _FIELD_PLANS[cls] = _build_field_plans(cls)
    return plans


def _build_field_plans(cls: type) -> tuple[_FieldPlan, ...]:
    if not dataclasses.is_dataclass(cls):
        raise ConfigurationTypeError(f"{cls.__name__} must be a dataclass to be a WireValue")
    hints = get_type_hints(cls)
    plans: list[_FieldPlan] = []
    for definition in dataclasses.fields(cls):
        if not definition.init:
            continue
        hint = hints[definition.name]
        has_default = (
            definition.default is not dataclasses.MISSING
            or definition.default_factory is not dataclasses.MISSING
        )
        plans.append(_FieldPlan(definition.name, has_default, _converter(hint), _ready_types(hint)))
    return tuple(plans)


def _ready_types(hint: object) -> frozenset[type]:
    """The exact types whose values ``_converter(hint)`` returns unchanged, where that is a
    type check alone (not for tuples and mappings, whose items need checking)."""
    if get_origin(hint) in (Union, types.UnionType):
        ready: frozenset[type] = frozenset()
        for argument in get_args(hint):
            ready |= _ready_types(argument)
        return ready
    if hint is type(None):
        return frozenset({type(None)})
    if not isinstance(hint, type) or get_origin(hint) is not None:
        return frozenset()
    if hint in (str, int, float, bool, datetime) or issubclass(hint, (Enum, WireValue)):
        return frozenset({hint})
    return frozenset()


def encode_json_value(value: object) -> JsonValue:
    """Return a field value as plain JSON data: wire values as objects, enums as their values,
    datetimes as ISO 8601 text, mappings as objects and sequences as arrays.

    Raises:
        ConfigurationTypeError: When ``value`` is none of those.

    Example:
        >>> encode_json_value(("a", 1))
        ['a', 1]
    """
    if isinstance(value, WireValue):
        return value.to_json()
    if isinstance(value, Enum):
        return encode_json_value(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(key): encode_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_json_value(item) for item in value]
    raise ConfigurationTypeError(f"cannot write {type(value).__name__} as JSON")


_Converter = Callable[[object, str], object]


def _converter(hint: object) -> _Converter:
    origin = get_origin(hint)
    arguments = get_args(hint)
    if hint is Any or hint is object:
        return _keep
    if origin in (Union, types.UnionType):
        return _union_converter(arguments)
    if origin is tuple:
        return _tuple_converter(arguments)
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return _mapping_converter(arguments[1] if len(arguments) == 2 else object)
    if isinstance(hint, type):
        return _type_converter(hint)
    raise ConfigurationTypeError(f"unsupported wire field type {hint!r}")


def _keep(value: object, where: str) -> object:
    del where
    return value


def _union_converter(arguments: tuple[object, ...]) -> _Converter:
    options = [argument for argument in arguments if argument is not type(None)]
    allows_none = len(options) < len(arguments)
    if len(options) != 1:
        raise ConfigurationTypeError(f"wire unions must be X | None, got {arguments!r}")
    inner = _converter(options[0])

    def convert(value: object, where: str) -> object:
        if value is None:
            if allows_none:
                return None
            raise WireValueError(f"{where} must not be null")
        return inner(value, where)

    return convert


def _tuple_converter(arguments: tuple[object, ...]) -> _Converter:
    if len(arguments) != 2 or arguments[1] is not Ellipsis:
        raise ConfigurationTypeError(f"wire tuples must be tuple[X, ...], got {arguments!r}")
    item_converter = _converter(arguments[0])

    def convert(value: object, where: str) -> object:
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise WireValueError(f"{where} must be a JSON array, got {_describe(value)}")
        items = tuple(item_converter(item, f"{where}[{index}]") for index, item in enumerate(value))
        if isinstance(value, tuple) and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items

    return convert


def _mapping_converter(value_hint: object) -> _Converter:
    item_converter = _converter(value_hint)

    def convert(value: object, where: str) -> object:
        if not isinstance(value, Mapping):
            raise WireValueError(f"{where} must be a JSON object, got {_describe(value)}")
        for key in value:
            if not isinstance(key, str):
                raise WireValueError(f"{where} keys must be strings, got {key!r}")
        if item_converter is _keep:
            return value
        converted = {key: item_converter(item, f"{where}[{key!r}]") for key, item in value.items()}
        if all(converted[key] is value[key] for key in value):
            return value
        return converted

    return convert


def _type_converter(hint: type) -> _Converter:
    if issubclass(hint, WireValue):
        wire_type: type[WireValue] = hint

        def convert_wire(value: object, where: str) -> object:
            if isinstance(value, wire_type):
                return value
            if isinstance(value, Mapping):
                try:
                    return wire_type.from_json(value)
                except WireValueError as error:
                    raise WireValueError(f"{where}: {error}") from None
            raise WireValueError(f"{where} must be a JSON object, got {_describe(value)}")

        return convert_wire
    if issubclass(hint, Enum):
        enum_type: type[Enum] = hint

        def convert_enum(value: object, where: str) -> object:
            if isinstance(value, enum_type):
                return value
            try:
                return enum_type(value)
            except ValueError:
                known = ", ".join(repr(member.value) for member in enum_type)
                raise WireValueError(f"{where} must be one of {known}, got {value!r}") from None

        return convert_enum
    if hint is datetime:
        return _convert_datetime
    if hint is bool:
        return _exact_converter(bool, "a boolean")
    if hint is int:
        return _exact_converter(int, "an integer")
    if hint is float:
        return _convert_float
    if hint is str:
        return _exact_converter(str, "a string")
    if hint is type(None):
        return _convert_none
    raise ConfigurationTypeError(f"unsupported wire field type {hint!r}")


def _exact_converter(expected: type, description: str) -> _Converter:
    def convert(value: object, where: str) -> object:
        # bool is an int subclass; a flag must never read as a count or the other way round.
        if type(value) is expected or (
            isinstance(value, expected) and not isinstance(value, bool) and expected is not bool
        ):
            return value
        raise WireValueError(f"{where} must be {description}, got {_describe(value)}")

    return convert


def _convert_float(value: object, where: str) -> object:
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise WireValueError(f"{where} must be a number, got {_describe(value)}")


def _convert_none(value: object, where: str) -> object:
    if value is None:
        return None
    raise WireValueError(f"{where} must be null, got {_describe(value)}")


def _convert_datetime(value: object, where: str) -> object:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise WireValueError(f"{where} must be an ISO 8601 date and time, got {_describe(value)}")


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
