"""JSON Schema derivation from type hints, and argument validation and conversion.

A function tool's parameters are compiled once, when the tool is defined, into a tree of
``_TypeNode`` values. Each node renders its JSON Schema and converts one decoded JSON value into
the annotated Python type, so the schema the model sees and the checks the tool applies never drift
apart. Only the standard library is used.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from dex_agents._json_values import JsonValue
from dex_agents.exceptions import ConfigurationTypeError, DexAgentsError

__all__ = [
    "ArgumentValidationError",
    "JsonSchema",
    "JsonValue",
    "ParametersModel",
    "compile_parameters",
    "describe_json_type",
    "shown",
]

JsonSchema = dict[str, JsonValue]
"""A JSON Schema object."""

_MAX_SHOWN_VALUE_CHARS = 80


class ArgumentValidationError(DexAgentsError, ValueError):
    """Tool arguments that break the parameters' schema; the message names the argument."""


def describe_json_type(value: object) -> str:
    """The JSON type name of a decoded value, for error texts."""
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


def shown(value: object) -> str:
    """A decoded value as short JSON text, for error texts."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > _MAX_SHOWN_VALUE_CHARS:
        return text[: _MAX_SHOWN_VALUE_CHARS - 3] + "..."
    return text


def _subject(path: str) -> str:
    return f"argument {path}" if path else "arguments"


def _mismatch(path: str, expected: str, value: object) -> ArgumentValidationError:
    return ArgumentValidationError(
        f"{_subject(path)} must be {expected}, got {describe_json_type(value)}"
    )


class _TypeNode:
    """One annotated type: its schema and the conversion of a JSON value into it."""

    expected: str

    def schema(self) -> JsonSchema:
        raise NotImplementedError

    def convert(self, value: object, path: str) -> object:
        raise NotImplementedError


@dataclass(frozen=True)
class _AnyNode(_TypeNode):
    expected: str = "any JSON value"

    def schema(self) -> JsonSchema:
        return {}

    def convert(self, value: object, path: str) -> object:
        return value


@dataclass(frozen=True)
class _PrimitiveNode(_TypeNode):
    json_type: str
    expected: str

    def schema(self) -> JsonSchema:
        return {"type": self.json_type}

    def convert(self, value: object, path: str) -> object:
        match self.json_type:
            case "string" if isinstance(value, str):
                return value
            case "boolean" if isinstance(value, bool):
                return value
            case "null" if value is None:
                return None
            case "integer" if isinstance(value, int) and not isinstance(value, bool):
                return value
            # Some providers send 3.0 for an integer; accept it only when nothing is lost.
            case "integer" if isinstance(value, float) and value.is_integer():
                return int(value)
            case "number" if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        raise _mismatch(path, self.expected, value)


_PRIMITIVES: dict[object, _PrimitiveNode] = {
    str: _PrimitiveNode("string", "a string"),
    int: _PrimitiveNode("integer", "an integer"),
    float: _PrimitiveNode("number", "a number"),
    bool: _PrimitiveNode("boolean", "a boolean"),
    type(None): _PrimitiveNode("null", "null"),
    None: _PrimitiveNode("null", "null"),
}


def _enum_schema(values: Sequence[JsonValue]) -> JsonSchema:
    schema: JsonSchema = {"enum": list(values)}
    kinds = {describe_json_type(value) for value in values}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    return schema


@dataclass(frozen=True)
class _LiteralNode(_TypeNode):
    values: tuple[JsonValue, ...]
    expected: str = "one of the allowed values"

    def schema(self) -> JsonSchema:
        return _enum_schema(self.values)

    def convert(self, value: object, path: str) -> object:
        for allowed in self.values:
            # bool is an int in Python, so compare the JSON types too.
            if value == allowed and describe_json_type(value) == describe_json_type(allowed):
                return allowed
        choices = ", ".join(shown(allowed) for allowed in self.values)
        raise ArgumentValidationError(
            f"{_subject(path)} must be one of {choices}, got {shown(value)}"
        )


@dataclass(frozen=True)
class _EnumNode(_TypeNode):
    enum_type: type[enum.Enum]
    expected: str = "one of the allowed values"

    def schema(self) -> JsonSchema:
        return _enum_schema([member.value for member in self.enum_type])

    def convert(self, value: object, path: str) -> object:
        for member in self.enum_type:
            if member.value == value and describe_json_type(member.value) == describe_json_type(
                value
            ):
                return member
        choices = ", ".join(shown(member.value) for member in self.enum_type)
        raise ArgumentValidationError(
            f"{_subject(path)} must be one of {choices}, got {shown(value)}"
        )


@dataclass(frozen=True)
class _ListNode(_TypeNode):
    item: _TypeNode
    as_tuple: bool = False
    expected: str = "an array"

    def schema(self) -> JsonSchema:
        return {"type": "array", "items": self.item.schema()}

    def convert(self, value: object, path: str) -> object:
        if not isinstance(value, list):
            raise _mismatch(path, self.expected, value)
        items = [self.item.convert(item, f"{path}[{index}]") for index, item in enumerate(value)]
        return tuple(items) if self.as_tuple else items


@dataclass(frozen=True)
class _DictNode(_TypeNode):
    value_node: _TypeNode
    expected: str = "an object"

    def schema(self) -> JsonSchema:
        if isinstance(self.value_node, _AnyNode):
            return {"type": "object"}
        return {"type": "object", "additionalProperties": self.value_node.schema()}

    def convert(self, value: object, path: str) -> object:
        if not isinstance(value, dict):
            raise _mismatch(path, self.expected, value)
        return {key: self.value_node.convert(item, _join(path, key)) for key, item in value.items()}


@dataclass(frozen=True)
class _UnionNode(_TypeNode):
    members: tuple[_TypeNode, ...]

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(member.expected for member in self.members)

    def schema(self) -> JsonSchema:
        return {"anyOf": [member.schema() for member in self.members]}

    def convert(self, value: object, path: str) -> object:
        errors: list[ArgumentValidationError] = []
        for member in self.members:
            try:
                return member.convert(value, path)
            except ArgumentValidationError as error:
                errors.append(error)
        # A value of the right JSON type that fails deeper is best explained by that member.
        deeper = [str(error) for error in errors if not str(error).startswith(_subject(path))]
        if len(deeper) == 1:
            raise ArgumentValidationError(deeper[0])
        raise _mismatch(path, self.expected, value)


@dataclass(frozen=True)
class _DescribedNode(_TypeNode):
    inner: _TypeNode
    description: str

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.inner.expected

    def schema(self) -> JsonSchema:
        return {**self.inner.schema(), "description": self.description}

    def convert(self, value: object, path: str) -> object:
        return self.inner.convert(value, path)


@dataclass(frozen=True)
class _Field:
    name: str
    node: _TypeNode
    required: bool
    # None in an optional field that does not admit None means the field is absent: providers in
    # strict-schema mode send null for every optional property.
    admits_null: bool


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _convert_fields(
    fields: Sequence[_Field], value: Mapping[str, object], path: str
) -> dict[str, object]:
    known = {field.name for field in fields}
    for key in value:
        if key not in known:
            raise ArgumentValidationError(f"unexpected argument {_join(path, key)}")
    converted: dict[str, object] = {}
    for field in fields:
        if field.name not in value or (value[field.name] is None and not field.admits_null):
            if field.required:
                raise ArgumentValidationError(
                    f"missing required argument {_join(path, field.name)}"
                )
            continue
        converted[field.name] = field.node.convert(value[field.name], _join(path, field.name))
    return converted


def _fields_schema(fields: Sequence[_Field]) -> JsonSchema:
    properties: dict[str, JsonValue] = {field.name: field.node.schema() for field in fields}
    required: list[JsonValue] = [field.name for field in fields if field.required]
    schema: JsonSchema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


@dataclass(frozen=True)
class _ObjectNode(_TypeNode):
    """A dataclass or TypedDict argument."""

    fields: tuple[_Field, ...]
    build: Callable[[dict[str, object]], object]
    description: str | None
    expected: str = "an object"

    def schema(self) -> JsonSchema:
        schema = _fields_schema(self.fields)
        if self.description:
            schema["description"] = self.description
        return schema

    def convert(self, value: object, path: str) -> object:
        if not isinstance(value, dict):
            raise _mismatch(path, self.expected, value)
        return self.build(_convert_fields(self.fields, value, path))


def _admits_null(node: _TypeNode) -> bool:
    if isinstance(node, _DescribedNode):
        return _admits_null(node.inner)
    if isinstance(node, _AnyNode):
        return True
    if isinstance(node, _PrimitiveNode):
        return node.json_type == "null"
    if isinstance(node, _LiteralNode):
        return None in node.values
    if isinstance(node, _UnionNode):
        return any(_admits_null(member) for member in node.members)
    return False


class _Compiler:
    """Compiles annotations; remembers the classes being compiled to refuse recursive types."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._active: set[type] = set()

    def compile(self, annotation: object, where: str) -> _TypeNode:
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is Annotated:
            return self._annotated(args, where)
        if annotation in _PRIMITIVES:
            return _PRIMITIVES[annotation]
        if annotation is Any or annotation is object:
            return _AnyNode()
        if origin is Literal:
            return self._literal(args, where)
        if origin is Union or origin is types.UnionType:
            return _UnionNode(tuple(self.compile(arg, where) for arg in args))
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            return self._enum(annotation, where)
        if annotation is list or annotation is tuple:
            return _ListNode(_AnyNode(), as_tuple=annotation is tuple)
        if origin in (list, tuple, Sequence):
            return self._sequence(origin, args, where)
        if annotation is dict:
            return _DictNode(_AnyNode())
        if origin in (dict, Mapping):
            return self._mapping(args, where)
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            return self._object(annotation, where, self._dataclass_fields)
        if isinstance(annotation, type) and typing.is_typeddict(annotation):
            return self._object(annotation, where, self._typeddict_fields)
        raise ConfigurationTypeError(f"{self._owner}: {where} has unsupported type {annotation!r}")

    def _annotated(self, args: tuple[object, ...], where: str) -> _TypeNode:
        inner = self.compile(args[0], where)
        descriptions = [item for item in args[1:] if isinstance(item, str)]
        if not descriptions:
            return inner
        return _DescribedNode(inner, " ".join(descriptions))

    def _literal(self, args: tuple[object, ...], where: str) -> _TypeNode:
        values: list[JsonValue] = []
        for arg in args:
            if arg is not None and not isinstance(arg, str | int | float | bool):
                raise ConfigurationTypeError(
                    f"{self._owner}: {where} has a Literal value {arg!r} that is not JSON"
                )
            values.append(arg)
        return _LiteralNode(tuple(values))

    def _enum(self, enum_type: type[enum.Enum], where: str) -> _TypeNode:
        for member in enum_type:
            if member.value is not None and not isinstance(member.value, str | int | float | bool):
                raise ConfigurationTypeError(
                    f"{self._owner}: {where} has enum {enum_type.__name__} whose value "
                    f"{member.value!r} is not JSON"
                )
        node: _TypeNode = _EnumNode(enum_type)
        doc = _own_doc(enum_type)
        return _DescribedNode(node, doc) if doc else node

    def _sequence(self, origin: object, args: tuple[object, ...], where: str) -> _TypeNode:
        as_tuple = origin is tuple
        if as_tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise ConfigurationTypeError(
                f"{self._owner}: {where} is a fixed-length tuple; use tuple[T, ...] or list[T]"
            )
        item = self.compile(args[0], where) if args else _AnyNode()
        return _ListNode(item, as_tuple=as_tuple)

    def _mapping(self, args: tuple[object, ...], where: str) -> _TypeNode:
        if args and args[0] is not str:
            raise ConfigurationTypeError(f"{self._owner}: {where} is a dict whose keys are not str")
        return _DictNode(self.compile(args[1], where) if args else _AnyNode())

    def _object(
        self,
        cls: type,
        where: str,
        read_fields: Callable[
            [type, str], tuple[tuple[_Field, ...], Callable[[dict[str, object]], object]]
        ],
    ) -> _TypeNode:
        if cls in self._active:
            raise ConfigurationTypeError(
                f"{self._owner}: {where} uses the recursive type {cls.__name__}"
            )
        self._active.add(cls)
        try:
            fields, build = read_fields(cls, where)
        except NameError as error:
            raise ConfigurationTypeError(
                f"{self._owner}: a type hint of {cls.__name__} cannot be resolved: {error}"
            ) from error
        finally:
            self._active.discard(cls)
        return _ObjectNode(fields, build, _own_doc(cls))

    def _dataclass_fields(
        self, cls: type, where: str
    ) -> tuple[tuple[_Field, ...], Callable[[dict[str, object]], object]]:
        hints = get_type_hints(cls, include_extras=True)
        fields: list[_Field] = []
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            node = self.compile(hints[field.name], f"{where} field {field.name}")
            required = (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            )
            fields.append(_Field(field.name, node, required, _admits_null(node)))

        def build(values: dict[str, object]) -> object:
            return cls(**values)

        return tuple(fields), build

    def _typeddict_fields(
        self, cls: type, where: str
    ) -> tuple[tuple[_Field, ...], Callable[[dict[str, object]], object]]:
        hints = get_type_hints(cls, include_extras=True)
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset(hints))
        fields: list[_Field] = []
        for name, hint in hints.items():
            required = name in required_keys
            # With postponed annotations, Python 3.11 leaves NotRequired keys in
            # __required_keys__; the resolved hint still carries the wrapper.
            if get_origin(hint) in (typing.Required, typing.NotRequired):
                required = get_origin(hint) is typing.Required
                hint = get_args(hint)[0]
            node = self.compile(hint, f"{where} field {name}")
            fields.append(_Field(name, node, required, _admits_null(node)))
        return tuple(fields), dict


def _own_doc(cls: type) -> str | None:
    """The class's own docstring, not the generated dataclass or inherited one."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str):
        return None
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return None
    cleaned = inspect.cleandoc(doc)
    return cleaned or None


@dataclass(frozen=True)
class ParametersModel:
    """The compiled parameters of a function: their JSON Schema and argument conversion.

    ``context_parameter`` names the parameter that receives the ``ToolCallContext``, if any.
    """

    fields: tuple[_Field, ...]
    context_parameter: str | None
    explicit_schema: JsonSchema | None = None

    def schema(self) -> JsonSchema:
        """The JSON Schema of the arguments object, as offered to the model."""
        if self.explicit_schema is not None:
            return dict(self.explicit_schema)
        return _fields_schema(self.fields)

    def convert(self, arguments: object) -> dict[str, object]:
        """Converts a decoded arguments object into keyword arguments.

        Raises:
            ArgumentValidationError: When the arguments break the schema; the message names the
                argument and the problem.
        """
        if not isinstance(arguments, dict):
            raise ArgumentValidationError(
                f"arguments must be a JSON object, got {describe_json_type(arguments)}"
            )
        return _convert_fields(self.fields, arguments, "")


def compile_parameters(
    function: Callable[..., object],
    owner: str,
    context_type: type,
    explicit_schema: Mapping[str, JsonValue] | None = None,
) -> ParametersModel:
    """Compiles a function's parameters from its type hints.

    ``owner`` names the tool in errors. A parameter annotated ``context_type`` is left out of the
    schema and reported as ``context_parameter``.

    Raises:
        ConfigurationTypeError: For ``*args``/``**kwargs``, a parameter without a type hint (unless an explicit
            schema is given), a hint that cannot be resolved, or an unsupported type.
    """
    signature = inspect.signature(function)
    try:
        hints = get_type_hints(function, include_extras=True)
    except NameError as error:
        raise ConfigurationTypeError(f"{owner}: a type hint cannot be resolved: {error}") from error
    compiler = _Compiler(owner)
    fields: list[_Field] = []
    context_parameter: str | None = None
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ConfigurationTypeError(
                f"{owner}: parameter {parameter.name} cannot be *args or **kwargs"
            )
        hint = hints.get(parameter.name, Any if explicit_schema is not None else None)
        if hint is None:
            raise ConfigurationTypeError(f"{owner}: parameter {parameter.name} needs a type hint")
        if _unwrap_annotated(hint) is context_type:
            context_parameter = parameter.name
            continue
        node = compiler.compile(hint, f"parameter {parameter.name}")
        required = parameter.default is parameter.empty
        fields.append(_Field(parameter.name, node, required, _admits_null(node)))
    schema = None if explicit_schema is None else _checked_schema(explicit_schema, owner)
    return ParametersModel(tuple(fields), context_parameter, schema)


def _unwrap_annotated(hint: object) -> object:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _checked_schema(schema: Mapping[str, JsonValue], owner: str) -> JsonSchema:
    try:
        copied = json.loads(json.dumps(schema))
    except (TypeError, ValueError) as error:
        raise ConfigurationTypeError(f"{owner}: parameters_schema is not JSON: {error}") from error
    if not isinstance(copied, dict) or copied.get("type") != "object":
        raise ConfigurationTypeError(
            f'{owner}: parameters_schema must be a JSON Schema with "type": "object"'
        )
    return copied
