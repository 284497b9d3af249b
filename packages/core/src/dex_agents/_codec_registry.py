"""Fast Dex codecs for every dex-agents wire value, writing the JSON the SDK's own codec writes.

The Dex SDK encodes a dataclass with ``dataclasses.asdict`` (a deep copy of every field) and
decodes one by calling ``typing.get_type_hints`` for every object it builds. A session moves its
messages through that code in every Step and every snapshot, so it is a large share of a Worker's
and a client's CPU. The codecs here convert with each wire value's own ``to_json``/``from_json``
instead, and a stored message keeps its text once written (see ``_wire_value_json_text``), so
the messages a chunk or a snapshot repeats are not written again. The JSON text is the same byte
for byte, so Workers and clients with and without these codecs serve and read the same sessions,
and values stored by either read back in the other.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dex import Codec, CodecRegistry, Value, WireKind

from dex_agents._json_values import WireValue
from dex_agents._wire_value_json_text import wire_value_json_text
from dex_agents.exceptions import ConfigurationTypeError

__all__ = ["agent_codec_registry", "agent_wire_value_types"]


def agent_codec_registry(codecs: Mapping[object, Codec[Any]] | None = None) -> CodecRegistry:
    """A ``CodecRegistry`` with fast codecs for every wire value defined so far.

    Pass it to the ``Registry`` of Workers and clients. It is optional: without it the SDK's
    automatic dataclass codec writes the same JSON, only more slowly. Build it after importing
    the modules that define your Flows, so that wire values of adapters and of your own code
    (subclasses of ``WireValue``) are included.

    Args:
        codecs: Your own codecs by type hint, as ``CodecRegistry`` takes them; they win over the
            ones added here.

    Returns:
        A new ``CodecRegistry``.

    Example:
        >>> from dex import Registry
        >>> from dex_agents import AgentUsage
        >>> registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
        >>> registry.codec_registry.resolve(AgentUsage).type_name
        'AgentUsage'
    """
    fast: dict[object, Codec[Any]] = {
        value_type: _wire_value_codec(value_type) for value_type in agent_wire_value_types()
    }
    fast.update(codecs or {})
    return CodecRegistry(fast)


def agent_wire_value_types() -> tuple[type[WireValue], ...]:
    """Every ``WireValue`` dataclass defined so far, in a stable order (by module and name).

    Example:
        >>> from dex_agents import AgentMessage
        >>> AgentMessage in agent_wire_value_types()
        True
    """
    found = {
        value_type for value_type in _subclasses(WireValue) if dataclasses.is_dataclass(value_type)
    }
    return tuple(
        sorted(found, key=lambda value_type: (value_type.__module__, value_type.__qualname__))
    )


def _subclasses(base: type[WireValue]) -> Iterator[type[WireValue]]:
    for subclass in base.__subclasses__():
        yield subclass
        yield from _subclasses(subclass)


_W = TypeVar("_W", bound=WireValue)


@dataclass(frozen=True)
class _WireValueCodec(Generic[_W]):
    """The SDK ``JsonCodec``'s contract for one wire value type, with its own conversion."""

    value_type: type[_W]

    @property
    def type_name(self) -> str:
        return self.value_type.__qualname__

    @property
    def wire_kind(self) -> WireKind:
        return WireKind.JSON

    def encode(self, value: _W) -> Value:
        # The exact type, as the SDK's automatic dataclass codec requires.
        if type(value) is not self.value_type:
            raise ConfigurationTypeError(
                f"{self.type_name} requires {self.type_name}, got {type(value).__name__}"
            )
        return Value(WireKind.JSON, wire_value_json_text(value))

    def decode(self, value: Value) -> _W:
        if value.kind is not WireKind.JSON or not isinstance(value.data, str):
            raise ConfigurationTypeError(f"{self.type_name} requires a JSON value")
        return self.value_type.from_json(json.loads(value.data))


def _wire_value_codec(value_type: type[WireValue]) -> Codec[WireValue]:
    return _WireValueCodec(value_type)
