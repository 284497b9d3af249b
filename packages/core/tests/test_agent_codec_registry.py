"""agent_codec_registry writes the SDK's own JSON, byte for byte, and interoperates live."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import types
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from agent_session_test_support import running_flow_stack
from dex import CodecRegistry, JsonCodec, WireKind
from dex._value_mapper import ValueMapper
from dex.runtime_errors import ValueMappingError
from dex_agents import (
    AgentMessage,
    AgentMessageChunk,
    AgentMessageIndex,
    AgentSnapshot,
    ToolCallCompleted,
    agent_codec_registry,
)
from dex_agents._codec_registry import (
    agent_wire_value_types,
)
from dex_agents._json_values import WireValue
from dex_agents._session.message_layout import (
    AgentMessageChunkRange,
)
from dex_agents.testing import pending_interrupt, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from test_stepwise_session import flow as stepwise_flow

_SDK_DEFAULT = CodecRegistry()
_FAST = agent_codec_registry()


def _sample(hint: object, variant: int) -> object:
    """A value for a field hint: variant 0 leaves optional parts empty, 1 fills them oddly."""
    origin = get_origin(hint)
    arguments = get_args(hint)
    if origin in (Union, types.UnionType):
        inner = next(argument for argument in arguments if argument is not type(None))
        return None if variant == 0 else _sample(inner, variant)
    if origin is tuple:
        return (_sample(arguments[0], variant),) * (variant + 1)
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return {} if variant == 0 else {"é key": [1, "two", None, {"nested": 2.5}], "b": True}
    if hint is object or hint is Any:
        return {"any": ["json", 3]}
    if isinstance(hint, type) and issubclass(hint, WireValue):
        return _instance(hint, variant)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        members = list(hint)
        return members[variant % len(members)]
    if hint is datetime:
        zone = UTC if variant == 0 else timezone(timedelta(hours=-7, minutes=-30))
        return datetime(2026, 11, 30, 4, 5, 6, 789000 * variant, tzinfo=zone)
    samples: dict[object, tuple[object, object]] = {
        str: ("", 'text with "quotes", é, ✓, \u2028 and \n'),
        int: (0, -(2**53) + 1),
        float: (0.0, 1.0e-7),
        bool: (False, True),
    }
    if hint in samples:
        return samples[hint][variant]
    raise AssertionError(f"no sample for field type {hint!r}")


def _instance(value_type: type[WireValue], variant: int) -> WireValue:
    hints = get_type_hints(value_type)
    arguments = {
        definition.name: _sample(hints[definition.name], variant)
        for definition in dataclasses.fields(value_type)  # type: ignore[arg-type]
        if definition.init
    }
    return value_type(**arguments)


def _generated(value_type: type[WireValue]) -> list[WireValue]:
    made: list[WireValue] = []
    for variant in (0, 1):
        # The value's own invariants may refuse generic samples; see _HANDMADE.
        with contextlib.suppress(ValueError):
            made.append(_instance(value_type, variant))
    return made


def _samples_by_type() -> dict[type[WireValue], list[WireValue]]:
    return {
        value_type: [*_generated(value_type), *_HANDMADE.get(value_type, ())]
        for value_type in agent_wire_value_types()
    }


def _samples() -> list[WireValue]:
    return [value for values in _samples_by_type().values() for value in values]


def _messages(first: int, last: int) -> tuple[AgentMessage, ...]:
    template = _instance(AgentMessage, 1)
    return tuple(dataclasses.replace(template, sequence=n) for n in range(first, last + 1))


# Values whose own invariants (consecutive sequences, ordered ranges) refuse generic samples.
_HANDMADE: dict[type[WireValue], tuple[WireValue, ...]] = {
    AgentMessageChunk: (AgentMessageChunk(_messages(3, 5)),),
    AgentMessageChunkRange: (AgentMessageChunkRange(1, 32), AgentMessageChunkRange(33, 33)),
    AgentMessageIndex: (
        AgentMessageIndex(),
        AgentMessageIndex(
            chunks=(AgentMessageChunkRange(5, 36), AgentMessageChunkRange(37, 68)),
            window_first_sequence=69,
            first_sequence=5,
        ),
    ),
}


def test_every_wire_value_type_is_sampled() -> None:
    unsampled = [
        value_type.__name__ for value_type, values in _samples_by_type().items() if not values
    ]
    assert unsampled == []


def test_every_session_wire_value_has_a_fast_codec() -> None:
    types_found = agent_wire_value_types()
    # The spec's values (messages, state, records, RPC requests and results, events, plans...).
    assert len(types_found) >= 30
    for value_type in (AgentMessage, AgentSnapshot, ToolCallCompleted):
        assert value_type in types_found
        codec = _FAST.resolve(value_type)
        assert not isinstance(codec, JsonCodec)
        assert codec.type_name == value_type.__qualname__
        assert codec.wire_kind is WireKind.JSON


@pytest.mark.parametrize("value", _samples(), ids=lambda value: type(value).__name__)
def test_fast_codec_writes_the_sdk_default_json_byte_for_byte(value: WireValue) -> None:
    value_type = type(value)
    sdk = _SDK_DEFAULT.resolve(value_type)
    fast = _FAST.resolve(value_type)

    sdk_text = sdk.encode(value)
    fast_text = fast.encode(value)

    assert fast_text == sdk_text
    assert fast.decode(sdk_text) == value
    assert sdk.decode(fast_text) == value


def test_a_message_written_again_inside_a_chunk_or_a_snapshot_writes_the_same_json() -> None:
    # The second and third writes reuse each message's kept text.
    messages = _messages(3, 5)
    chunk = AgentMessageChunk(messages)
    snapshot = AgentSnapshot(
        messages=messages, queued_message_count=2, session_settings={"é": [1, None]}
    )
    for _ in range(3):
        for value in (*messages, chunk, snapshot):
            value_type = type(value)
            expected = _SDK_DEFAULT.resolve(value_type).encode(value)
            assert _FAST.resolve(value_type).encode(value) == expected


def test_a_value_with_a_mapping_is_written_anew_after_the_mapping_changed() -> None:
    # Only values immutable all the way down keep their text; a snapshot's settings can change.
    settings: dict[str, object] = {"model": "small"}
    snapshot = AgentSnapshot(messages=_messages(1, 2), session_settings=settings)
    codec = _FAST.resolve(AgentSnapshot)
    before = codec.encode(snapshot)
    settings["model"] = "large"
    after = codec.encode(snapshot)

    assert after != before
    assert after == _SDK_DEFAULT.resolve(AgentSnapshot).encode(snapshot)


def test_a_kept_text_stays_out_of_equality_and_repr() -> None:
    message = _instance(AgentMessage, 1)
    twin = dataclasses.replace(message)
    _FAST.resolve(AgentMessage).encode(message)

    assert message == twin
    assert repr(message) == repr(twin)
    assert dataclasses.asdict(message) == dataclasses.asdict(twin)


def test_fast_codecs_map_to_the_same_protobuf_values() -> None:
    message = _instance(AgentMessage, 1)
    default_mapper, fast_mapper = ValueMapper(_SDK_DEFAULT), ValueMapper(_FAST)
    default_value = default_mapper.encode(message, default_mapper.codec(AgentMessage))
    fast_value = fast_mapper.encode(message, fast_mapper.codec(AgentMessage))
    assert fast_value.SerializeToString() == default_value.SerializeToString()


def test_a_value_of_another_type_is_refused() -> None:
    mapper = ValueMapper(_FAST)
    with pytest.raises(ValueMappingError, match="AgentMessage requires AgentMessage"):
        mapper.encode(ToolCallCompleted("call-1"), mapper.codec(AgentMessage))


def test_malformed_json_names_the_value_type() -> None:
    mapper = ValueMapper(_FAST)
    encoded = mapper.encode(ToolCallCompleted("call-1"), mapper.codec(ToolCallCompleted))
    encoded.obj_value.payload = b'{"tool_call_id": 7}'
    with pytest.raises(
        ValueMappingError, match=r"ToolCallCompleted\.tool_call_id must be a string"
    ):
        mapper.decode(encoded, mapper.codec(ToolCallCompleted))


def test_your_own_codecs_win() -> None:
    own = JsonCodec("Mine", ToolCallCompleted.from_json, lambda value: {"tool_call_id": "x"})
    registry = agent_codec_registry({ToolCallCompleted: own})
    assert registry.resolve(ToolCallCompleted) is own
    assert registry.resolve(AgentMessage) == _FAST.resolve(AgentMessage)


@pytest.mark.parametrize(
    ("worker_codecs", "client_codecs"),
    [(_FAST, None), (None, _FAST)],
    ids=["fast-worker-default-client", "default-worker-fast-client"],
)
async def test_a_session_runs_with_fast_codecs_on_one_side_only(
    dex_in_process_worker: InProcessWorkerFactory,
    worker_codecs: CodecRegistry | None,
    client_codecs: CodecRegistry | None,
) -> None:
    async with running_flow_stack(
        dex_in_process_worker,
        stepwise_flow,
        worker_codecs=worker_codecs,
        client_codecs=client_codecs,
    ) as stack:
        sessions = stack.sessions
        await sessions.start_session("mixed-codecs", "Order 7 arrived broken. Refund it, please.")
        interrupt = await wait_for_agent_snapshot(
            sessions,
            "mixed-codecs",
            pending_interrupt,
            description="the refund approval",
        )
        assert await sessions.resolve_interrupt(
            "mixed-codecs", interrupt.interrupt_id, approved=True
        )
        snapshot = await wait_for_agent_snapshot(
            sessions, "mixed-codecs", turn_ended(1), description="the finished turn"
        )
        page = await sessions.list_agent_messages("mixed-codecs")

    assert snapshot.messages[-1].text == "Done: refunded 2599 cents on order 7."
    assert [message.sequence for message in page.messages] == list(range(1, 8))
    assert page.messages == snapshot.messages
