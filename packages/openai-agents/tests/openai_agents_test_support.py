"""Shared pieces of this package's tests: turn probes, and a driver that calls the runner's
methods the way the session's Steps do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dex_agents import (
    AgentInterrupt,
    AgentSessionFlow,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    ToolCallsRequested,
)
from dex_agents.testing import (
    InProcessWorker,
    TurnContextBuilder,
    pending_interrupt,
    wait_for_agent_snapshot,
)
from dex_agents_openai_agents import OpenAIAgentsRunner

__all__ = [
    "TurnDriver",
    "wait_for_interrupt",
]


async def wait_for_interrupt(
    dex: InProcessWorker, flow: AgentSessionFlow, session_id: str
) -> AgentInterrupt:
    """The session's first pending interrupt, once there is one."""
    return await wait_for_agent_snapshot(
        dex.sessions(flow),
        session_id,
        pending_interrupt,
        description=f"a pending interrupt of {session_id}",
    )


@dataclass
class TurnDriver:
    """Calls ``run_model_step`` like ``RunModel`` does, with committed state only: stored
    messages, the run state, and final records that a test fills in."""

    runner: OpenAIAgentsRunner
    enabled_built_in_tools: frozenset[str] = frozenset()
    turns: TurnContextBuilder = field(
        default_factory=lambda: TurnContextBuilder(step_execution_id=None)
    )
    run_state: str | None = None
    records: dict[str, AgentToolCall] = field(default_factory=dict)

    def start_turn(self, text: str) -> None:
        self.run_state = None
        self.records = {}
        self.turns.start_turn(self.runner.build_user_message(text))

    def context(self) -> AgentTurnContext:
        return self.turns.context(
            run_state=self.run_state,
            records=self.records.values(),
            enabled_built_in_tools=self.enabled_built_in_tools,
        )

    async def model_step(self) -> AgentTurnOutcome:
        """One ``run_model_step``; stores its messages as the session would."""
        outcome = await self.runner.run_model_step(self.context())
        self.turns.store(outcome.new_messages)
        if isinstance(outcome, ToolCallsRequested):
            self.run_state = outcome.framework_run_state
        return outcome

    def record(
        self,
        outcome: ToolCallsRequested,
        result: Callable[[str], tuple[AgentToolCallStatus, str]],
    ) -> None:
        """Final records for every call of ``outcome``: ``result(tool_name)`` gives the status and
        the output (or error)."""
        for order, call in enumerate(outcome.tool_calls):
            status, text = result(call.tool_name)
            self.records[call.tool_call_id] = AgentToolCall(
                call.tool_call_id,
                call.tool_name,
                call.arguments,
                call.policy.effect,
                call.policy.requires_approval,
                status,
                self.turns.turn_id,
                order,
                output=text if status is AgentToolCallStatus.SUCCEEDED else None,
                error=text if status is not AgentToolCallStatus.SUCCEEDED else None,
                tool_source_reference=call.tool_source_reference,
            )
