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

from agent_session_test_support import ScriptedRunner
from dex import AsyncClient, CodecRegistry
from dex_agents import (
    AgentEvent,
    AgentSessionClient,
    AgentSessionFlow,
    AgentTurnContext,
    AgentUsage,
    ContextSummaryRequest,
    ContextSummaryResult,
    estimate_stored_input_tokens,
    select_turn_boundary_cutoff,
)
from dex_agents.testing import (
    FlowAttributes,
    InProcessWorker,
    StepHistoryEntry,
    read_flow_attributes,
    read_step_history,
)

# The context window scenario's own check: the flow tests and its report find a cut alike.
from dex_agents.testing._context_window_scenario import _separated_calls as calls_separated_by
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

__all__ = [
    "CompactingScriptedRunner",
    "SharedCompactionRules",
    "SwappableStack",
    "calls_separated_by",
    "swappable_worker_stack",
]

SUMMARY_USAGE = AgentUsage(input_tokens=100, output_tokens=10)


class SharedCompactionRules:
    """The compaction half of a test runner that the core's shared rules decide: the estimate of
    the stored messages and a cutoff between turns (the runner writes ``summarize_context``)."""

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return estimate_stored_input_tokens(turn)

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        return select_turn_boundary_cutoff(turn, retained_token_budget)


@dataclass
class CompactingScriptedRunner(SharedCompactionRules, ScriptedRunner):
    """A ScriptedRunner that compacts with the shared rules and records every summary request."""

    summary_requests: list[ContextSummaryRequest] = field(default_factory=list)
    before_summary: Callable[[ContextSummaryRequest], object] | None = None

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        self.summary_requests.append(request)
        if self.before_summary is not None:
            waited = self.before_summary(request)
            if asyncio.iscoroutine(waited):
                await waited
        first = request.messages[0].sequence if request.messages else None
        last = request.messages[-1].sequence if request.messages else None
        return ContextSummaryResult(f"summary of {first}..{last}", SUMMARY_USAGE)


@dataclass
class SwappableStack:
    """In-process Workers on the test session's engine, serving one Flow at a time (``serve``);
    the test's sessions outlive each Worker (``workers`` is the ``dex_in_process_worker``
    fixture)."""

    workers: InProcessWorkerFactory
    dex: InProcessWorker | None = None

    @property
    def client(self) -> AsyncClient | None:
        """The Client of the Worker served last."""
        return None if self.dex is None else self.dex.client

    @property
    def server_address(self) -> str:
        assert self.dex is not None, "serve a Flow first"
        return self.dex.server_address

    def scoped(self, session_id: str) -> str:
        """``session_id`` as the engine sees it, under the test's prefix."""
        return self.workers.session_prefix + session_id

    @asynccontextmanager
    async def serve(self, flow: AgentSessionFlow) -> AsyncIterator[AgentSessionClient]:
        """Serve ``flow`` with a fresh Client and Worker until the block ends (SDK codecs)."""
        async with self.workers([flow], codecs=CodecRegistry()) as dex:
            self.dex = dex
            yield dex.sessions(flow)

    async def attributes(self, session_id: str) -> FlowAttributes:
        return await read_flow_attributes(self.server_address, self.scoped(session_id))

    async def read_step_history(self, session_id: str) -> list[StepHistoryEntry]:
        return await read_step_history(self.server_address, self.scoped(session_id))

    async def events_until(
        self, flow: AgentSessionFlow, session_id: str, is_last: Callable[[AgentEvent], bool]
    ) -> list[AgentEvent]:
        """The session's AgentEvents from the start through the first one ``is_last`` accepts."""
        assert self.client is not None, "read events inside serve()"
        events: list[AgentEvent] = []
        token = ""
        while True:
            message = await self.client.read_stream(
                self.scoped(session_id), flow.agent_events, token
            )
            events.append(message.value)
            token = message.resume_token
            if is_last(message.value):
                return events


@asynccontextmanager
async def swappable_worker_stack(workers: InProcessWorkerFactory) -> AsyncIterator[SwappableStack]:
    """A stack whose Workers the test starts with ``serve``, on the test session's engine."""
    yield SwappableStack(workers)
