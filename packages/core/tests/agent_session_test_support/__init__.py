"""A scripted runner and an in-process Worker for the session Flow's integration tests.

The runner answers each model call from a script function of the turn and runs tools from a
table of async handlers, recording every real call, so a test asserts what ran and how often.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from dex import AsyncClient, CodecRegistry
from dex_agents import (
    AgentEvent,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import InProcessWorker
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

__all__ = [
    "NeverRunRunner",
    "ScriptedRunner",
    "SessionStack",
    "assistant",
    "final_answer_with_results",
    "read_events_until",
    "record_rpc_outputs",
    "request_tools",
    "running_flow_stack",
    "running_session_stack",
    "tool_call",
    "tool_returning",
]

ModelScript = Callable[[AgentTurnContext], AgentTurnOutcome]
ToolHandler = Callable[[DeferredToolExecution], Awaitable[ToolExecutionResult]]


def assistant(text: str) -> FrameworkMessage:
    """An assistant message as the scripted model returns it."""
    return FrameworkMessage(
        role=MessageRole.ASSISTANT, framework_item=json.dumps({"assistant": text}), text=text
    )


def tool_returning(output: str) -> ToolHandler:
    """A tool handler that returns ``output`` every time it runs."""

    async def handler(call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult(output)

    return handler


def tool_call(
    turn: AgentTurnContext, call_id: str, name: str, arguments: object
) -> DeferredToolCall:
    """A requested call whose policy comes from the turn, as a runner builds it."""
    return DeferredToolCall(call_id, name, json.dumps(arguments), turn.resolve_tool_policy(name))


def request_tools(turn: AgentTurnContext, *calls: DeferredToolCall) -> ToolCallsRequested:
    """A ToolCallsRequested whose run state lists the call IDs."""
    state = json.dumps([call.tool_call_id for call in calls])
    return ToolCallsRequested(state, calls, AgentUsage(input_tokens=10, output_tokens=2))


def final_answer_with_results(turn: AgentTurnContext) -> TurnCompleted:
    """A final answer quoting every recorded tool result, in deferral order."""
    results = "; ".join(
        f"{record.tool_name}={describe_tool_call_outcome(record)}"
        for record in turn.tool_calls.values()
    )
    return TurnCompleted((assistant(results),), AgentUsage(input_tokens=7, output_tokens=3))


class NeverRunRunner:
    """A runner for a Flow that is built, registered or called but never runs a turn: it only
    builds user messages, and fails any model call or tool call it is asked for."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        raise NotImplementedError

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        raise NotImplementedError


@dataclass
class ScriptedRunner:
    """A runner whose model is ``script`` and whose tools are ``tools``; it counts real calls."""

    script: ModelScript
    tools: Mapping[str, ToolHandler] = field(default_factory=dict)
    before_model_call: Callable[[AgentTurnContext], Awaitable[None]] | None = None
    model_calls: list[AgentTurnContext] = field(default_factory=list)
    tool_calls: list[DeferredToolExecution] = field(default_factory=list)

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(
            role=MessageRole.USER, framework_item=json.dumps({"user": text}), text=text
        )

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        self.model_calls.append(turn)
        if self.before_model_call is not None:
            await self.before_model_call(turn)
        return self.script(turn)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.tool_calls.append(call)
        return await self.tools[call.tool_call.tool_name](call)


@dataclass
class SessionStack:
    """An in-process Worker on the test session's engine serving one session Flow, its Client,
    and the Flow's sessions (under the test's session-ID prefix: ``dex.scoped(id)`` for the raw
    Client and the engine's history)."""

    dex: InProcessWorker
    client: AsyncClient
    flow: AgentSessionFlow
    sessions: AgentSessionClient

    @property
    def server_address(self) -> str:
        """The engine's address."""
        return self.dex.server_address


async def read_events_until(
    stack: SessionStack, session_id: str, is_last: Callable[[AgentEvent], bool]
) -> list[AgentEvent]:
    """Read the session's AgentEvents from the start through the first event ``is_last`` accepts."""
    events: list[AgentEvent] = []
    token = ""
    while True:
        message = await stack.client.read_stream(
            stack.dex.scoped(session_id), stack.flow.agent_events, token
        )
        events.append(message.value)
        token = message.resume_token
        if is_last(message.value):
            return events


@asynccontextmanager
async def running_session_stack(
    workers: InProcessWorkerFactory,
    runner: ScriptedRunner,
    options: AgentSessionOptions | None = None,
    *,
    flow_type: str = "TestAgent",
) -> AsyncIterator[SessionStack]:
    """An in-process Worker serving a session Flow of ``runner`` (``workers`` is the
    ``dex_in_process_worker`` fixture), and a Client."""
    flow = AgentSessionFlow(runner, flow_type=flow_type, options=options)
    async with running_flow_stack(workers, flow) as stack:
        yield stack


@asynccontextmanager
async def running_flow_stack(
    workers: InProcessWorkerFactory,
    flow: AgentSessionFlow,
    *,
    worker_codecs: CodecRegistry | None = None,
    client_codecs: CodecRegistry | None = None,
) -> AsyncIterator[SessionStack]:
    """An in-process Worker serving ``flow`` (``workers`` is the ``dex_in_process_worker``
    fixture), and a Client.

    Both use the SDK's default codecs unless ``worker_codecs``/``client_codecs`` are given.
    """
    if not isinstance(workers, InProcessWorkerFactory):
        raise TypeError(
            "running_flow_stack and running_session_stack take the dex_in_process_worker "
            f"fixture (the shared engine), not {type(workers).__name__}"
        )
    async with workers(
        [flow],
        codecs=worker_codecs or CodecRegistry(),
        client_codecs=client_codecs or CodecRegistry(),
    ) as dex:
        yield SessionStack(dex, dex.client, flow, dex.sessions(flow))


def record_rpc_outputs(client: AsyncClient) -> list[tuple[str, Any]]:
    """Record each RPC's name and output from now on (wrapping the instance's ``invoke_rpc``)."""
    outputs: list[tuple[str, Any]] = []
    original: Callable[..., Awaitable[Any]] = client.invoke_rpc

    async def recorded(method: Any, *args: Any, **kw: Any) -> Any:
        output = await original(method, *args, **kw)
        outputs.append((method.__name__, output))
        return output

    # On the instance, so only this test's client is wrapped.
    client.invoke_rpc = recorded
    return outputs
