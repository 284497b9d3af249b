"""A Worker SIGKILLed while its Claude Code CLI child runs: the CLI dies with it, the turn resumes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from dex_agents.testing import AgentTestStack, FileGate, wait_for_agent_snapshot, wait_until
from dex_agents.testing.scenarios import (
    MAIN_FLOW_TYPE,
    MODEL_INVOCATION,
    ScenarioCall,
    ScenarioCommand,
    build_scenario_flows,
    invocation_log,
    model_gate_name,
)

TESTS_DIR = Path(__file__).resolve().parent


def _children(pid: int) -> set[int]:
    children: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        children.update(int(child) for child in text)
    return children


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _is_claude_cli(pid: int) -> bool:
    try:
        return "claude" in Path(f"/proc/{pid}/cmdline").read_text()
    except FileNotFoundError:
        return False


async def test_a_killed_worker_leaves_no_cli_and_the_turn_resumes(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    flows = build_scenario_flows("claude-agent-sdk", state_dir)
    flow = next(f for f in flows if f.get_flow_type() == MAIN_FLOW_TYPE)
    async with AgentTestStack(
        tmp_path / "stack",
        flows,
        "claude_agent_sdk_test_worker",
        worker_cwd=TESTS_DIR,
        worker_env={"SCENARIO_STATE_DIR": str(state_dir)},
    ) as stack:
        worker = await stack.start_worker()
        sessions = stack.sessions(flow)
        command = ScenarioCommand(calls=(ScenarioCall("upsert", "up"),), gate_model_call=2)
        await sessions.start_session("crash", command.to_message())
        up = FileGate(state_dir, "up")
        await up.wait_until_reached()  # the idempotent write runs in its own tool Step
        up.release()
        gate = FileGate(state_dir, model_gate_name(2))
        await gate.wait_until_reached()  # the CLI waits for the model's second answer
        cli = {pid for pid in _children(worker.pid) if _is_claude_cli(pid)}
        assert cli, "the RunModel's Claude Code CLI should be running"

        os.kill(worker.pid, signal.SIGKILL)  # the Worker alone, not its process group

        async def cli_gone() -> bool | None:
            return True if not any(_alive(pid) for pid in cli) else None

        await wait_until("the killed Worker's CLI to exit", cli_gone)
        worker.kill()  # reap it
        await stack.start_worker()
        await gate.wait_until_reached(count=2)
        gate.release()
        snapshot = await wait_for_agent_snapshot(
            sessions,
            "crash",
            lambda s: (
                s
                if s.state and s.state.turn_count == 1 and s.state.active_turn_id is None
                else None
            ),
        )
    texts = [m.text for m in snapshot.messages if m.role == "assistant" and m.text]
    assert texts == ["done: upsert up ok"]
    log = invocation_log(state_dir)
    # The write ran once in its Step; the resumed RunModel replayed the first answer and asked
    # the model only for the killed call again.
    assert log.count("upsert") == 1
    assert log.keys(MODEL_INVOCATION) == ["call-1", "call-2", "call-2"]
