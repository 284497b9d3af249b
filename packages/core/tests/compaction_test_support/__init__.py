"""A scripted runner that compacts, and stacks whose Worker can be swapped, for storage tests.

``CompactingScriptedRunner`` answers each model call from a script like ``ScriptedRunner`` and
implements ``ContextCompactionRunner`` with the core's shared adapter rules, counting every summary
call. ``swappable_worker_stack`` keeps one engine while the test replaces the in-process Worker, such
as with other storage options.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from agent_session_test_support import ScriptedRunner
from dex import AsyncClient, CodecRegistry
from dex_agents import (
    AgentEvent,
    AgentMessage,
    AgentSessionClient,
    AgentSessionFlow,
    AgentTurnContext,
    AgentUsage,
    ContextSummaryRequest,
    ContextSummaryResult,
    MessageRole,
    estimate_stored_input_tokens,
    select_turn_boundary_cutoff,
)
from dex_agents.testing import (
    EngineLogs,
    EngineProcess,
    FlowAttributes,
    in_process_worker,
    read_flow_attributes,
)

__all__ = [
    "CompactingScriptedRunner",
    "SwappableStack",
    "calls_separated_by",
    "swappable_worker_stack",
]

SUMMARY_USAGE = AgentUsage(input_tokens=100, output_tokens=10)


@dataclass
class CompactingScriptedRunner(ScriptedRunner):
    """A ScriptedRunner that compacts with the shared rules and records every summary request."""

    summary_requests: list[ContextSummaryRequest] = field(default_factory=list)
    before_summary: Callable[[ContextSummaryRequest], object] | None = None

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return estimate_stored_input_tokens(turn)

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        return select_turn_boundary_cutoff(turn, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        self.summary_requests.append(request)
        if self.before_summary is not None:
            waited = self.before_summary(request)
            if asyncio.iscoroutine(waited):
                await waited
        first = request.messages[0].sequence if request.messages else None
        last = request.messages[-1].sequence if request.messages else None
        return ContextSummaryResult(f"summary of {first}..{last}", SUMMARY_USAGE)


def calls_separated_by(messages: list[AgentMessage], last_summarized: int) -> list[str]:
    """Tool call IDs whose call is at or before ``last_summarized`` and whose result is after."""
    calls = {
        m.tool_call_id: m.sequence
        for m in messages
        if m.role is MessageRole.ASSISTANT and m.tool_call_id
    }
    results = {m.tool_call_id: m.sequence for m in messages if m.role is MessageRole.TOOL}
    return sorted(
        call_id
        for call_id, sequence in calls.items()
        if sequence <= last_summarized < results.get(call_id, sequence)
    )


@dataclass
class SwappableStack:
    """One engine and Client; ``serve`` runs an in-process Worker for one Flow at a time."""

    engine: EngineProcess
    tmp_path: Path
    client: AsyncClient | None = None

    @asynccontextmanager
    async def serve(self, flow: AgentSessionFlow) -> AsyncIterator[AgentSessionClient]:
        """Serve ``flow`` with a fresh Client and Worker until the block ends (SDK codecs)."""
        async with in_process_worker(
            [flow], self.engine.server_address, self.tmp_path / "blob-cache", codecs=CodecRegistry()
        ) as dex:
            self.client = dex.client
            yield dex.sessions(flow)

    async def attributes(self, session_id: str) -> FlowAttributes:
        return await read_flow_attributes(self.engine.server_address, session_id)

    async def events_until(
        self, flow: AgentSessionFlow, session_id: str, is_last: Callable[[AgentEvent], bool]
    ) -> list[AgentEvent]:
        """The session's AgentEvents from the start through the first one ``is_last`` accepts."""
        assert self.client is not None, "read events inside serve()"
        events: list[AgentEvent] = []
        token = ""
        while True:
            message = await self.client.read_stream(session_id, flow.agent_events, token)
            events.append(message.value)
            token = message.resume_token
            if is_last(message.value):
                return events


@asynccontextmanager
async def swappable_worker_stack(tmp_path: Path) -> AsyncIterator[SwappableStack]:
    """Start an engine on ``tmp_path`` whose Workers the test starts with ``serve``."""
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db", EngineLogs.in_directory(tmp_path)
    )
    try:
        yield SwappableStack(engine, tmp_path)
    finally:
        await engine.stop()
