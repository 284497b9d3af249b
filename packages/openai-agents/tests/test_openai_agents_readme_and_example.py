"""The README's example and ``examples/openai-agents/durable_turn.py``, run as written in a child
process, each with the embedded engine it starts itself; the README's twice, the second run
continuing the same session in the same database."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EngineLogs,
    EngineProcess,
    printed_section,
    read_step_history,
    readme_example_lines,
    run_example_script,
)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]


async def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    runs = await asyncio.to_thread(
        readme_example_lines, PACKAGE_DIR / "README.md", tmp_path, "Example", file_name="agent.py"
    )

    for turn, lines in zip(("turn-1", "turn-2"), runs, strict=True):
        assert lines == [
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
    script = REPOSITORY_DIR / "examples" / "openai-agents" / "durable_turn.py"
    run = await asyncio.to_thread(run_example_script, script, cwd=tmp_path)
    assert run.stderr == ""
    output = run.stdout

    events = [line for line in output.splitlines() if line.startswith("event ")]
    kinds = [line.split(":", 1)[0].removeprefix("event ") for line in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed"
    assert (
        kinds.index("tool_call_started")
        < kinds.index("tool_call_finished")
        < kinds.index("text_delta")
    )
    assert '"status":"succeeded"' in events[kinds.index("tool_call_finished")]
    assert printed_section(output, "stored messages:") == [
        "  1 user: Where is order 7?",
        '  2 assistant: lookup_order({"order_id":"7"})',
        "  3 tool: order 7: one teapot, shipped yesterday",
        "  4 assistant: Good news: order 7: one teapot, shipped yesterday.",
    ]
