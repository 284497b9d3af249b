"""One scenario's running stack: sessions of both agents, the current Worker, gates, counts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dex_agents import (
    AgentEventType,
    AgentInterrupt,
    AgentSnapshot,
)
from dex_agents.testing import (
    DEFAULT_WAIT_TIMEOUT_SECONDS,
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    FileGate,
    InvocationLog,
    PrefixedSessionClient,
    StepHistoryEntry,
    WorkerProcess,
    turn_ended,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.scenarios import ScenarioCommand, invocation_log


@dataclass
class Scenario:
    """What a scenario test works with.

    Every session ID a test names is started under ``prefix`` (see ``PrefixedSessionClient``), and
    ``state_dir`` is the directory of that prefix, so tests that share one engine and Worker
    never see each other's sessions, gates or logs. ``own_stack``: the test's engine and Worker
    are its own (marked ``dex_own_stack``), so it may kill the Worker.
    """

    runner: str
    stack: AgentTestStack
    state_dir: Path
    prefix: str
    sessions: PrefixedSessionClient
    deadline_sessions: PrefixedSessionClient
    worker: WorkerProcess
    own_stack: bool
    #: The MCP agent's sessions, for a runner that declares ScenarioFeature.MCP_TOOLS.
    mcp_sessions: PrefixedSessionClient | None = None

    def sessions_of(self, flow_type: str) -> PrefixedSessionClient:
        """The prefixed sessions of the stack's Flow ``flow_type``."""
        flow = next(f for f in self.stack.flows if f.get_flow_type() == flow_type)
        return PrefixedSessionClient(self.stack.client, flow, self.prefix)

    @property
    def log(self) -> InvocationLog:
        return invocation_log(self.state_dir)

    def gate(self, name: str) -> FileGate:
        return FileGate(self.state_dir, name)

    async def start(
        self,
        session_id: str,
        command: ScenarioCommand | str,
        *,
        deadline_agent: bool = False,
        mcp_agent: bool = False,
    ) -> None:
        sessions = self._agent(deadline_agent, mcp_agent)
        message = command if isinstance(command, str) else command.to_message()
        await sessions.start_session(session_id, message)

    def _agent(self, deadline_agent: bool, mcp_agent: bool) -> PrefixedSessionClient:
        if mcp_agent:
            assert self.mcp_sessions is not None, f"runner {self.runner} builds no MCP agent"
            return self.mcp_sessions
        return self.deadline_sessions if deadline_agent else self.sessions

    async def replace_worker(self) -> WorkerProcess:
        """SIGKILL the current Worker and start a replacement."""
        self._require_own_stack()
        self.worker.kill()
        self.worker = await self.stack.start_worker()
        return self.worker

    async def replace_dead_worker(self) -> WorkerProcess:
        """Wait until the current Worker has exited by itself, then start a replacement."""
        self._require_own_stack()
        worker = self.worker
        await wait_until("the Worker process to exit", lambda: not worker.is_running)
        self.worker = await self.stack.start_worker()
        return self.worker

    async def wait_for_turn_end(
        self,
        session_id: str,
        *,
        turns: int = 1,
        deadline_agent: bool = False,
        mcp_agent: bool = False,
    ) -> AgentSnapshot:
        sessions = self._agent(deadline_agent, mcp_agent)
        return await wait_for_agent_snapshot(
            sessions,
            session_id,
            turn_ended(turns),
            description=f"turn {turns} to end",
        )

    def _require_own_stack(self) -> None:
        if not self.own_stack:
            raise RuntimeError(
                "this test kills its Worker, which other tests share: mark it "
                "@pytest.mark.dex_own_stack"
            )

    async def raised_interrupt(
        self, session_id: str, *, deadline_agent: bool = False
    ) -> dict[str, Any]:
        """The payload of the session's first ``interrupt_raised`` event. Unlike the snapshot's
        pending interrupts it stays readable after the interrupt expired, so a test of a short
        deadline cannot miss it on a loaded machine."""
        return await self.first_event(
            session_id, AgentEventType.INTERRUPT_RAISED, deadline_agent=deadline_agent
        )

    async def first_event(
        self, session_id: str, event_type: AgentEventType, *, deadline_agent: bool = False
    ) -> dict[str, Any]:
        """The payload of the session's first event of ``event_type``, once the engine holds it."""
        sessions = self.deadline_sessions if deadline_agent else self.sessions
        async with asyncio.timeout(DEFAULT_WAIT_TIMEOUT_SECONDS):
            async for message in sessions.stream_events(session_id):
                if message.value.type == event_type:
                    return message.value.payload_json()
        raise AssertionError("the event stream ended")  # stream_events never ends

    async def wait_for_pending_interrupt(
        self, session_id: str, *, deadline_agent: bool = False
    ) -> AgentInterrupt:
        sessions = self.deadline_sessions if deadline_agent else self.sessions
        return await wait_for_agent_snapshot(
            sessions,
            session_id,
            lambda snapshot: next(iter(snapshot.pending_interrupts), None),
            description="a pending approval",
        )

    async def executed(self, session_id: str) -> list[StepHistoryEntry]:
        """The Steps whose Execute completed, in history order."""
        history = await self.stack.read_step_history(self.prefix + session_id)
        return [entry for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]

    async def executed_step_types(self, session_id: str) -> list[str]:
        return [entry.step_type for entry in await self.executed(session_id)]
