"""The smallest adapter of "Writing an adapter" (docs/writing-an-adapter.md) runs as written, and
passes the shared scenario suite (``writing_an_adapter_runner``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_session_test_support import running_session_stack
from dex_agents import MessageRole, ToolEffect
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.testing.scenarios import SCENARIO_RUNNERS_ENV, SCENARIO_RUNNERS_EXTRA_ENV
from writing_an_adapter_runner import RUNNER_NAME, guide_namespace

TESTS_DIR = Path(__file__).resolve().parent
REPOSITORY_DIR = TESTS_DIR.parents[2]
LONG_TESTS = os.environ.get("DEX_AGENTS_LONG_TESTS") == "1"

_ORDER_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}


async def _model(request: Any) -> Any:
    text = request.user_texts[-1]
    if text.startswith("call ") and not request.tool_outputs:
        name, _, order_id = text.removeprefix("call ").partition(" ")
        return [(name, {"order_id": order_id})]
    if request.tool_outputs:
        return "; ".join(request.tool_outputs)
    return f"Echo: {text}"


async def test_the_guide_s_runner_chats_and_calls_tools_with_the_kit_s_outcomes(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    guide = guide_namespace()
    lookup = guide["TinyTool"](
        lambda order_id: f"order {order_id} shipped", _ORDER_SCHEMA, ToolEffect.READ
    )
    runner = guide["TinyRunner"](_model, {"lookup": lookup})
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("tiny", "hello")
        await wait_for_agent_snapshot(stack.sessions, "tiny", turn_ended(1))
        await stack.sessions.send_user_message("tiny", "call lookup 7")
        await wait_for_agent_snapshot(stack.sessions, "tiny", turn_ended(2))
        await stack.sessions.send_user_message("tiny", "call refund 7")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "tiny", turn_ended(3))

    answers = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT and m.text]
    assert answers == ["Echo: hello", "order 7 shipped", "Error: unknown tool refund"]
    results = [
        (m.tool_name, m.tool_output) for m in snapshot.messages if m.role is MessageRole.TOOL
    ]
    assert results == [("lookup", "order 7 shipped"), ("refund", "Error: unknown tool refund")]


def _shared_suite(*selection: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        SCENARIO_RUNNERS_EXTRA_ENV: f"{RUNNER_NAME}=writing_an_adapter_runner:SCENARIO_RUNNER",
        SCENARIO_RUNNERS_ENV: RUNNER_NAME,
        # The Worker children import the runner module too.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", *selection, "-n", "0", "-q", "-p", "no:randomly"],
        cwd=REPOSITORY_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def test_the_guide_s_runner_passes_the_shared_scenarios_of_uniform_outcomes() -> None:
    result = _shared_suite("tests-shared/test_uniform_outcomes.py")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "4 passed" in result.stdout


@pytest.mark.long
@pytest.mark.skipif(not LONG_TESTS, reason="the whole shared suite: DEX_AGENTS_LONG_TESTS=1")
def test_the_guide_s_runner_passes_the_whole_shared_suite() -> None:
    result = _shared_suite("tests-shared")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
