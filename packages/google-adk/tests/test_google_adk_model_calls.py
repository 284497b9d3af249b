"""How many times a durable ADK turn calls the model, and what each call sees.

The scripted model decides from its input alone, like a real one: it reads an order, then writes
a note, then answers, counting this turn's tool results after the last user text. A model call
that sees another history (an earlier turn's results, or no message of its own turn) answers
early, so the turn makes fewer calls. Two turns of the same text in one session: a runner must
never take the second for a copy of the first.
"""

from __future__ import annotations

import json

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import assistant_texts, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk._transcript import read_transcript
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.events import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from google_adk_test_support import (
    ScriptedLlm,
    call_reply,
    running_session,
    text_reply,
    turn_ended,
)

REQUEST = "Note that order 7 is late"


def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return {"order_id": order_id, "status": "late"}


def add_order_note(order_id: str, note: str) -> dict[str, str]:
    """Add a note to an order."""
    return {"order_id": order_id, "note": note}


def _user_text(content: types.Content) -> str | None:
    if content.role != "user":
        return None
    return "".join(part.text for part in content.parts or () if part.text) or None


def _read_then_write_then_answer(request: LlmRequest) -> LlmResponse:
    """The next step after this turn's tool results: read, write, then answer."""
    contents = request.contents
    start = max((i for i, c in enumerate(contents) if _user_text(c)), default=0)
    done = [
        part.function_response.name
        for content in contents[start:]
        for part in content.parts or ()
        if part.function_response is not None
    ]
    if not done:
        return call_reply(("lookup_order", {"order_id": "7"}))(request)  # type: ignore[return-value]
    if len(done) == 1:
        return call_reply(("add_order_note", {"order_id": "7", "note": "late"}))(request)  # type: ignore[return-value]
    return text_reply(f"{_user_text(contents[start])}: {' then '.join(done)}")(request)  # type: ignore[return-value]


def _seen(request: LlmRequest) -> list[str]:
    """A model input as one line per content: user text, tool call or tool result."""
    lines = []
    for content in request.contents:
        for part in content.parts or ():
            if part.function_call is not None:
                lines.append(f"call {part.function_call.name}")
            elif part.function_response is not None:
                response = json.dumps(part.function_response.response, sort_keys=True)
                lines.append(f"result {part.function_response.name} {response}")
            elif part.text:
                lines.append(f"{content.role}: {part.text}")
    return lines


TURN = [
    f"user: {REQUEST}",
    "call lookup_order",
    'result lookup_order {"order_id": "7", "status": "late"}',
    "call add_order_note",
    'result add_order_note {"note": "late", "order_id": "7"}',
]
ANSWER = f"{REQUEST}: lookup_order then add_order_note"


async def test_each_turn_of_the_same_text_calls_the_model_three_times_with_its_own_results(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    model = ScriptedLlm(model="m", script=[_read_then_write_then_answer])
    flow = AgentSessionFlow(
        GoogleAdkRunner(LlmAgent(name="notes", model=model, tools=[lookup_order, add_order_note])),
        flow_type="NotesAgent",
        options=AgentSessionOptions(
            tool_policies={
                "lookup_order": ToolPolicy(ToolEffect.READ),
                "add_order_note": ToolPolicy(
                    ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False
                ),
            }
        ),
    )
    async with running_session(dex_in_process_worker, [flow]) as stack:
        sessions = stack.sessions(flow)
        await stack.run_turn(flow, "notes-1", REQUEST)
        assert await sessions.send_user_message("notes-1", REQUEST)
        snapshot = await wait_for_agent_snapshot(
            sessions, "notes-1", turn_ended(2), description="the second turn to end"
        )
        steps = await stack.executed_step_types("notes-1")

    assert len(model.requests) == 6  # three a turn: read, write, answer
    first_turn = [*TURN, f"model: {ANSWER}"]
    assert [_seen(request) for request in model.requests] == [
        TURN[:1],
        TURN[:3],
        TURN,
        [*first_turn, *TURN[:1]],
        [*first_turn, *TURN[:3]],
        [*first_turn, *TURN],
    ]
    assert assistant_texts(snapshot) == [ANSWER, ANSWER]
    # Every model call and every tool call its own Step: the read retried, the write never.
    one_turn = ["RunModel", "CallTool", "ResumeTurn", "RunModel", "CallSingleAttemptTool"]
    one_turn += ["ResumeTurn", "RunModel"]
    assert steps == ["StartAgentSession", *one_turn, "AwaitUserMessage", *one_turn]


def _both_orders_then_answer(request: LlmRequest) -> LlmResponse:
    """Two reads in one response, then an answer naming the results this turn saw."""
    contents = request.contents
    start = max((i for i, c in enumerate(contents) if _user_text(c)), default=0)
    results = [
        json.dumps(part.function_response.response, sort_keys=True)
        for content in contents[start:]
        for part in content.parts or ()
        if part.function_response is not None
    ]
    if not results:
        return call_reply(("lookup_order", {"order_id": "7"}), ("lookup_order", {"order_id": "8"}))(
            request
        )  # type: ignore[return-value]
    return text_reply(f"{_user_text(contents[start])} -> {len(results)} results")(request)  # type: ignore[return-value]


def _shout(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """A callback editing the request's texts, as ADK allows: top-level fields of its parts."""
    for content in llm_request.contents:
        for part in content.parts or ():
            if part.text:
                part.text = part.text.upper()


async def test_model_calls_leave_the_events_the_worker_keeps_as_they_were_stored(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    # The model call's session service lends ADK the events the Worker keeps per stored message
    # (no deep copy per model call); ADK and the callback must edit only copies of them.
    model = ScriptedLlm(model="m", script=[_both_orders_then_answer])
    agent = LlmAgent(name="orders", model=model, tools=[lookup_order], before_model_callback=_shout)
    flow = AgentSessionFlow(
        GoogleAdkRunner(agent),
        flow_type="OrdersAgent",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
    async with running_session(dex_in_process_worker, [flow]) as stack:
        sessions = stack.sessions(flow)
        await stack.run_turn(flow, "orders-1", "Where are my orders?")
        assert await sessions.send_user_message("orders-1", "And now?")
        snapshot = await wait_for_agent_snapshot(
            sessions, "orders-1", turn_ended(2), description="the second turn to end"
        )

    assert assistant_texts(snapshot) == [
        "WHERE ARE MY ORDERS? -> 2 results",
        "AND NOW? -> 2 results",
    ]
    assert len(model.requests) == 4
    stored = [message for message in snapshot.messages if message.framework_item]
    assert len(stored) == 12  # a turn: the text, two calls, two results, the answer
    for message in stored:
        kept = read_transcript([message]).events[0]  # this process's kept decode of the item
        # All of it, not only the content: reads share the kept event (its actions too).
        stamped = {"id", "timestamp"}  # a user message is stored without them; reads stamp them
        assert kept.model_dump(exclude=stamped) == Event.model_validate_json(
            message.framework_item
        ).model_dump(exclude=stamped)
