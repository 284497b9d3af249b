"""Start claims of single-attempt tool calls, with a real engine and Worker children SIGKILLed at
gates (``agent_session_test_support.claim_agent``): a call lost after its task reached a Worker
but before its tool started runs again, exactly once, and records ``succeeded``; a call whose tool
started before the loss stays ``outcome_unknown``; a claim that comes after its execution was
fenced is refused, so its tool never starts.
"""

from __future__ import annotations

from pathlib import Path

from agent_session_test_support.claim_agent import (
    CLAIM_GATE,
    GATES_REFUND_ENV,
    LOSES_CLAIM_ANSWER_ENV,
    REFUND_GATE,
    build_claim_flow,
    claim_answers,
    tool_log,
)
from agent_session_test_support.crash_agent import STATE_DIR_ENV
from dex_agents import AgentSnapshot
from dex_agents.testing import (
    AgentTestStack,
    EngineDurability,
    EngineLogs,
    EngineProcess,
    FileGate,
    turn_ended,
    wait_for_agent_snapshot,
    wait_until,
)

TESTS_DIR = Path(__file__).resolve().parent
WORKER = "agent_session_test_support.claim_worker"


def _refund_result(snapshot: AgentSnapshot) -> str:
    text = snapshot.messages[-1].text or ""
    assert snapshot.state is not None and snapshot.state.last_turn_error is None, text
    return text


async def test_a_worker_killed_before_the_tool_started_runs_the_call_once(tmp_path: Path) -> None:
    flow = build_claim_flow()
    async with AgentTestStack(
        tmp_path, [flow], WORKER, worker_cwd=TESTS_DIR, worker_env={STATE_DIR_ENV: str(tmp_path)}
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        await sessions.start_session("session-1", "refund order 7")
        # The task reached the Worker; its Step waits to claim the start: the tool has not run.
        await FileGate(tmp_path, CLAIM_GATE).wait_until_reached()
        worker.kill()

        await stack.start_worker()
        snapshot = await wait_for_agent_snapshot(
            sessions, "session-1", turn_ended(1), "the turn to finish", timeout=120
        )
        assert len(tool_log(tmp_path).records("refund")) == 1
        assert claim_answers(tmp_path) == ["granted"]
        assert "refund=refund done" in _refund_result(snapshot)
        history = await stack.read_step_history("session-1")
        executions = {(entry.step_type, entry.step_execution_id) for entry in history}
        tool_runs = [step for step, _ in executions if step == "CallSingleAttemptTool"]
        # The lost execution went to its failure route, which sent the call back to run.
        assert len(tool_runs) == 2
        assert any(step == "RecordToolOutcomeUnknown" for step, _ in executions)


async def test_a_worker_killed_in_a_started_tool_stays_outcome_unknown(tmp_path: Path) -> None:
    flow = build_claim_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        WORKER,
        worker_cwd=TESTS_DIR,
        worker_env={STATE_DIR_ENV: str(tmp_path), GATES_REFUND_ENV: "1"},
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        FileGate(tmp_path, CLAIM_GATE).release()
        await sessions.start_session("session-1", "refund order 7")
        refund = FileGate(tmp_path, REFUND_GATE)
        await refund.wait_until_reached()  # claimed, then started
        worker.kill()

        await stack.start_worker()
        refund.release()
        snapshot = await wait_for_agent_snapshot(
            sessions, "session-1", turn_ended(1), "the turn to finish", timeout=120
        )
        assert len(tool_log(tmp_path).records("refund")) == 1
        assert claim_answers(tmp_path) == ["granted"]
        assert "refund=The outcome of this tool call is unknown" in _refund_result(snapshot)


async def test_a_claim_after_its_execution_was_fenced_is_refused(tmp_path: Path) -> None:
    """The engine SIGKILLed while a Step waits to claim: after the restart the lost execution is
    fenced and the call runs again; the old execution's late claim is refused, its tool never
    starts."""
    database = tmp_path / "engine" / "engine.db"

    async def start_engine(generation: int, address: str) -> EngineProcess:
        return await EngineProcess.start_local(
            database,
            EngineLogs.in_directory(tmp_path / "engine", f"engine-{generation}"),
            durability=EngineDurability.PROCESS_CRASH_SAFE,
            address=address,
        )

    engine = await start_engine(1, "127.0.0.1:0")
    flow = build_claim_flow()
    try:
        async with AgentTestStack(
            tmp_path,
            [flow],
            WORKER,
            worker_cwd=TESTS_DIR,
            worker_env={STATE_DIR_ENV: str(tmp_path)},
            engine_address=engine.server_address,
        ) as stack:
            sessions = stack.sessions(flow)
            await stack.start_worker()
            await sessions.start_session("session-1", "refund order 7")
            claim = FileGate(tmp_path, CLAIM_GATE)
            await claim.wait_until_reached()
            engine.process.kill()
            engine.process.wait()
            engine = await start_engine(2, engine.server_address)

            # The same Worker lives on: the restarted engine counts the held execution as
            # lost, its failure route fences it, and the call runs again under a new one.
            snapshot = await wait_for_agent_snapshot(
                sessions, "session-1", turn_ended(1), "the turn to finish", timeout=120
            )
            assert "refund=refund done" in _refund_result(snapshot)
            claim.release()
            await wait_until(
                "the late claim to be answered",
                lambda: len(claim_answers(tmp_path)) == 2,
                timeout=60,
            )
            assert claim_answers(tmp_path) == ["granted", "refused"]
            assert len(tool_log(tmp_path).records("refund")) == 1
    finally:
        await engine.stop()


async def test_a_claim_whose_answer_was_lost_is_withdrawn_and_the_call_runs_once(
    tmp_path: Path,
) -> None:
    """Dex took the claim but its answer never reached the Worker: the tool did not start, the
    Step withdraws its claim before it fails, and the fence finds none, so the call runs again."""
    flow = build_claim_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        WORKER,
        worker_cwd=TESTS_DIR,
        worker_env={STATE_DIR_ENV: str(tmp_path), LOSES_CLAIM_ANSWER_ENV: "1"},
    ) as stack:
        sessions = stack.sessions(flow)
        await stack.start_worker()
        await sessions.start_session("session-1", "refund order 7")
        snapshot = await wait_for_agent_snapshot(
            sessions, "session-1", turn_ended(1), "the turn to finish", timeout=120
        )
        assert claim_answers(tmp_path) == ["granted", "granted"]
        assert len(tool_log(tmp_path).records("refund")) == 1
        assert "refund=refund done" in _refund_result(snapshot)
