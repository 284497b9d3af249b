"""The README's example and ``examples/openai-agents/durable_turn.py``, run as written in a child
process, each with the embedded engine it starts itself; the README's twice, the second run
continuing the same session in the same database."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EngineLogs,
    EngineProcess,
    read_step_history,
)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]


def _readme_example() -> str:
    readme = (PACKAGE_DIR / "README.md").read_text()
    section = readme.split("## Example", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the README's Example section has no python block"
    return match.group(1)


async def _run(script: Path, cwd: Path) -> str:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(child.communicate(), timeout=180)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    text = output.decode()
    assert child.returncode == 0, text
    return text


async def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(_readme_example())
    first = await _run(script, tmp_path)
    second = await _run(script, tmp_path)

    for turn, output in (("turn-1", first), ("turn-2", second)):
        assert output.splitlines() == [
            "approval asked for refund_order",
            f"{turn} completed Done: refunded order 7 (idempotency key session-42/{turn}/call_refund)",
            "  lookup_order: succeeded",
            "  refund_order: succeeded",
        ]
    database = tmp_path / ".dex-agents" / "engine.db"
    engine = await EngineProcess.start_local(database, EngineLogs.in_directory(tmp_path))
    try:
        history = await read_step_history(engine.server_address, "session-42")
    finally:
        await engine.stop()
    executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
    named = ["RunModel", "CallTool", "AwaitToolApproval", "CallSingleAttemptTool"]
    one_turn = [
        "RunModel",
        "CallTool",
        "RunModel",
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "RunModel",
    ]
    assert [step for step in executed if step in named] == one_turn * 2


async def test_the_example_script_prints_the_turns_events_and_messages(tmp_path: Path) -> None:
    output = await _run(REPOSITORY_DIR / "examples" / "openai-agents" / "durable_turn.py", tmp_path)

    events = [line for line in output.splitlines() if line.startswith("event ")]
    kinds = [line.split(":", 1)[0].removeprefix("event ") for line in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed"
    assert (
        kinds.index("tool_call_started")
        < kinds.index("tool_call_finished")
        < kinds.index("text_delta")
    )
    assert '"status":"succeeded"' in events[kinds.index("tool_call_finished")]
    stored = output.split("stored messages:\n", 1)[1].splitlines()
    assert stored == [
        "  1 user: Where is order 7?",
        '  2 assistant: lookup_order({"order_id":"7"})',
        "  3 tool: order 7: one teapot, shipped yesterday",
        "  4 assistant: Good news: order 7: one teapot, shipped yesterday.",
    ]
