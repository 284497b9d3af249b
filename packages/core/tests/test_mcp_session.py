"""MCP tools in durable sessions: real MCP servers, the local engine, Worker child processes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from dex_agents.testing import turn_ended

pytest.importorskip("mcp", reason="the mcp extra (dex-agents[mcp]) is not installed")

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentSessionClient,
    AgentSnapshot,
    AgentToolCallStatus,
    InterruptKind,
    MessageRole,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    FileGate,
    InvocationLog,
    WorkerProcess,
    pending_interrupt,
    wait_for_agent_snapshot,
)
from mcp_test_support.agent import HTTP_URL_ENV, STATE_DIR_ENV, build_mcp_flow, command
from mcp_test_support.servers import HttpMcpServer
from warm_workers import fork_servers_off, forked_from_a_warm_parent

TESTS_DIR = Path(__file__).resolve().parent
# One xdist worker runs them all, so one warm parent forks every Worker (worker_preload_env).
pytestmark = pytest.mark.xdist_group("mcp-session-worker")


@dataclass
class _Stack:
    stack: AgentTestStack
    sessions: AgentSessionClient
    worker: WorkerProcess
    state_dir: Path
    http: HttpMcpServer

    @property
    def stdio_log(self) -> InvocationLog:
        return InvocationLog(self.state_dir / "invocations.jsonl")

    @property
    def http_log(self) -> InvocationLog:
        return InvocationLog(self.http.state_dir / "invocations.jsonl")

    async def executed(self, session_id: str) -> list[str]:
        history = await self.stack.read_step_history(session_id)
        return [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]

    async def turn_end(self, session_id: str) -> AgentSnapshot:
        return await wait_for_agent_snapshot(
            self.sessions, session_id, turn_ended(1), "the turn to end", timeout=90
        )


@pytest.fixture
async def mcp_stack(tmp_path: Path) -> AsyncIterator[_Stack]:
    state_dir = tmp_path / "stdio"
    async with HttpMcpServer(tmp_path / "http") as http:
        assert http.forked or fork_servers_off()  # mcp_test_support.server's preload works
        flow = build_mcp_flow(state_dir, http.url)
        async with AgentTestStack(
            tmp_path / "stack",
            [flow],
            "mcp_test_support.worker",
            worker_cwd=TESTS_DIR,
            worker_env={STATE_DIR_ENV: str(state_dir), HTTP_URL_ENV: http.url},
            # Each Worker forks from one warm parent per test process instead of importing again.
            worker_preload_env={},
        ) as stack:
            worker = await stack.start_worker()
            assert forked_from_a_warm_parent(worker)  # its module's preload_worker() works
            yield _Stack(stack, stack.sessions(flow), worker, state_dir, http)


def _reply(snapshot: AgentSnapshot) -> str:
    texts = [m.text for m in snapshot.messages if m.role == MessageRole.ASSISTANT and m.text]
    return texts[-1] if texts else ""


async def test_stdio_read_and_write_run_in_their_own_tool_steps(mcp_stack: _Stack) -> None:
    await mcp_stack.sessions.start_session(
        "rw",
        command(("files__lookup", {"item": "lamp"}), ("files__write", {"text": "note"})),
    )
    snapshot = await mcp_stack.turn_end("rw")

    assert _reply(snapshot) == "done: lamp is in stock; wrote note"
    executed = await mcp_stack.executed("rw")
    assert executed.count("CallTool") == 1  # the read
    assert executed.count("CallSingleAttemptTool") == 1  # the write
    (key,) = mcp_stack.stdio_log.keys("write")
    assert key.startswith("rw/turn-1/")


async def test_stdio_server_killed_mid_call(mcp_stack: _Stack) -> None:
    # The server exits during each call, and the Worker's shared connection to it with it: the
    # read is sent again (on a new connection) with the same key, the write never is.
    await mcp_stack.sessions.start_session(
        "exit", command(("files__lookup", {"item": "lamp", "gate": "!exit-once-read"}))
    )
    assert _reply(await mcp_stack.turn_end("exit")) == "done: lamp is in stock"
    first, second = mcp_stack.stdio_log.keys("lookup")
    assert first == second

    await mcp_stack.sessions.start_session(
        "exit-write", command(("files__write", {"text": "note", "gate": "!exit"}))
    )
    snapshot = await mcp_stack.turn_end("exit-write")
    assert _reply(snapshot) == f"done: {OUTCOME_UNKNOWN_TOOL_RESULT}"
    assert mcp_stack.stdio_log.count("write") == 1
    executed = await mcp_stack.executed("exit-write")
    assert "RecordToolOutcomeUnknown" in executed


async def test_http_task_is_polled_across_a_worker_sigkill(mcp_stack: _Stack) -> None:
    await mcp_stack.sessions.start_session(
        "task", command(("tickets__slow_report", {"item": "q3", "gate": "report"}))
    )
    gate = FileGate(mcp_stack.http.state_dir, "report")
    await gate.wait_until_reached()

    def waiting(snapshot: AgentSnapshot) -> bool:
        return any(
            call.status == AgentToolCallStatus.WAITING_FOR_TASK and call.task_id
            for call in snapshot.tool_calls
        )

    await wait_for_agent_snapshot(mcp_stack.sessions, "task", waiting, "the call to wait")
    mcp_stack.worker.kill()  # no Step holds a connection while the task runs
    mcp_stack.worker = await mcp_stack.stack.start_worker()
    gate.release()
    snapshot = await mcp_stack.turn_end("task")

    assert _reply(snapshot) == "done: report on q3 ready"
    assert mcp_stack.http_log.count("slow_report") == 1  # the tool was never called again
    executed = await mcp_stack.executed("task")
    assert executed.count("CallTool") == 1
    assert executed.count("PollToolTask") >= 1


async def test_an_elicitation_becomes_a_question_answered_once(mcp_stack: _Stack) -> None:
    await mcp_stack.sessions.start_session("ask", command(("tickets__ask_account", {})))
    interrupt = await wait_for_agent_snapshot(
        mcp_stack.sessions,
        "ask",
        pending_interrupt,
        "the task's question",
    )
    assert interrupt.kind == InterruptKind.QUESTION
    assert (interrupt.question, interrupt.choices) == ("Which account?", ("checking", "savings"))
    assert interrupt.interrupt_id.endswith("-input-1")
    assert not await mcp_stack.sessions.answer_question("ask", interrupt.interrupt_id, "gold")
    assert await mcp_stack.sessions.answer_question("ask", interrupt.interrupt_id, "savings")
    snapshot = await mcp_stack.turn_end("ask")

    assert _reply(snapshot) == "done: charged savings"
    assert mcp_stack.http_log.count("ask_account_answered") == 1


async def test_a_declined_elicitation_reaches_the_task_as_decline(mcp_stack: _Stack) -> None:
    await mcp_stack.sessions.start_session("decline", command(("tickets__ask_account", {})))
    interrupt = await wait_for_agent_snapshot(
        mcp_stack.sessions,
        "decline",
        pending_interrupt,
        "the task's question",
    )
    assert await mcp_stack.sessions.resolve_interrupt(
        "decline", interrupt.interrupt_id, approved=False
    )
    snapshot = await mcp_stack.turn_end("decline")
    assert _reply(snapshot) == "done: no account: decline"


async def test_cancel_turn_abandons_the_task_and_sends_tasks_cancel(mcp_stack: _Stack) -> None:
    await mcp_stack.sessions.start_session(
        "cancel", command(("tickets__slow_report", {"item": "q4", "gate": "never"}))
    )

    def waiting(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        tasks = [c for c in snapshot.tool_calls if c.status == AgentToolCallStatus.WAITING_FOR_TASK]
        return snapshot if tasks else None

    snapshot = await wait_for_agent_snapshot(mcp_stack.sessions, "cancel", waiting, "the task")
    assert snapshot.state is not None and snapshot.state.active_turn_id is not None
    assert await mcp_stack.sessions.cancel_turn("cancel", snapshot.state.active_turn_id)
    await mcp_stack.turn_end("cancel")

    await wait_for_agent_snapshot(
        mcp_stack.sessions,
        "cancel",
        lambda _: mcp_stack.http_log.count("tasks/cancel") == 1,
        "tasks/cancel to reach the server",
    )
    assert "CancelToolTask" in await mcp_stack.executed("cancel")
