"""How ADK events become stored messages and come back as the same events."""

from __future__ import annotations

import time

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentMessage,
    AgentToolCall,
    AgentToolCallStatus,
    FrameworkMessage,
    MessageRole,
    ToolEffect,
)
from dex_agents_google_adk._step_session_service import StepSessionService
from dex_agents_google_adk._transcript import (
    event_messages,
    function_response_output,
    read_transcript,
    recorded_function_response,
    results_event,
    user_message,
)
from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService
from google.genai import types


def _stored(messages: list[FrameworkMessage], turn_id: str = "turn-1") -> list[AgentMessage]:
    return [
        AgentMessage.from_framework_message(message, sequence=i, turn_id=turn_id, created_at=None)
        for i, message in enumerate(messages, start=1)
    ]


def _call(call_id: str, name: str = "lookup", **args: object) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=dict(args)))


def _record(call_id: str, status: AgentToolCallStatus, **fields: str) -> AgentToolCall:
    return AgentToolCall(
        call_id, fields.pop("tool_name", "lookup"), "{}", ToolEffect.READ, False, status, "turn-1",
        0, **fields,
    )  # fmt: skip


def test_an_event_with_two_calls_is_two_messages_that_read_back_as_one_event() -> None:
    model_event = Event(
        author="agent",
        invocation_id="e-1",
        content=types.Content(
            role="model",
            parts=[types.Part(text="Let me look."), _call("c1", gate="a"), _call("c2", gate="b")],
        ),
    )
    messages = event_messages(model_event)

    assert [(m.role, m.text, m.tool_call_id) for m in messages] == [
        (MessageRole.ASSISTANT, "Let me look.", None),
        (MessageRole.ASSISTANT, None, "c1"),
        (MessageRole.ASSISTANT, None, "c2"),
    ]
    assert messages[1].tool_arguments == '{"gate":"a"}'
    stored = _stored([user_message("hi"), *messages])
    transcript = read_transcript(stored)
    assert len(transcript.events) == 2
    assert transcript.events[1].id == model_event.id
    assert transcript.events[1].content == model_event.content
    assert transcript.turn_start == 0
    assert [call.id for call in transcript.unanswered_calls] == ["c1", "c2"]


def test_results_answer_the_calls_and_leave_none_unanswered() -> None:
    calls = [types.FunctionCall(id="c1", name="lookup"), types.FunctionCall(id="c2", name="lookup")]
    results = results_event("turn-1", calls, [{"result": "one"}, {"count": 2}])
    model = Event(
        author="agent", content=types.Content(role="model", parts=[_call("c1"), _call("c2")])
    )
    messages = [user_message("hi"), *event_messages(model), *event_messages(results, stable=True)]

    assert [(m.role, m.tool_output) for m in messages[-2:]] == [
        (MessageRole.TOOL, "one"),
        (MessageRole.TOOL, '{"count":2}'),
    ]
    # A stable event encodes the same on every attempt.
    again = event_messages(
        results_event("turn-1", calls, [{"result": "one"}, {"count": 2}]), stable=True
    )
    assert [m.framework_item for m in again] == [m.framework_item for m in messages[-2:]]
    transcript = read_transcript(_stored(messages))
    assert len(transcript.events) == 3
    assert transcript.unanswered_calls == ()


def test_a_call_left_unanswered_by_an_earlier_turn_reads_as_outcome_unknown() -> None:
    model = Event(author="agent", content=types.Content(role="model", parts=[_call("old")]))
    earlier = _stored([user_message("first"), *event_messages(model)], turn_id="turn-1")
    later = AgentMessage.from_framework_message(
        user_message("second"), sequence=3, turn_id="turn-2", created_at=None
    )
    transcript = read_transcript([*earlier, later])

    inserted = transcript.events[2]
    (response,) = inserted.get_function_responses()
    assert (response.id, response.response) == ("old", {"result": OUTCOME_UNKNOWN_TOOL_RESULT})
    assert transcript.turn_start == 3
    assert transcript.unanswered_calls == ()


def test_a_message_in_another_format_is_read_from_its_neutral_fields() -> None:
    foreign = [
        FrameworkMessage(role=MessageRole.USER, framework_item='{"stepwise":"x"}', text="hello"),
        FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item="not json",
            tool_call_id="c9",
            tool_name="lookup",
            tool_arguments='{"gate":""}',
        ),
        FrameworkMessage(
            role=MessageRole.TOOL,
            framework_item="{}",
            tool_call_id="c9",
            tool_name="lookup",
            tool_output="found",
        ),
    ]
    events = read_transcript(_stored(foreign)).events

    assert events[0].content is not None and events[0].content.parts[0].text == "hello"  # type: ignore[index]
    (call,) = events[1].get_function_calls()
    assert (call.id, call.args) == ("c9", {"gate": ""})
    (response,) = events[2].get_function_responses()
    assert response.response == {"result": "found"}


def test_function_responses_round_trip_through_their_output_text() -> None:
    for response in (
        {"result": "plain text"},
        {"result": '{"looks": "like json"}'},
        {"status": "ok", "items": [1, 2]},
        {"result": 3},
    ):
        output = function_response_output(response)
        record = _record("c1", AgentToolCallStatus.SUCCEEDED, output=output)
        assert recorded_function_response(record) == response
    assert function_response_output({"result": "plain text"}) == "plain text"


def test_other_outcomes_read_as_the_sessions_text() -> None:
    failed = _record("c1", AgentToolCallStatus.FAILED, error="index offline")
    assert recorded_function_response(failed) == {"result": "Error: index offline"}
    assert recorded_function_response(None) == {"result": OUTCOME_UNKNOWN_TOOL_RESULT}
    # A built-in tool's JSON result stays text, exactly as the session wrote it.
    answered = _record(
        "c2",
        AgentToolCallStatus.SUCCEEDED,
        tool_name="ask_user",
        output='{"status":"answered","answer":"eu"}',
    )
    assert recorded_function_response(answered) == {"result": '{"status":"answered","answer":"eu"}'}


async def test_a_model_calls_session_service_leaves_the_kept_event_as_it_was_stored() -> None:
    # Each read validates an item once per process and hands out that event (KeptDecodes); the
    # model call's session service trims temp state on a copy, where ADK's would edit the event.
    event = Event(
        author="agent",
        invocation_id="e-1",
        content=types.Content(role="model", parts=[types.Part(text="Noted.")]),
        actions=EventActions(state_delta={"temp:scratch": 1, "kept": 2}),
    )
    stored = _stored([*event_messages(event)])
    first = read_transcript(stored).events[0]
    service = StepSessionService("app", "u", "s", [first])
    session = await service.get_session(app_name="app", user_id="u", session_id="s")
    assert session is not None
    assert session.state == {"kept": 2}
    assert session.events[0].actions.state_delta == {"kept": 2}

    second = read_transcript(stored).events[0]
    assert second is first
    assert second.actions.state_delta == {"temp:scratch": 1, "kept": 2}
    assert second.model_dump() == Event.model_validate_json(stored[0].framework_item).model_dump()


async def test_adks_own_session_service_edits_the_event_it_is_given() -> None:
    # Why the model call's service copies: ADK's in-memory service trims an appended event's
    # temp state in place. If ADK stops doing so, the copy can go.
    event = Event(author="agent", actions=EventActions(state_delta={"temp:scratch": 1, "kept": 2}))
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="u", session_id="s")
    await service.append_event(session, event)
    assert event.actions.state_delta == {"kept": 2}


async def test_the_same_stored_message_read_twice_is_two_events_a_session_service_keeps() -> None:
    # Two turns of the same text store the same item (no id, no timestamp). Every read gives it a
    # new id and timestamp, as validating it anew does; ADK's session service drops an event
    # equal to one it holds with the same id, which dropped the second turn's message.
    text = user_message("Where is order 7?")
    results = event_messages(
        results_event("turn-1", [types.FunctionCall(id="c1")], [{}]), stable=True
    )
    stored = _stored([text, *results, text])
    first = read_transcript(stored).events
    before = time.time()
    again = read_transcript(stored).events

    assert len({event.id for event in [*first, *again]}) == 5  # the results keep their own id
    assert first[1].id == again[1].id
    assert min(event.timestamp for event in again) >= before
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="u", session_id="s")
    for event in first:
        await service.append_event(session, event)
    kept = await service.get_session(app_name="app", user_id="u", session_id="s")
    assert kept is not None
    assert [e.content.parts[0].text for e in kept.events if e.content and e.content.parts] == [
        "Where is order 7?",
        None,
        "Where is order 7?",
    ]
