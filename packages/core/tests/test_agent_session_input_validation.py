"""Issue 36 case 4 through the real engine: invisible text is blank, session IDs are checked at
the client, deeply nested settings are a ConfigurationError, and a client serves only its own
Flow type's sessions."""

from __future__ import annotations

import pytest
from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex import FlowNotActiveOrNotFoundError, FlowNotFoundError
from dex_agents import (
    MAX_SESSION_ID_BYTES,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ConfigurationError,
    InterruptKind,
    SessionFlowTypeError,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    is_blank_text,
    validate_session_id,
)
from dex_agents.testing import has_pending_interrupts, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

INVISIBLE_TEXTS = ["\u200b", "\x00", "\u200b\u200c\u200d\u2060\ufeff", " \x00\t\u3164\u2800 "]
BAD_SESSION_IDS = ["a\x00b", "a\nb", "a/b", "..", ".", "x" * 10_000, "", "\u200b", "a\ud800"]


def _echo(turn: AgentTurnContext) -> AgentTurnOutcome:
    return TurnCompleted((assistant(f"echo {turn.messages[-1].text}"),), AgentUsage())


def test_invisible_characters_are_blank_and_visible_ones_are_not() -> None:
    for text in INVISIBLE_TEXTS:
        assert is_blank_text(text), repr(text)
    for text in ["a", "\u200bx", "é", "😀", "\u0301a"]:
        assert not is_blank_text(text), repr(text)


def test_session_id_rules() -> None:
    for session_id in BAD_SESSION_IDS:
        with pytest.raises(ConfigurationError, match="session ID"):
            validate_session_id(session_id)
    assert validate_session_id("é" * (MAX_SESSION_ID_BYTES // 2)) == "é" * 128
    with pytest.raises(ConfigurationError, match="over the limit of 256"):
        validate_session_id("é" * 129)
    # A long ID is shown cut short, so the error stays readable.
    with pytest.raises(ConfigurationError) as raised:
        validate_session_id("x" * 10_000)
    assert len(str(raised.value)) < 300
    for good in ["support-42", "user@example.com:chat 7", "a..b", "Ünïcødé-会话"]:
        assert validate_session_id(good) == good


async def test_invisible_messages_start_no_turn_and_are_refused(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_echo)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "\u200b\x00")
        snapshot = await wait_for_agent_snapshot(
            sessions, "s", lambda snapshot: snapshot if snapshot.state is not None else None
        )
        assert snapshot.messages == () and snapshot.state is not None
        assert snapshot.state.active_turn_id is None
        for text in INVISIBLE_TEXTS:
            assert not await sessions.send_user_message("s", text)
            assert not await sessions.steer_user_message("s", text)
        assert (await sessions.get_agent_snapshot("s")).queued_messages == ()
        assert await sessions.send_user_message("s", "\u200bhello")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert [message.text for message in snapshot.messages] == [
            "\u200bhello",
            "echo \u200bhello",
        ]
        assert runner.model_calls and len(runner.model_calls) == 1


# Its own engine: it names bad session IDs (which a prefix would make good) and asserts that no
# session "a" or "ab" exists, which another test could have started.
@pytest.mark.dex_own_stack
async def test_bad_session_ids_get_a_clear_error_and_start_nothing(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        sessions = AgentSessionClient(stack.client, stack.flow)
        for session_id in BAD_SESSION_IDS:
            with pytest.raises(ConfigurationError, match="session ID"):
                await sessions.start_session(session_id, "hi")
            with pytest.raises(ConfigurationError, match="session ID"):
                await sessions.send_user_message(session_id, "hi")
            with pytest.raises(ConfigurationError, match="session ID"):
                await sessions.get_agent_snapshot(session_id)
        # Nothing was started under a shortened or cleaned-up form of a bad ID either.
        for started in ["a", "ab", "b", "a b"]:
            with pytest.raises(FlowNotFoundError):
                await stack.client.describe_flow(started)
        # A valid ID right at the limit works end to end.
        longest = "é" * (MAX_SESSION_ID_BYTES // 2)
        await sessions.start_session(longest, "hi")
        snapshot = await wait_for_agent_snapshot(sessions, longest, turn_ended(1))
        assert snapshot.messages[-1].text == "echo hi"


def _nested(depth: int) -> dict[str, object]:
    settings: dict[str, object] = {}
    for _ in range(depth - 1):
        settings = {"a": settings}
    return settings


async def test_deeply_nested_settings_are_a_configuration_error(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        sessions = stack.sessions
        for depth in (65, 500, 5_000):
            with pytest.raises(ConfigurationError, match="nested more than 64 levels"):
                await sessions.start_session(f"deep-{depth}", "hi", session_settings=_nested(depth))
            with pytest.raises(FlowNotFoundError):
                await stack.client.describe_flow(stack.dex.scoped(f"deep-{depth}"))
        await sessions.start_session("s", "hi", session_settings=_nested(64))
        await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        for depth in (65, 5_000):
            with pytest.raises(ConfigurationError, match="nested more than 64 levels"):
                await sessions.update_session_settings("s", _nested(depth))
        assert (await sessions.get_agent_snapshot("s")).session_settings == _nested(64)


def _ask_approval(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, tool_call(turn, "c1", "refund", {"amount": 100}))
    return TurnCompleted((assistant("done"),), AgentUsage())


async def _refund(call: object) -> ToolExecutionResult:
    return ToolExecutionResult("refunded")


async def test_a_client_serves_only_its_own_flow_types_sessions(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    approving = AgentSessionOptions(
        tool_policies={
            "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
        }
    )
    billing = AgentSessionFlow(
        ScriptedRunner(_ask_approval, {"refund": _refund}),
        flow_type="BillingAgent",
        options=approving,
    )
    support = AgentSessionFlow(ScriptedRunner(_echo), flow_type="SupportAgent")
    async with dex_in_process_worker([billing, support]) as dex:
        billing_sessions = dex.sessions(billing)
        support_sessions = dex.sessions(support)
        await billing_sessions.start_session("b-1", "refund me")
        snapshot = await wait_for_agent_snapshot(
            billing_sessions,
            "b-1",
            has_pending_interrupts,
        )
        interrupt = snapshot.pending_interrupts[0]
        assert interrupt.kind is InterruptKind.APPROVAL
        calls = [
            lambda: support_sessions.get_agent_snapshot("b-1"),
            lambda: support_sessions.list_agent_messages("b-1"),
            lambda: support_sessions.resolve_interrupt(
                "b-1", interrupt.interrupt_id, approved=True
            ),
            lambda: support_sessions.send_user_message("b-1", "hi"),
            lambda: support_sessions.cancel_turn("b-1", "turn-1"),
        ]
        for call in calls:
            with pytest.raises(SessionFlowTypeError, match="'BillingAgent' session") as raised:
                await call()
            # Code that answers "not found" for a missing session answers it here too.
            assert isinstance(raised.value, FlowNotActiveOrNotFoundError)
        # Nothing was approved or queued through the other type's client.
        snapshot = await billing_sessions.get_agent_snapshot("b-1")
        assert [item.interrupt_id for item in snapshot.pending_interrupts] == ["c1"]
        assert snapshot.queued_messages == ()
        assert await billing_sessions.resolve_interrupt("b-1", "c1", approved=True)
        await wait_for_agent_snapshot(billing_sessions, "b-1", turn_ended(1))
        # A missing session still raises the SDK's own not-found error.
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await support_sessions.get_agent_snapshot("nobody")
