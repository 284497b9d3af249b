"""The Messages API stream the relay reads and replays, and the stored form of a turn."""

from __future__ import annotations

import json

from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT, AgentMessage, MessageRole
from dex_agents_claude_agent_sdk._anthropic_stream import (
    AnthropicStreamReader,
    SseEventParser,
    message_sse_events,
)
from dex_agents_claude_agent_sdk._transcript import api_messages, assistant_messages

RESPONSE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig-bytes=="},
        {"type": "text", "text": "Looking up both."},
        {"type": "tool_use", "id": "toolu_a", "name": "mcp__dex__lookup", "input": {"id": 7}},
        {"type": "tool_use", "id": "toolu_b", "name": "mcp__dex__refund", "input": {"id": 7}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 30},
}


def test_a_replayed_response_reads_back_exactly_with_its_signature() -> None:
    reader, parser = AnthropicStreamReader(), SseEventParser()
    deltas: list[str] = []
    stream = b"".join(message_sse_events(RESPONSE))
    # Split mid-frame, as a network would.
    for chunk in (stream[:37], stream[37:500], stream[500:]):
        for name, data in parser.feed(chunk):
            text = reader.apply(name, data)
            if text:
                deltas.append(text)

    assert reader.complete
    assert reader.message == RESPONSE
    assert deltas == ["Looking up both."]
    assert reader.tool_use_ids() == ["toolu_a", "toolu_b"]


def _stored(response: dict[str, object], first_sequence: int) -> list[AgentMessage]:
    return [
        AgentMessage.from_framework_message(
            m, sequence=first_sequence + i, turn_id="turn-1", created_at=None
        )
        for i, m in enumerate(assistant_messages(response))
    ]


def test_a_response_is_stored_one_part_per_tool_call_and_joins_again() -> None:
    parts = assistant_messages(RESPONSE)
    assert [(p.tool_call_id, p.tool_name, p.text) for p in parts] == [
        ("toolu_a", "lookup", "Looking up both."),
        ("toolu_b", "refund", None),
    ]
    user = AgentMessage(
        1, MessageRole.USER, json.dumps({"role": "user", "content": "hi"}), text="hi"
    )
    conversation = api_messages([user, *_stored(RESPONSE, 2)])
    assert conversation[1]["content"] == RESPONSE["content"]
    # No result is stored: each call gets the outcome-unknown text, so none is orphaned.
    missing = conversation[2]["content"]
    assert [block["tool_use_id"] for block in missing] == ["toolu_a", "toolu_b"]
    assert all(block["content"][0]["text"] == OUTCOME_UNKNOWN_TOOL_RESULT for block in missing)


def test_every_read_of_the_conversation_gets_its_own_messages() -> None:
    # Each stored item is parsed once per process; joining response parts edits the messages
    # read, and so may a caller, so every read works on its own copies.
    user = AgentMessage(
        1, MessageRole.USER, json.dumps({"role": "user", "content": "hi"}), text="hi"
    )
    stored = [user, *_stored(RESPONSE, 2)]
    first = api_messages(stored)
    first[1]["content"][2]["input"]["id"] = 8
    first[1]["content"].append({"type": "text", "text": "added"})
    second = api_messages(stored)
    assert second[1]["content"] == RESPONSE["content"]
    assert second[:2] == api_messages(stored)[:2]
