"""A Worker SIGKILLed while its Claude Code CLI child runs: the CLI dies with it, the turn resumes."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

from dex_agents.testing import (
    AgentTestStack,
    FileGate,
    wait_for_turn_end,
    wait_until,
)
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


def _temp_directories_of(pid: int) -> list[Path]:
    """The turn and launcher directories the harness made in process ``pid``."""
    prefixes = (f"dex-agents-claude-{pid}-", f"dex-agents-cli-launcher-{pid}-")
    return [p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith(prefixes)]


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
        # Both Workers fork from a parent that has imported the SDKs: the restart after the
        # SIGKILL does not import them again.
        worker_preload_env={},
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
        killed_pid = worker.pid
        worker.kill()  # reap it
        # Its cleanup never ran: the next Worker's first turn removes what it left.
        assert _temp_directories_of(killed_pid), "the killed Worker's turn directory"
        await stack.start_worker()
        await gate.wait_until_reached(count=2)
        gate.release()
        snapshot = await wait_for_turn_end(sessions, "crash", 1)
    texts = [m.text for m in snapshot.messages if m.role == "assistant" and m.text]
    assert texts == ["done: upsert up ok"]
    log = invocation_log(state_dir)
    # The write ran once in its Step; the resumed RunModel replayed the first answer and asked
    # the model only for the killed call again.
    assert log.count("upsert") == 1
    assert log.keys(MODEL_INVOCATION) == ["call-1", "call-2", "call-2"]
    assert _temp_directories_of(killed_pid) == []
