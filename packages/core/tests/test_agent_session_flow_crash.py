"""A Worker SIGKILLed while two tool Steps run: the write is never repeated, the read is."""

from __future__ import annotations

from pathlib import Path

from agent_session_test_support.crash_agent import STATE_DIR_ENV, build_crash_flow
from dex_agents.testing import (
    AgentTestStack,
    FileGate,
    InvocationLog,
    turn_ended,
    wait_for_agent_snapshot,
)

TESTS_DIR = Path(__file__).resolve().parent


async def test_worker_kill_during_parallel_tools(tmp_path: Path) -> None:
    flow = build_crash_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "agent_session_test_support.crash_worker",
        worker_cwd=TESTS_DIR,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        await sessions.start_session("session-1", "refund order 7")
        refund, lookup = FileGate(tmp_path, "refund"), FileGate(tmp_path, "lookup")
        # Both gates reached at once: the two tool Steps run in parallel.
        await refund.wait_until_reached()
        await lookup.wait_until_reached()
        worker.kill()

        await stack.start_worker()
        await lookup.wait_until_reached(count=2)
        lookup.release()
        refund.release()
        snapshot = await wait_for_agent_snapshot(
            sessions, "session-1", turn_ended(1), "the turn to finish", timeout=120
        )
        log = InvocationLog(tmp_path / "tools.log")
        assert len(log.records("refund")) == 1
        assert len(log.records("lookup")) == 2
        text = snapshot.messages[-1].text or ""
        assert "refund=The outcome of this tool call is unknown" in text
        assert "lookup=lookup done" in text
        assert snapshot.state is not None and snapshot.state.last_turn_error is None
