"""How Pydantic AI messages are stored: one part per message, joined back on load."""

from __future__ import annotations

import json
import uuid

import pytest
from dex_agents import AgentMessage, FrameworkMessage, MessageRole
from dex_agents_pydantic_ai import _transcript
from dex_agents_pydantic_ai._transcript import decode_history, encode_messages, user_message
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage


def _stored(messages: list[FrameworkMessage], first: int = 1) -> list[AgentMessage]:
    return [
        AgentMessage.from_framework_message(
            m, sequence=first + i, turn_id="turn-1", created_at=None
        )
        for i, m in enumerate(messages)
    ]


def test_a_response_is_stored_one_part_per_message_and_joined_on_load() -> None:
    response = ModelResponse(
        parts=[
            TextPart("Let me look."),
            ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1"),
            ToolCallPart("refund", {"order_id": "7"}, tool_call_id="c2"),
        ],
        usage=RequestUsage(input_tokens=10, output_tokens=4),
        model_name="gpt-local",
        provider_response_id="resp-1",
        metadata={"mine": 1},
    )
    results = ModelRequest(
        parts=[
            ToolReturnPart("lookup", "shipped", tool_call_id="c1"),
            ToolReturnPart("refund", "boom", tool_call_id="c2", outcome="failed"),
        ]
    )
    stored = encode_messages([response, results])

    assert [(m.role, m.text, m.tool_call_id, m.tool_output) for m in stored] == [
        (MessageRole.ASSISTANT, "Let me look.", None, None),
        (MessageRole.ASSISTANT, None, "c1", None),
        (MessageRole.ASSISTANT, None, "c2", None),
        (MessageRole.TOOL, None, "c1", "shipped"),
        (MessageRole.TOOL, None, "c2", '{"error":"boom"}'),
    ]
    assert stored[1].tool_arguments == '{"order_id":"7"}'
    loaded = decode_history(_stored(stored))
    assert loaded == [response, results]
    assert isinstance(loaded[0], ModelResponse) and loaded[0].usage.input_tokens == 10


def test_a_fragment_whose_start_was_deleted_loads_on_its_own() -> None:
    response = ModelResponse(parts=[TextPart("a"), TextPart("b"), TextPart("c")])
    stored = encode_messages([response])
    (loaded,) = decode_history(_stored(stored[1:], first=2))
    assert isinstance(loaded, ModelResponse)
    assert [part.content for part in loaded.parts if isinstance(part, TextPart)] == ["b", "c"]


def test_the_user_message_is_deterministic_and_loads_as_a_request() -> None:
    assert user_message("hello") == user_message("hello")
    (loaded,) = decode_history(_stored([user_message("hello")]))
    assert isinstance(loaded, ModelRequest)
    (part,) = loaded.parts
    assert isinstance(part, UserPromptPart) and part.content == "hello"


def test_an_item_of_another_runner_names_its_sequence() -> None:
    foreign = FrameworkMessage(role=MessageRole.USER, framework_item='{"type":"message"}', text="x")
    with pytest.raises(ValueError, match="stored message 7 is not Pydantic AI message JSON"):
        decode_history(_stored([foreign], first=7))


def test_each_load_is_a_copy_that_pydantic_ai_may_edit_in_place() -> None:
    # Pydantic AI edits the history it is given (the run ID of the last request, parts), so
    # every load hands out its own objects, whatever a process keeps between loads.
    stored = _stored(
        [
            user_message("Where is order 7?"),
            *encode_messages(
                [
                    ModelResponse(
                        parts=[ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1")],
                        usage=RequestUsage(input_tokens=3, output_tokens=2),
                        metadata={"mine": {"n": 1}},
                    )
                ]
            ),
        ]
    )
    first = decode_history(stored)
    request, response = first
    assert isinstance(request, ModelRequest) and isinstance(response, ModelResponse)
    request.run_id = "run-of-an-earlier-step"
    request.parts.append(UserPromptPart("added in place"))
    call = response.parts[0]
    assert isinstance(call, ToolCallPart) and isinstance(call.args, dict)
    call.args["order_id"] = "8"
    response.usage.input_tokens = 99
    assert response.metadata is not None
    response.metadata["mine"]["n"] = 2

    second = decode_history(stored)
    assert second != first
    again_request, again_response = second
    assert isinstance(again_request, ModelRequest) and isinstance(again_response, ModelResponse)
    assert again_request.run_id is None
    assert [type(part) for part in again_request.parts] == [UserPromptPart]
    assert again_response.parts == [ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1")]
    assert again_response.usage.input_tokens == 3
    assert again_response.metadata == {"mine": {"n": 1}}


def _without(item: str, field: str) -> str:
    """``item`` with ``field`` left out of its one message's one part."""
    (message,) = json.loads(item)
    message["parts"][0].pop(field)
    return json.dumps([message])


def test_equal_stored_items_load_as_distinct_messages_with_their_own_made_fields() -> None:
    # A process validates each stored item once and copies it for every load; a field the item
    # leaves out (a user message's timestamp, a call without an ID) is made anew for each copy,
    # as a validation would, so two equal items never become one object or one ID.
    text = f"Where is order {uuid.uuid4()}?"
    (call,) = encode_messages([ModelResponse(parts=[ToolCallPart("lookup", {"order_id": "7"})])])
    no_id = FrameworkMessage(
        role=MessageRole.ASSISTANT, framework_item=_without(call.framework_item, "tool_call_id")
    )
    stored = _stored([user_message(text), user_message(text), no_id, no_id])

    first_user, second_user, first_call, second_call = decode_history(stored)
    assert isinstance(first_user, ModelRequest) and isinstance(second_user, ModelRequest)
    assert [part.content for part in first_user.parts] == [text]  # type: ignore[union-attr]
    assert first_user is not second_user
    assert first_user.parts[0] is not second_user.parts[0]
    assert isinstance(first_call, ModelResponse) and isinstance(second_call, ModelResponse)
    first_id = first_call.parts[0]
    second_id = second_call.parts[0]
    assert isinstance(first_id, ToolCallPart) and isinstance(second_id, ToolCallPart)
    assert first_id.tool_call_id != second_id.tool_call_id
    (again,) = decode_history(stored[2:3])
    assert isinstance(again, ModelResponse) and isinstance(again.parts[0], ToolCallPart)
    assert again.parts[0].tool_call_id not in (first_id.tool_call_id, second_id.tool_call_id)


def test_each_stored_item_is_validated_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    validated: list[str] = []
    adapter = ModelMessagesTypeAdapter

    class _Counting:
        def validate_json(self, item: str) -> list[ModelMessage]:
            validated.append(item)
            return adapter.validate_json(item)

        def dump_json(self, messages: list[ModelMessage]) -> bytes:
            return adapter.dump_json(messages)

    monkeypatch.setattr(_transcript, "ModelMessagesTypeAdapter", _Counting())
    stored = _stored(
        [
            user_message(f"Order {uuid.uuid4()}"),
            *encode_messages([ModelResponse(parts=[TextPart(f"Shipped {uuid.uuid4()}")])]),
        ]
    )

    loads = [decode_history(stored) for _ in range(3)]

    assert len(validated) == 2
    assert loads[0][1] == loads[2][1] and loads[0][1] is not loads[2][1]
    assert loads[0][0].parts[0] is not loads[2][0].parts[0]
