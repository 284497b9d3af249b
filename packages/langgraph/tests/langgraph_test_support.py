"""Shared pieces of the LangGraph adapter's tests: a scripted tool-calling chat model, an
in-process Worker on the shared engine, and waiting for a turn to end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from dex import Flow
from dex_agents import (
    AgentEvent,
    AgentInterrupt,
    AgentSessionClient,
    AgentSnapshot,
    AgentTurnContext,
    MessageRole,
)
from dex_agents.testing import (
    InProcessWorker,
    TurnContextBuilder,
    pending_interrupt,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_langgraph import LangGraphRunner
from dex_agents_langgraph.testing import turn_messages
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage

Respond = Callable[[list[BaseMessage]], AIMessage]


def tool_results(messages: Sequence[BaseMessage]) -> list[str]:
    """The text of this turn's ``ToolMessage`` results, in order."""
    return [m.text for m in turn_messages(messages) if isinstance(m, ToolMessage)]


def call_tools_then_answer(*calls: ToolCall, answer: str = "done") -> Respond:
    """A script: the first model call of a turn asks for ``calls``, the next answers
    ``<answer>: <results>``."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        if not any(isinstance(m, AIMessage) for m in turn_messages(messages)):
            return AIMessage(content="", tool_calls=list(calls))
        return AIMessage(content=f"{answer}: " + "; ".join(tool_results(messages)))

    return respond


def first_turn(
    runner: LangGraphRunner, text: str, events: list[AgentEvent] | None = None
) -> AgentTurnContext:
    """The context of a turn's first model call after the user sent ``text``, as ``RunModel``
    builds it, for calling ``run_model_step`` directly."""
    turns = TurnContextBuilder(flow_id="s1", step_execution_id="run-model")
    if events is not None:
        turns.events = events
    turns.start_turn(runner.build_user_message(text))
    return turns.context()


@dataclass
class LocalSessions:
    """An in-process Worker serving some Flows, and a session client per Flow type."""

    dex: InProcessWorker
    clients: dict[str, AgentSessionClient]

    def __getitem__(self, flow_type: str) -> AgentSessionClient:
        return self.clients[flow_type]


@asynccontextmanager
async def local_sessions(
    workers: InProcessWorkerFactory, flows: Sequence[Flow[Any]]
) -> AsyncIterator[LocalSessions]:
    """Serve ``flows`` from an in-process Worker on the test session's engine while the block
    runs (``workers`` is the ``dex_in_process_worker`` fixture)."""
    async with workers(flows) as dex:
        clients = {flow.get_flow_type(): dex.sessions(flow) for flow in flows}  # type: ignore[arg-type]
        yield LocalSessions(dex, clients)


async def wait_for_interrupt(sessions: AgentSessionClient, session_id: str) -> AgentInterrupt:
    """Wait for the session's first pending approval or question."""
    return await wait_for_agent_snapshot(
        sessions,
        session_id,
        pending_interrupt,
        description="a pending interrupt",
    )


def texts_of(snapshot: AgentSnapshot, role: MessageRole) -> list[str]:
    """The non-empty text (or tool output) of the stored messages of one role."""
    if role is MessageRole.TOOL:
        return [m.tool_output or "" for m in snapshot.messages if m.role is role]
    return [m.text or "" for m in snapshot.messages if m.role is role and m.text]
