"""Helpers of the steering, cancellation, settings, and spend limit tests: in-process gates and
probes of the session snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from agent_session_test_support import (
    ScriptedRunner,
    SessionStack,
    assistant,
    final_answer_with_results,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex_agents import (
    AgentSessionOptions,
    AgentSnapshot,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolExecution,
    MessageRole,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import has_pending_interrupts, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

__all__ = [
    "Gate",
    "call_is_final",
    "echo_user_messages",
    "gated_lookup_and_refund_runner",
    "is_active",
    "lookup_running_refund_waiting",
    "one_tool_call_then_echo",
    "user_texts",
]


class Gate:
    """An in-process gate that a runner call waits on, and a flag that says a call reached it."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()

    async def pass_through(self) -> None:
        """Mark the gate reached, then wait until the test opens it."""
        self.reached.set()
        await self.opened.wait()

    async def wait_reached(self) -> None:
        """Wait (30 s at most) until a runner call reached the gate."""
        await asyncio.wait_for(self.reached.wait(), 30)

    def hold_model_calls(
        self, turn_id: str | None = None
    ) -> Callable[[AgentTurnContext], Awaitable[None]]:
        """A ``ScriptedRunner`` ``before_model_call`` hook that holds the model calls of
        ``turn_id`` (of every turn when ``None``) at this gate."""

        async def before_model_call(turn: AgentTurnContext) -> None:
            if turn_id is None or turn.turn_id == turn_id:
                await self.pass_through()

        return before_model_call


def user_texts(turn: AgentTurnContext) -> list[str]:
    """The texts of the turn's own user messages, in order."""
    return [
        message.text or ""
        for message in turn.messages
        if message.role is MessageRole.USER and message.turn_id == turn.turn_id
    ]


def echo_user_messages(turn: AgentTurnContext) -> TurnCompleted:
    """A final answer naming the turn's user messages."""
    return TurnCompleted((assistant("heard " + " | ".join(user_texts(turn))),), AgentUsage())


def is_active(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    """A snapshot probe: a turn is active."""
    state = snapshot.state
    return snapshot if state is not None and state.active_turn_id is not None else None


def one_tool_call_then_echo(
    call_id: str, name: str, arguments: object
) -> Callable[[AgentTurnContext], AgentTurnOutcome]:
    """A model script: turn 1 calls one tool and then answers with its result; later turns echo
    their user messages."""

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == "turn-1":
            if not turn.is_resuming:
                return request_tools(turn, tool_call(turn, call_id, name, arguments))
            return final_answer_with_results(turn)
        return echo_user_messages(turn)

    return script


def gated_lookup_and_refund_runner(gate: Gate) -> ScriptedRunner:
    """Turn 1 calls ``lookup`` (call ``slow``, held at ``gate``) and ``refund`` (call ``write``)
    together, then answers with their results; later turns echo their user messages."""

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.turn_id == "turn-1":
            if not turn.is_resuming:
                return request_tools(
                    turn,
                    tool_call(turn, "slow", "lookup", {}),
                    tool_call(turn, "write", "refund", {"order": 7}),
                )
            return final_answer_with_results(turn)
        return echo_user_messages(turn)

    async def lookup(call: DeferredToolExecution) -> ToolExecutionResult:
        await gate.pass_through()
        return ToolExecutionResult("slow result")

    async def refund(call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("refunded")

    return ScriptedRunner(script, {"lookup": lookup, "refund": refund})


@asynccontextmanager
async def lookup_running_refund_waiting(
    workers: InProcessWorkerFactory, gate: Gate
) -> AsyncIterator[tuple[ScriptedRunner, SessionStack]]:
    """Session ``s`` on ``gated_lookup_and_refund_runner(gate)`` once its ``lookup`` (a read)
    runs, held at ``gate``, while its ``refund`` waits for approval."""
    runner = gated_lookup_and_refund_runner(gate)
    options = AgentSessionOptions(tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with running_session_stack(workers, runner, options) as stack:
        await stack.sessions.start_session("s", "refund order 7")
        await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts)
        await gate.wait_reached()
        yield runner, stack


def call_is_final(call_id: str) -> Callable[[AgentSnapshot], AgentSnapshot | None]:
    """A snapshot probe: the record of ``call_id`` is final."""

    def probe(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        records = {record.tool_call_id: record for record in snapshot.tool_calls}
        record = records.get(call_id)
        return snapshot if record is not None and record.is_final else None

    return probe
